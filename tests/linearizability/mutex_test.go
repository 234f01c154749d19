package lincheck

import (
	"strings"
	"testing"
	"time"
)

func TestMutexModel(t *testing.T) {
	runCases(t, Mutex, []historyCase{
		{"one holder at a time", `
			1 s1 acquire @0-10 -> ok token=1
			2 s2 acquire @20-30 -> held
			1 s1 release token=1 @40-50 -> ok
			2 s2 acquire @60-70 -> ok token=2
			2 s2 extend token=2 @80-90 -> ok token=2
			2 s2 release token=2 @100-110 -> ok`, VerdictOk},
		{"concurrent acquires: either may win", `
			1 s1 acquire @0-50 -> held
			2 s2 acquire @10-40 -> ok token=7
			3 s3 acquire @20-30 -> held`, VerdictOk},
		{"a hand-over inside overlapping calls", `
			1 s1 acquire @0-10 -> ok token=1
			1 s1 release token=1 @20-40 -> ok
			2 s2 acquire wait=1000 @15-35 -> ok token=2`, VerdictOk},
		{"two overlapping grants", `
			1 s1 acquire @0-10 -> ok token=1
			2 s2 acquire @20-30 -> ok token=2`, VerdictIllegal},
		{"a token not greater than an earlier grant's", `
			1 s1 acquire @0-10 -> ok token=5
			1 s1 release token=5 @20-30 -> ok
			2 s2 acquire @40-50 -> ok token=5`, VerdictIllegal},
		{"concurrent grants with decreasing tokens are ordered by token", `
			1 s1 acquire @0-100 -> ok token=9
			1 s1 release token=9 @110-120 -> ok
			2 s2 acquire @10-50 -> ok token=3
			2 s2 release token=3 @60-70 -> ok`, VerdictOk},
		{"held while nobody holds it", `
			1 s1 acquire @0-10 -> ok token=1
			1 s1 release token=1 @20-30 -> ok
			2 s2 acquire @40-50 -> held`, VerdictIllegal},
		{"held answered while the holder's release is in flight", `
			1 s1 acquire @0-10 -> ok token=1
			1 s1 release token=1 @20-60 -> ok
			2 s2 acquire @30-40 -> held`, VerdictOk},
		{"re-entrant acquire gives a greater token", `
			1 s1 acquire @0-10 -> ok token=1
			1 s1 acquire @20-30 -> ok token=2
			1 s1 release token=1 @40-50 -> lock_lost
			1 s1 release token=2 @60-70 -> ok`, VerdictOk},
		{"re-entrant acquire with the same token", `
			1 s1 acquire @0-10 -> ok token=4
			1 s1 acquire @20-30 -> ok token=4`, VerdictIllegal},
		{"the holder answered held on its own lock", `
			1 s1 acquire @0-10 -> ok token=1
			1 s1 acquire @20-30 -> held`, VerdictIllegal},
		{"release with a wrong token is lock_lost", `
			1 s1 acquire @0-10 -> ok token=3
			1 s1 release token=2 @20-30 -> lock_lost
			2 s2 extend token=3 @40-50 -> lock_lost
			1 s1 extend token=3 @60-70 -> ok`, VerdictOk},
		{"release of a live grant answered lock_lost", `
			1 s1 acquire ttl=10000 @0-10 -> ok token=3
			1 s1 release token=3 @20-30 -> lock_lost`, VerdictIllegal},
		{"release of another session's grant succeeds", `
			1 s1 acquire @0-10 -> ok token=3
			2 s2 release token=3 @20-30 -> ok`, VerdictIllegal},
		{"extend changes the token", `
			1 s1 acquire @0-10 -> ok token=3
			1 s1 extend token=3 @20-30 -> ok token=4`, VerdictIllegal},
		{"session_not_found and too_many_requests change nothing", `
			1 s1 acquire @0-10 -> ok token=1
			2 s2 acquire @20-30 -> session_not_found
			3 s3 acquire wait=100 @20-30 -> too_many_requests
			2 s2 acquire @40-50 -> held`, VerdictOk},
		{"a read sees the holder", `
			1 s1 acquire @0-10 -> ok token=1
			2 - read @20-30 -> ok holders=s1#1
			1 s1 release token=1 @40-50 -> ok
			2 - read @60-70 -> lock_not_found`, VerdictOk},
		{"a read misses a live holder", `
			1 s1 acquire ttl=5000 @0-10 -> ok token=1
			2 - read @20-30 -> lock_not_found`, VerdictIllegal},
		{"a read sees a released grant", `
			1 s1 acquire @0-10 -> ok token=1
			1 s1 release token=1 @20-30 -> ok
			2 - read @40-50 -> ok holders=s1#1`, VerdictIllegal},
	})
}

