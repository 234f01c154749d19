package dlock

import (
	"testing"
	"time"
)

func TestTrustedTTLIsTheSmallerPromise(t *testing.T) {
	for _, c := range []struct{ asked, answered, want time.Duration }{
		{10 * time.Second, 10 * time.Second, 10 * time.Second},
		{10 * time.Second, 60 * time.Second, 10 * time.Second}, // a server answering more than asked
		{10 * time.Second, 4 * time.Second, 4 * time.Second},   // etcd: the grant's first TTL
		{0, 30 * time.Second, 30 * time.Second},                // the server's default was asked for
		{5 * time.Second, 0, 5 * time.Second},
	} {
		if got := TrustedTTL(c.asked, c.answered); got != c.want {
			t.Errorf("TrustedTTL(%v, %v) = %v, want %v", c.asked, c.answered, got, c.want)
		}
	}
}

func TestLeaseDeadlineKeepsTheDriftAllowance(t *testing.T) {
	sent := time.Now()
	for _, c := range []struct {
		ttl   time.Duration
		drift float64
		want  time.Duration
	}{
		{10 * time.Second, 0.01, 9900 * time.Millisecond},
		{4 * time.Second, 0.25, 3 * time.Second},
		{1001 * time.Millisecond, 0.01, 990 * time.Millisecond}, // ceil(10.01) = 11 ms
		{30 * time.Second, 0, 30 * time.Second},
		{1500 * time.Microsecond, 0.01, 0}, // whole milliseconds: 1 ms less ceil(0.01) = 1 ms
	} {
		if got := LeaseDeadline(sent, c.ttl, c.drift).Sub(sent); got != c.want {
			t.Errorf("LeaseDeadline(%v, %g) = sent + %v, want sent + %v", c.ttl, c.drift, got, c.want)
		}
	}
}

func TestDeadlineIsFromTheSendTimeNeverPastTheAnsweredTTL(t *testing.T) {
	// Asked 10 s, the server answers 60 s: trusted 10 s less 1 % from the send time.
	sent := time.Now().Add(-2 * time.Second) // the answer came 2 s after the request left
	deadline := LeaseDeadline(sent, TrustedTTL(10*time.Second, 60*time.Second), 0.01)
	if left := time.Until(deadline); left > 7900*time.Millisecond || left < 7800*time.Millisecond {
		t.Fatalf("trusted for %v more, want about 7.9 s", left)
	}
}

func TestBackoffIsCappedAndJittered(t *testing.T) {
	initial, maximum := 50*time.Millisecond, 2*time.Second
	for attempt := 0; attempt < 40; attempt++ {
		full := min(maximum, initial<<min(attempt, 20))
		low, high := backoffDelay(initial, maximum, attempt, 0), backoffDelay(initial, maximum, attempt, 1)
		if low != full/2 || high != full {
			t.Fatalf("attempt %d: [%v, %v], want [%v, %v]", attempt, low, high, full/2, full)
		}
	}
}

func TestClockDriftFromOptionEnvironmentOrDefault(t *testing.T) {
	t.Setenv("DLOCK_CLOCK_DRIFT", "")
	if d, err := resolveClockDrift(0); err != nil || d != DefaultClockDrift {
		t.Fatalf("default: %v %v", d, err)
	}
	t.Setenv("DLOCK_CLOCK_DRIFT", "2%")
	if d, err := resolveClockDrift(0); err != nil || d != 0.02 {
		t.Fatalf("DLOCK_CLOCK_DRIFT=2%%: %v %v", d, err)
	}
	if d, err := resolveClockDrift(0.05); err != nil || d != 0.05 {
		t.Fatalf("option wins: %v %v", d, err)
	}
	for _, bad := range []string{"0.5", "-1", "lots", "60%"} {
		t.Setenv("DLOCK_CLOCK_DRIFT", bad)
		if _, err := resolveClockDrift(0); err == nil {
			t.Errorf("DLOCK_CLOCK_DRIFT=%s accepted", bad)
		}
	}
	if _, err := resolveClockDrift(0.7); err == nil {
		t.Error("option 0.7 accepted")
	}
}
