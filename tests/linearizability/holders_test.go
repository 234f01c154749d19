package lincheck

import "testing"

func TestRWLockModel(t *testing.T) {
	runCases(t, RWLock, []historyCase{
		{"readers share, a writer waits for them", `
			1 s1 acquire mode=shared @0-10 -> ok token=1
			2 s2 acquire mode=shared @20-30 -> ok token=2
			3 s3 acquire mode=exclusive @40-50 -> held
			1 s1 release token=1 @60-70 -> ok
			2 s2 release token=2 @80-90 -> ok
			3 s3 acquire mode=exclusive @100-110 -> ok token=3
			1 s1 acquire mode=shared @120-130 -> held
			4 - read @140-150 -> ok holders=s3#3`, VerdictOk},
		{"a writer granted beside a reader", `
			1 s1 acquire mode=shared @0-10 -> ok token=1
			3 s3 acquire mode=exclusive @40-50 -> ok token=2`, VerdictIllegal},
		{"a reader granted beside a writer", `
			1 s1 acquire mode=exclusive @0-10 -> ok token=1
			2 s2 acquire mode=shared @20-30 -> ok token=2`, VerdictIllegal},
		{"a writer's token not greater than a reader's", `
			1 s1 acquire mode=shared @0-10 -> ok token=8
			1 s1 release token=8 @20-30 -> ok
			3 s3 acquire mode=exclusive @40-50 -> ok token=6`, VerdictIllegal},
		{"no upgrade: the only reader asking exclusive is held", `
			1 s1 acquire mode=shared @0-10 -> ok token=1
			1 s1 acquire mode=exclusive @20-30 -> held`, VerdictOk},
		{"no upgrade: the only reader granted exclusive", `
			1 s1 acquire mode=shared @0-10 -> ok token=1
			1 s1 acquire mode=exclusive @20-30 -> ok token=2`, VerdictIllegal},
		{"a reader's second acquire replaces its holder", `
			1 s1 acquire mode=shared @0-10 -> ok token=1
			1 s1 acquire mode=shared @20-30 -> ok token=2
			4 - read @40-50 -> ok holders=s1#2
			1 s1 release token=1 @60-70 -> lock_lost`, VerdictOk},
		{"held with only readers when asking shared", `
			1 s1 acquire mode=shared @0-10 -> ok token=1
			2 s2 acquire mode=shared @20-30 -> held`, VerdictIllegal},
		{"held behind a queued writer (no starvation of writers)", `
			1 s1 acquire mode=shared @0-10 -> ok token=1
			3 s3 acquire mode=exclusive wait=1000 @20-1020 -> held
			2 s2 acquire mode=shared @30-40 -> held`, VerdictOk},
		{"an unknown writer that took effect", `
			1 s1 acquire mode=exclusive ttl=1000 @0-10 -> unknown
			2 s2 acquire mode=shared @20-30 -> held
			2 s2 acquire mode=shared @1100-1110 -> ok token=5`, VerdictOk},
		{"an unknown reader that did not take effect", `
			1 s1 acquire mode=shared ttl=60000 @0-10 -> unknown
			2 s2 acquire mode=exclusive @20-30 -> ok token=5`, VerdictOk},
		{"a session's close ends its grants", `
			1 s1 acquire mode=shared @0-10 -> ok token=1
			2 s2 acquire mode=shared @0-10 -> ok token=2
			1 s1 close @20-30 -> ok
			3 - read @40-50 -> ok holders=s2#2
			2 s2 close @60-70 -> unknown
			3 s3 acquire mode=exclusive @80-90 -> ok token=3`, VerdictOk},
		{"a grant after a close of another session", `
			1 s1 acquire mode=shared @0-10 -> ok token=1
			2 s2 close @20-30 -> ok
			3 s3 acquire mode=exclusive @40-50 -> ok token=3`, VerdictIllegal},
		{"readers expire at their promise", `
			1 s1 acquire mode=shared ttl=1000 @0-10 -> ok token=1
			2 s2 acquire mode=shared ttl=2000 @0-10 -> ok token=2
			3 s3 acquire mode=exclusive @1500-1510 -> ok token=3`, VerdictIllegal},
	})
}

