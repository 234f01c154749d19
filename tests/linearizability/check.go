package lincheck

import (
	"os"
	"path/filepath"
	"time"

	"github.com/anishathalye/porcupine"
)

// Verdict of one model over the history's operations of its primitive.
type Verdict string

const (
	VerdictOk        Verdict = "ok"
	VerdictIllegal   Verdict = "illegal"
	VerdictUndecided Verdict = "undecided" // the time limit ran out: never a pass
	VerdictEmpty     Verdict = "empty"     // no operation of this primitive
)

// Result of one model.
type Result struct {
	Model      string
	Verdict    Verdict
	Operations int
	Unknown    int // operations with an unknown outcome
	Keys       int
	Elapsed    time.Duration
	// 0, or the bound within which the unknown outcomes were taken to have taken effect (or not)
	// when an ok verdict was only found that way (CheckModel).
	Bound time.Duration
	// For an illegal history: one explanation per key that cannot be linearized.
	Explanations []string
	model        porcupine.Model
	info         porcupine.LinearizationInfo
}

// UnknownBounds are the bounds CheckModel tries, shortest first, for a model that is undecided
// with its unknown outcomes open to the end of the history.
var UnknownBounds = []time.Duration{10 * time.Second, 30 * time.Second}

// operations turns the history's calls of `primitive` into Porcupine operations. `bound` > 0
// closes each unknown outcome `bound` after its call (or at the end of the history, if sooner):
// it takes effect by then or never.
func (h *History) operations(primitive string, bound time.Duration) []porcupine.Operation {
	var ops []porcupine.Operation
	for i, in := range h.Inputs {
		if in.Primitive != primitive {
			continue
		}
		out := h.Outputs[i]
		if bound > 0 && out.Outcome == OutcomeUnknown {
			out.CompleteNs = min(out.CompleteNs, in.InvokeNs+bound.Nanoseconds())
		}
		ops = append(ops, porcupine.Operation{ClientId: in.Client, Input: in, Call: in.InvokeNs,
			Output: out, Return: out.CompleteNs})
	}
	return ops
}

// Check runs every model on its operations, each within `limit`.
func Check(h *History, limit time.Duration) []Result {
	var results []Result
	for _, primitive := range Primitives {
		results = append(results, CheckModel(h, primitive, limit))
	}
	return results
}

// CheckModel checks the operations of one primitive, partitioned by key.
//
// Unknown outcomes are open to the end of the history, and many of them can make the search
// too long to end within `limit`. An undecided model is then checked again with each of
// UnknownBounds in turn. A bound only takes linearizations away: an unknown call must then take
// effect (or not) within the bound after its call, and the model's every step admits less when
// a call's latest effect comes sooner. So a linearization found with a bound is one of the
// history as recorded, and the verdict is ok (with Bound set); with no bound ok, the model stays
// undecided.
func CheckModel(h *History, primitive string, limit time.Duration) Result {
	r := checkModel(h, primitive, limit, 0)
	if r.Verdict != VerdictUndecided || r.Unknown == 0 {
		return r
	}
	elapsed := r.Elapsed
	for _, bound := range UnknownBounds {
		bounded := checkModel(h, primitive, limit, bound)
		elapsed += bounded.Elapsed
		if bounded.Verdict == VerdictOk {
			bounded.Elapsed = elapsed
			bounded.Bound = bound
			return bounded
		}
	}
	r.Elapsed = elapsed
	return r
}

func checkModel(h *History, primitive string, limit, bound time.Duration) Result {
	ops := h.operations(primitive, bound)
	r := Result{Model: primitive, Operations: len(ops), Verdict: VerdictEmpty}
	if len(ops) == 0 {
		return r
	}
	r.model = NewModel(h.StartNs)
	r.Keys = len(partitionByKey(ops))
	for _, op := range ops {
		if op.Output.(Output).Outcome == OutcomeUnknown {
			r.Unknown++
		}
	}
	started := time.Now()
	result, info := porcupine.CheckOperationsVerbose(r.model, ops, limit)
	r.Elapsed = time.Since(started)
	r.info = info
	switch result {
	case porcupine.Ok:
		r.Verdict = VerdictOk
	case porcupine.Unknown:
		r.Verdict = VerdictUndecided
	case porcupine.Illegal:
		r.Verdict = VerdictIllegal
		if bound > 0 {
			break // the history as recorded may still be linearizable: nothing to explain
		}
		remaining := max(limit-r.Elapsed, limit/4)
		for _, part := range illegalPartitions(ops, info) {
			r.Explanations = append(r.Explanations, explain(h, part, remaining))
		}
	}
	return r
}

// illegalPartitions are the keys whose longest linearization does not cover every operation.
func illegalPartitions(ops []porcupine.Operation, info porcupine.LinearizationInfo) [][]porcupine.Operation {
	parts := partitionByKey(ops)
	partials := info.PartialLinearizations()
	var illegal [][]porcupine.Operation
	for p, part := range parts {
		longest := 0
		if p < len(partials) {
			for _, l := range partials[p] {
				longest = max(longest, len(l))
			}
		}
		if longest < len(part) {
			illegal = append(illegal, part)
		}
	}
	return illegal
}

// Visualize writes Porcupine's HTML view of the checked history to dir/<model>.html.
func (r *Result) Visualize(dir string) (string, error) {
	if r.Operations == 0 {
		return "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, r.Model+".html")
	return path, porcupine.VisualizePath(r.model, r.info, path)
}
