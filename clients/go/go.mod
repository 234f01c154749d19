module dlock.dev/clients/go

go 1.21