func TestSemaphoreModel(t *testing.T) {
	runCases(t, Semaphore, []historyCase{
		{"two permits of two", `
			1 s1 acquire limit=2 @0-10 -> ok token=1
			2 s2 acquire limit=2 @20-30 -> ok token=2
			3 s3 acquire limit=2 @40-50 -> held
			1 s1 release token=1 @60-70 -> ok
			3 s3 acquire limit=2 @80-90 -> ok token=3
			4 - read @100-110 -> ok holders=s2#2,s3#3`, VerdictOk},
		{"a permit over the limit", `
			1 s1 acquire limit=2 @0-10 -> ok token=1
			2 s2 acquire limit=2 @20-30 -> ok token=2
			3 s3 acquire limit=2 @40-50 -> ok token=3`, VerdictIllegal},
		{"held with a permit free", `
			1 s1 acquire limit=2 @0-10 -> ok token=1
			2 s2 acquire limit=2 @20-30 -> held`, VerdictIllegal},
		{"another limit while permits live is a conflict", `
			1 s1 acquire limit=2 @0-10 -> ok token=1
			2 s2 acquire limit=3 @20-30 -> conflict
			1 s1 release token=1 @40-50 -> ok
			2 s2 acquire limit=3 @60-70 -> ok token=2`, VerdictOk},
		{"a conflict with no permit live", `
			1 s1 acquire limit=2 @0-10 -> ok token=1
			1 s1 release token=1 @20-30 -> ok
			2 s2 acquire limit=3 @40-50 -> conflict`, VerdictIllegal},
		{"granted on another limit while a permit lives", `
			1 s1 acquire limit=2 @0-10 -> ok token=1
			2 s2 acquire limit=3 @20-30 -> ok token=2`, VerdictIllegal},
		{"a session's second acquire replaces its permit", `
			1 s1 acquire limit=1 @0-10 -> ok token=1
			1 s1 acquire limit=1 @20-30 -> ok token=2
			2 s2 acquire limit=1 @40-50 -> held
			4 - read @60-70 -> ok holders=s1#2`, VerdictOk},
		{"a session holding the only permit sets a new limit", `
			1 s1 acquire limit=1 @0-10 -> ok token=1
			1 s1 acquire limit=2 @20-30 -> ok token=2
			2 s2 acquire limit=2 @40-50 -> ok token=3`, VerdictOk},
		{"permits exclude a lock of the same name", `
			1 s1 acquire limit=3 @0-10 -> ok token=1
			4 - read @20-30 -> ok holders=s1#1
			1 s1 release token=1 @40-50 -> ok
			4 - read @60-70 -> ok holders=none`, VerdictOk},
		{"which expired permit made room is not known", `
			1 s1 acquire limit=2 ttl=1000 @0-10 -> ok token=1
			2 s2 acquire limit=2 ttl=1000 @0-10 -> ok token=2
			3 s3 acquire limit=2 @1100-1110 -> ok token=3
			2 s2 extend token=2 ttl=1000 @1120-1130 -> ok
			1 s1 extend token=1 ttl=1000 @1140-1150 -> lock_lost`, VerdictOk},
		{"an expired permit cannot come back", `
			1 s1 acquire limit=2 ttl=1000 @0-10 -> ok token=1
			2 s2 acquire limit=2 ttl=1000 @0-10 -> ok token=2
			3 s3 acquire limit=2 @1100-1110 -> ok token=3
			2 s2 extend token=2 ttl=1000 @1120-1130 -> ok
			1 s1 extend token=1 ttl=1000 @1140-1150 -> ok`, VerdictIllegal},
		{"an unknown permit that took effect fills the semaphore", `
			1 s1 acquire limit=1 ttl=1000 @0-10 -> unknown
			2 s2 acquire limit=1 @20-30 -> held
			2 s2 acquire limit=1 @1100-1110 -> ok token=4`, VerdictOk},
		{"an unknown permit that did not take effect", `
			1 s1 acquire limit=1 ttl=60000 @0-10 -> unknown
			2 s2 acquire limit=1 @20-30 -> ok token=4
			2 s2 release token=4 @40-50 -> ok`, VerdictOk},
	})
}