// TTLs: a grant ends at its promise (its invocation plus its TTL) or later, never before.
func TestMutexModelTTL(t *testing.T) {
	runCases(t, Mutex, []historyCase{
		{"taken over after the promise ran out", `
			1 s1 acquire ttl=1000 @0-10 -> ok token=1
			2 s2 acquire @1005-1010 -> ok token=2
			1 s1 extend token=1 @1020-1030 -> lock_lost`, VerdictOk},
		{"taken over before the promise ran out", `
			1 s1 acquire ttl=1000 @0-10 -> ok token=1
			2 s2 acquire @500-990 -> ok token=2`, VerdictIllegal},
		{"an expired holder may still be live (the reaper is late)", `
			1 s1 acquire ttl=1000 @0-10 -> ok token=1
			2 s2 acquire @1500-1510 -> held
			1 s1 extend token=1 ttl=1000 @1520-1530 -> ok
			2 s2 acquire @2000-2010 -> held`, VerdictOk},
		{"extend moves the promise", `
			1 s1 acquire ttl=1000 @0-10 -> ok token=1
			1 s1 extend token=1 ttl=1000 @500-510 -> ok
			2 s2 acquire @1200-1210 -> ok token=2`, VerdictIllegal},
		{"the answered ttl counts when smaller than asked", `
			1 s1 acquire ttl=5000 @0-10 -> ok token=1 ttl=1000
			2 s2 acquire @1200-1210 -> ok token=2`, VerdictOk},
		{"lock_lost only once the promise ran out", `
			1 s1 acquire ttl=1000 @0-10 -> ok token=1
			1 s1 extend token=1 ttl=1000 @900-950 -> lock_lost`, VerdictIllegal},
		{"a call answered before the expiry it follows", `
			1 s1 acquire ttl=1000 @0-10 -> ok token=1
			2 s2 acquire @900-1100 -> ok token=2
			3 - read @950-990 -> ok holders=s2#2`, VerdictIllegal},
		{"a call answered after the expiry it follows", `
			1 s1 acquire ttl=1000 @0-10 -> ok token=1
			2 s2 acquire @900-1100 -> ok token=2
			3 - read @950-1050 -> ok holders=s2#2`, VerdictOk},
		{"no ttl recorded: the grant outlives the history", `
			1 s1 acquire @0-10 -> ok token=1
			2 s2 acquire @100000-100010 -> ok token=2`, VerdictIllegal},
	})
}

// Unknown outcomes (a timeout, a lost connection, a 503) may take effect at any point after the
// call, or never.
func TestMutexModelUnknownOutcomes(t *testing.T) {
	runCases(t, Mutex, []historyCase{
		{"an unknown acquire that took effect", `
			1 s1 acquire ttl=1000 @0-10 -> unknown
			2 s2 acquire @20-30 -> held
			2 s2 acquire @1100-1110 -> ok token=9`, VerdictOk},
		{"an unknown acquire that did not take effect", `
			1 s1 acquire ttl=60000 @0-10 -> unknown
			2 s2 acquire @20-30 -> ok token=4
			2 s2 release token=4 @40-50 -> ok
			3 s3 acquire @60-70 -> ok token=5`, VerdictOk},
		{"an unknown acquire took effect, then its holder shows up in a read", `
			1 s1 acquire ttl=60000 @0-10 -> unknown
			3 - read @20-30 -> ok holders=s1#6
			1 s1 release token=6 @40-50 -> ok
			2 s2 acquire @60-70 -> ok token=7`, VerdictOk},
		{"a grant after an unknown grant must exceed its token", `
			1 s1 acquire ttl=60000 @0-10 -> unknown
			3 - read @20-30 -> ok holders=s1#6
			1 s1 release token=6 @40-50 -> ok
			2 s2 acquire @60-70 -> ok token=5`, VerdictIllegal},
		{"an unknown acquire cannot explain held before it was sent", `
			2 s2 acquire @0-10 -> held
			1 s1 acquire ttl=60000 @20-30 -> unknown`, VerdictIllegal},
		{"an unknown release that took effect", `
			1 s1 acquire @0-10 -> ok token=1
			1 s1 release token=1 @20-30 -> unknown
			2 s2 acquire @40-50 -> ok token=2`, VerdictOk},
		{"an unknown release that did not take effect", `
			1 s1 acquire @0-10 -> ok token=1
			1 s1 release token=1 @20-30 -> unavailable
			2 s2 acquire @40-50 -> held
			1 s1 release token=1 @60-70 -> ok
			2 s2 acquire @80-90 -> ok token=2`, VerdictOk},
		{"an unknown extend does not revive a lost grant", `
			1 s1 acquire ttl=1000 @0-10 -> ok token=1
			2 s2 acquire @1100-1110 -> ok token=2
			1 s1 extend token=1 ttl=1000 @1200-1210 -> unknown
			3 s3 acquire @1300-1310 -> ok token=3`, VerdictIllegal},
	})
}

