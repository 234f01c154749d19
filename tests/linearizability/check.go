package lincheck

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
	// For an illegal history: one explanation per key that cannot be linearized.
	Explanations []string
	model        porcupine.Model
	info         porcupine.LinearizationInfo
}

// operations turns the history's calls of `primitive` into Porcupine operations.
func (h *History) operations(primitive string) []porcupine.Operation {
	var ops []porcupine.Operation
	for i, in := range h.Inputs {
		if in.Primitive != primitive {
			continue
		}
		out := h.Outputs[i]
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
func CheckModel(h *History, primitive string, limit time.Duration) Result {
	ops := h.operations(primitive)
	r := Result{Model: primitive, Operations: len(ops), Verdict: VerdictEmpty}
	if len(ops) == 0 {
		return r
	}
	r.model = NewModel(primitive, h.StartNs)
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
		remaining := max(limit-r.Elapsed, limit/4)
		for _, part := range illegalPartitions(ops, info) {
			r.Explanations = append(r.Explanations, explain(r.model, h, part, remaining))
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

// prefix is the history of `part` as it stood at time `cut`: the calls invoked by then, those
// not answered by then pending (an unknown outcome). A prefix of a linearizable history is
// linearizable, so the shortest illegal prefix ends with the answer that made it illegal.
func prefix(part []porcupine.Operation, cut, endNs int64) []porcupine.Operation {
	var ops []porcupine.Operation
	for _, op := range part {
		if op.Call > cut {
			continue
		}
		if op.Return > cut {
			op.Output = Output{Outcome: OutcomeUnknown, CompleteNs: endNs}
			op.Return = endNs
		}
		ops = append(ops, op)
	}
	return ops
}

// explain describes why a key's history cannot be linearized: its shortest illegal prefix (cut
// at an answer), the longest linearization of that prefix with the state it ends in, and the
// calls that cannot come next.
func explain(model porcupine.Model, h *History, part []porcupine.Operation, limit time.Duration) string {
	key := part[0].Input.(Input).Key
	var cuts []int64
	for _, op := range part {
		if op.Output.(Output).Outcome != OutcomeUnknown {
			cuts = append(cuts, op.Return)
		}
	}
	sort.Slice(cuts, func(i, j int) bool { return cuts[i] < cuts[j] })
	deadline := time.Now().Add(limit)
	illegalAt := func(cut int64) bool {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		return porcupine.CheckOperationsTimeout(model, prefix(part, cut, h.EndNs), left) == porcupine.Illegal
	}
	smallest := h.EndNs
	shortest := part
	if i := sort.Search(len(cuts), func(i int) bool { return illegalAt(cuts[i]) }); i < len(cuts) {
		smallest = cuts[i]
		shortest = prefix(part, smallest, h.EndNs)
	}
	_, info := porcupine.CheckOperationsVerbose(model, shortest, time.Until(deadline)+time.Second)
	var longest []porcupine.Operation
	for _, partials := range info.PartialLinearizationsOperations() {
		for _, l := range partials {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	sort.SliceStable(shortest, func(i, j int) bool { return shortest[i].Call < shortest[j].Call })
	var b strings.Builder
	fmt.Fprintf(&b, "key %q: its %d calls cannot be linearized.", key, len(part))
	if smallest != h.EndNs {
		for _, op := range shortest {
			if op.Return == smallest {
				fmt.Fprintf(&b, " The answer to #%d at %s makes it illegal;", op.Input.(Input).Index,
					ms(smallest, h.StartNs))
				break
			}
		}
		fmt.Fprintf(&b, " the history up to then (%d calls, those answered later pending):\n", len(shortest))
	} else {
		fmt.Fprintf(&b, " No shorter illegal prefix found in time; the whole history:\n")
	}
	inLongest := map[int]bool{}
	for _, op := range longest {
		inLongest[op.Input.(Input).Index] = true
	}
	const shown = 25
	from := max(0, len(shortest)-shown)
	if from > 0 {
		fmt.Fprintf(&b, "  ... %d earlier calls\n", from)
	}
	for _, op := range shortest[from:] {
		mark := " "
		if !inLongest[op.Input.(Input).Index] {
			mark = "!"
		}
		fmt.Fprintf(&b, "  %s %s\n", mark, describeCall(h, op))
	}
	fmt.Fprintf(&b, "  The longest linearization found takes %d of these %d calls (those not marked !) and ends in %s",
		len(longest), len(shortest), describeStates(replay(longest), h.StartNs))
	return b.String()
}

func describeCall(h *History, op porcupine.Operation) string {
	in, out := op.Input.(Input), op.Output.(Output)
	end := ms(out.CompleteNs, h.StartNs)
	if out.Outcome == OutcomeUnknown {
		end = "end"
	}
	return fmt.Sprintf("#%d client %d [%s, %s] %s", in.Index, h.ClientName[in.Client],
		ms(in.InvokeNs, h.StartNs), end, describeOperation(in, out, h.StartNs))
}

// replay runs a linearization through the model: the states it can end in.
func replay(ops []porcupine.Operation) []State {
	states := []State{{}}
	for _, op := range ops {
		var next []State
		for _, s := range states {
			next = append(next, step(s, op.Input.(Input), op.Output.(Output))...)
		}
		states = next
	}
	return states
}

func describeStates(states []State, startNs int64) string {
	var parts []string
	for _, s := range states {
		parts = append(parts, describeState(s, startNs))
	}
	return "{" + strings.Join(parts, " | ") + "}"
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