func TestElectionModel(t *testing.T) {
	runCases(t, Election, []historyCase{
		{"one leader at a time, observed in token order", `
			1 s1 campaign value=a @0-10 -> ok token=1
			2 s2 campaign value=b @20-30 -> held
			3 - observe @40-50 -> ok token=1 value=a
			1 s1 proclaim token=1 value=a2 @60-70 -> ok token=1
			3 - observe @80-90 -> ok token=1 value=a2
			1 s1 resign token=1 @100-110 -> ok
			3 - observe @120-130 -> no_leader
			2 s2 campaign value=b @140-150 -> ok token=2
			3 - observe @160-170 -> ok token=2 value=b`, VerdictOk},
		{"two leaders", `
			1 s1 campaign value=a @0-10 -> ok token=1
			2 s2 campaign value=b @20-30 -> ok token=2`, VerdictIllegal},
		{"observe goes back to an older leader", `
			1 s1 campaign value=a @0-10 -> ok token=1
			1 s1 resign token=1 @20-30 -> ok
			2 s2 campaign value=b @40-50 -> ok token=2
			3 - observe @60-70 -> ok token=2 value=b
			3 - observe @80-90 -> ok token=1 value=a`, VerdictIllegal},
		{"observe sees a stale value", `
			1 s1 campaign value=a @0-10 -> ok token=1
			1 s1 proclaim token=1 value=a2 @20-30 -> ok token=1
			3 - observe @40-50 -> ok token=1 value=a`, VerdictIllegal},
		{"proclaim by a session that does not lead", `
			1 s1 campaign value=a @0-10 -> ok token=1
			2 s2 proclaim token=1 value=x @20-30 -> ok token=1`, VerdictIllegal},
		{"proclaim and resign by a former leader are lock_lost", `
			1 s1 campaign value=a @0-10 -> ok token=1
			1 s1 resign token=1 @20-30 -> ok
			1 s1 proclaim token=1 value=x @40-50 -> lock_lost
			1 s1 resign token=1 @60-70 -> lock_lost
			3 - observe @80-90 -> no_leader`, VerdictOk},
		{"resign by a session that does not lead", `
			1 s1 campaign value=a @0-10 -> ok token=1
			2 s2 resign token=1 @20-30 -> ok`, VerdictIllegal},
		{"re-entrant campaign: a greater token, the new value", `
			1 s1 campaign value=a @0-10 -> ok token=1
			1 s1 campaign value=b @20-30 -> ok token=2
			3 - observe @40-50 -> ok token=2 value=b
			1 s1 proclaim token=1 value=c @60-70 -> lock_lost`, VerdictOk},
		{"a leader on the lock route resigns", `
			1 s1 campaign value=a @0-10 -> ok token=1
			1 s1 release token=1 @20-30 -> ok
			2 s2 campaign value=b @40-50 -> ok token=2`, VerdictOk},
		{"no_leader while a leader leads", `
			1 s1 campaign value=a @0-10 -> ok token=1
			3 - observe @20-30 -> no_leader`, VerdictIllegal},
		{"an unknown campaign that took effect", `
			1 s1 campaign value=a @0-10 -> unknown
			3 - observe @20-30 -> ok token=4 value=a session=s1
			1 s1 resign token=4 @40-50 -> ok
			2 s2 campaign value=b @60-70 -> ok token=5`, VerdictOk},
		{"an unknown campaign that did not take effect", `
			1 s1 campaign value=a @0-10 -> unknown
			2 s2 campaign value=b @20-30 -> ok token=5
			3 - observe @40-50 -> ok token=5 value=b`, VerdictOk},
		{"an unknown proclaim that did not take effect", `
			1 s1 campaign value=a @0-10 -> ok token=1
			1 s1 proclaim token=1 value=b @20-30 -> unknown
			3 - observe @40-50 -> ok token=1 value=a
			3 - observe @60-70 -> ok token=1 value=b`, VerdictOk},
		{"an unknown proclaim cannot be undone", `
			1 s1 campaign value=a @0-10 -> ok token=1
			1 s1 proclaim token=1 value=b @20-30 -> unknown
			3 - observe @40-50 -> ok token=1 value=b
			3 - observe @60-70 -> ok token=1 value=a`, VerdictIllegal},
	})
}

