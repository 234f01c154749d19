package dlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	dlock "dlock.dev/clients/go"
)

// The first lock of README.md and docs/clients.md (compiled here; the scenario runner makes
// these calls against real dlockd).
func Example() {
	ctx := context.Background()
	client, err := dlock.New(dlock.Config{Servers: []string{"http://127.0.0.1:7070"}}) // or DLOCK_SERVER
	if err != nil {
		log.Fatal(err)
	}
	lock, err := client.Lock(ctx, "payouts/batch-17", dlock.LockOptions{TTL: 10 * time.Second, Wait: 5 * time.Second})
	if err != nil {
		log.Fatal(err) // errors.Is(err, dlock.ErrHeld): not granted within 5 s
	}
	defer lock.Release(ctx)
	if err := lock.Check(); err != nil { // dlock.ErrLockLost once the lock is not trusted
		log.Fatal(err)
	}
	fmt.Println("holding with token", lock.Token())
}

// A session with several grants; the lost channel ends the work when a grant is lost.
func ExampleSession_Acquire() {
	ctx := context.Background()
	client, _ := dlock.New(dlock.Config{})
	session, err := client.OpenSession(ctx, dlock.SessionOptions{TTL: 15 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close(ctx)
	lock, err := session.Acquire(ctx, "report", dlock.LockOptions{Mode: dlock.Shared, TTL: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	work, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-lock.Lost(): // the lock is lost: stop writing under it
			stop()
		case <-work.Done():
		}
	}()
	_ = work // ... the work, with lock.Token() on every write
}