// C3: with wait_ms 0, an acquire is answered held at once while others wait for the key on the
// same dlockd, even when the key is free (no overtaking).
func TestMutexModelNoOvertaking(t *testing.T) {
	runCases(t, Mutex, []historyCase{
		{"held while a waiter is queued on this server", `
			1 s1 acquire wait=5000 server=a @0-100 -> session_not_found
			2 s2 acquire server=a @10-20 -> held`, VerdictOk},
		{"held with a waiter on another server", `
			1 s1 acquire wait=5000 server=a @0-100 -> session_not_found
			2 s2 acquire server=b @10-20 -> held`, VerdictIllegal},
		{"a waiter queued behind another is held", `
			1 s1 acquire wait=50 @0-50 -> session_not_found
			2 s2 acquire wait=30 @10-40 -> held`, VerdictOk},
		{"held with no waiter at all", `
			1 s1 acquire server=a @0-5 -> ok token=1
			1 s1 release token=1 server=a @6-8 -> ok
			2 s2 acquire server=a @10-20 -> held`, VerdictIllegal},
		{"a waiter does not license a grant over the holder", `
			1 s1 acquire @0-10 -> ok token=1
			3 s3 acquire wait=5000 @15-5015 -> held
			2 s2 acquire @20-30 -> ok token=2`, VerdictIllegal},
	})
}

// The known finding's excuse (ExcuseWaiterHeldAtDeadline): a waiter answered held at its deadline
// may have been handed the key, and dlockd then gives that grant back at any moment. Nothing
// else is excused.
func TestExcuseWaiterHeldAtDeadline(t *testing.T) {
	cases := []struct {
		name, history   string
		excused         int
		strict, relaxed Verdict
	}{
		{"handed over, then given back", `
			1 s1 acquire ttl=30000 @0-10 -> ok token=1
			2 s2 acquire ttl=30000 wait=300 @20-320 -> held
			1 s1 release token=1 @300-310 -> ok
			3 - read @315-318 -> ok holders=s2#2
			3 - read @330-332 -> ok holders=none
			3 s3 acquire ttl=30000 @340-350 -> ok token=3`, 1, VerdictIllegal, VerdictOk},
		{"a held answer before the deadline is not excused", `
			1 s1 acquire ttl=30000 @0-10 -> ok token=1
			2 s2 acquire ttl=30000 wait=300 @20-100 -> held
			1 s1 release token=1 @300-310 -> ok
			3 - read @315-318 -> ok holders=s2#2`, 0, VerdictIllegal, VerdictIllegal},
		{"another violation stays one", `
			2 s2 acquire ttl=30000 wait=300 @20-320 -> held
			1 s1 acquire ttl=30000 @400-410 -> ok token=5
			3 s3 acquire ttl=30000 @420-430 -> ok token=6`, 1, VerdictIllegal, VerdictIllegal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := parseHistory(t, Mutex, c.history)
			if r := CheckModel(h, Mutex, 10*time.Second); r.Verdict != c.strict {
				t.Fatalf("as recorded: %s, want %s", r.Verdict, c.strict)
			}
			if n := ExcuseWaiterHeldAtDeadline(h); n != c.excused {
				t.Fatalf("excused %d answers, want %d", n, c.excused)
			}
			if r := CheckModel(h, Mutex, 10*time.Second); r.Verdict != c.relaxed {
				t.Fatalf("excused: %s, want %s\n%s", r.Verdict, c.relaxed, strings.Join(r.Explanations, "\n"))
			}
		})
	}
}

// A grant whose answer its client never read may be given back by dlockd at any moment
// (ADR-0007: an undelivered answer's grant is released), with no lock-delay; a delivered grant
// lives until its promise.
func TestMutexModelUndeliveredGrants(t *testing.T) {
	runCases(t, Mutex, []historyCase{
		{"an unknown acquire's grant given back before its TTL", `
			1 s1 acquire ttl=60000 @0-? -> unknown
			3 - read @20-30 -> ok holders=s1#6
			3 - read @100-110 -> ok holders=none
			2 s2 acquire @200-210 -> ok token=7`, VerdictOk},
		{"a delivered grant is not given back", `
			1 s1 acquire ttl=60000 @0-10 -> ok token=6
			3 - read @20-30 -> ok holders=s1#6
			3 - read @100-110 -> ok holders=none`, VerdictIllegal},
		{"a grant given back starts no lock-delay", `
			1 s1 acquire ttl=60000 delay=10000 @0-? -> unknown
			3 - read @20-30 -> ok holders=s1#6
			2 s2 acquire @200-210 -> ok token=7`, VerdictOk},
		{"a grant given back before its TTL ran out starts no lock-delay", `
			1 s1 acquire ttl=1000 delay=10000 @0-? -> unknown
			3 - read @20-30 -> ok holders=s1#6
			2 s2 acquire @2000-2010 -> ok token=7`, VerdictOk},
		{"a delivered grant that expired starts its lock-delay", `
			1 s1 acquire ttl=1000 delay=10000 @0-10 -> ok token=6
			2 s2 acquire @2000-2010 -> ok token=7`, VerdictIllegal},
	})
}