// Lock-delay (C2 "Lock-delay"): a grant that ends without a release (expiry, revoke) keeps its
// key from every grant, its own session's included, for the session's lock_delay_ms.
func TestLockDelayModel(t *testing.T) {
	runCases(t, LockDelay, []historyCase{
		{"no grant during the delay after a revoke", `
			1 s1 acquire delay=1000 @0-10 -> ok token=1
			9 - revoke @100-110 -> ok revoked=true token=1
			2 s2 acquire @200-210 -> held
			1 s1 acquire delay=1000 @300-310 -> held
			2 s2 acquire @1150-1160 -> ok token=2`, VerdictOk},
		{"granted during the delay after a revoke", `
			1 s1 acquire delay=1000 @0-10 -> ok token=1
			9 - revoke @100-110 -> ok revoked=true token=1
			2 s2 acquire @500-510 -> ok token=2`, VerdictIllegal},
		{"the holder itself re-granted during its delay", `
			1 s1 acquire delay=1000 @0-10 -> ok token=1
			9 - revoke @100-110 -> ok revoked=true token=1
			1 s1 acquire delay=1000 @500-510 -> ok token=2`, VerdictIllegal},
		{"no grant during the delay after an expiry", `
			1 s1 acquire ttl=1000 delay=2000 @0-10 -> ok token=1
			2 s2 acquire @1500-1510 -> held
			2 s2 acquire @2500-2510 -> ok token=2`, VerdictIllegal},
		{"granted after expiry plus delay", `
			1 s1 acquire ttl=1000 delay=2000 @0-10 -> ok token=1
			2 s2 acquire @1500-1510 -> held
			2 s2 acquire @3010-3020 -> ok token=2`, VerdictOk},
		{"a release starts no delay", `
			1 s1 acquire delay=5000 @0-10 -> ok token=1
			1 s1 release token=1 @20-30 -> ok
			2 s2 acquire @40-50 -> ok token=2`, VerdictOk},
		{"held during a delay after the holder is gone", `
			1 s1 acquire ttl=1000 delay=2000 @0-10 -> ok token=1
			3 - read @1100-1110 -> lock_not_found
			2 s2 acquire @1200-1210 -> held`, VerdictOk},
		{"revoked=false while a grant lives", `
			1 s1 acquire @0-10 -> ok token=1
			9 - revoke @20-30 -> ok revoked=false`, VerdictIllegal},
		{"revoke of a free key", `
			9 - revoke @20-30 -> ok revoked=true token=1`, VerdictIllegal},
		{"an unknown revoke that took effect", `
			1 s1 acquire delay=1000 @0-10 -> ok token=1
			9 - revoke @100-110 -> unknown
			2 s2 acquire @200-210 -> held
			2 s2 acquire @1150-1160 -> ok token=2`, VerdictOk},
		{"an unknown revoke still delays from its call", `
			1 s1 acquire delay=1000 @0-10 -> ok token=1
			9 - revoke @100-110 -> unknown
			2 s2 acquire @500-510 -> ok token=2`, VerdictIllegal},
	})
}
