package lincheck

import (
	"testing"
	"time"
)

// A release answered unavailable that can only have taken effect between 12 s and 15 s after
// its call: legal as recorded, illegal if unknown outcomes must take effect within 10 s.
const lateRelease = `
	1 s1 acquire ttl=600000 @0-10 -> ok token=1
	1 s1 release token=1 @20-30 -> unavailable
	2 s2 acquire @12000-12010 -> held
	2 s2 acquire @15000-15010 -> ok token=2`

func TestBoundOnlyTakesLinearizationsAway(t *testing.T) {
	h := parseHistory(t, Mutex, lateRelease)
	if r := checkModel(h, Mutex, time.Minute, 0); r.Verdict != VerdictOk {
		t.Fatalf("as recorded: %s, want ok", r.Verdict)
	}
	if r := checkModel(h, Mutex, time.Minute, 10*time.Second); r.Verdict != VerdictIllegal {
		t.Errorf("bounded to 10 s: %s, want illegal (the release cannot take effect in time)", r.Verdict)
	}
	if r := checkModel(h, Mutex, time.Minute, 30*time.Second); r.Verdict != VerdictOk {
		t.Errorf("bounded to 30 s: %s, want ok", r.Verdict)
	}
}

func TestDecidedModelsAreNotBounded(t *testing.T) {
	h := parseHistory(t, Mutex, lateRelease)
	r := CheckModel(h, Mutex, time.Minute)
	if r.Verdict != VerdictOk || r.Bound != 0 {
		t.Errorf("verdict %s with bound %s, want ok with none", r.Verdict, r.Bound)
	}
}

func TestBoundClosesUnknownOutcomes(t *testing.T) {
	h := parseHistory(t, Mutex, lateRelease)
	ops := h.operations(Mutex, 10*time.Second)
	if got, want := ops[1].Return, int64(20+10_000)*1_000_000; got != want {
		t.Errorf("unknown release returns at %d, want %d (its call + 10 s)", got, want)
	}
	if ops[1].Output.(Output).CompleteNs != ops[1].Return {
		t.Errorf("the model's latest effect differs from Porcupine's return")
	}
	if got := h.operations(Mutex, time.Minute)[1].Return; got != h.EndNs {
		t.Errorf("unknown release returns at %d, want the end of the history %d", got, h.EndNs)
	}
	if got := ops[0].Return; got != 10_000_000 {
		t.Errorf("a known outcome moved: returns at %d", got)
	}
}
