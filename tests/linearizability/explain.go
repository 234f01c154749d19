package lincheck

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The smallest offending sub-history of a key that cannot be linearized, in two cuts:
//
//   - The end: the shortest illegal prefix, cut at an answer. Calls not answered by the cut are
//     pending (an unknown outcome), which keeps every prefix of a linearizable history
//     linearizable; so the answer at the cut is the one that makes the history illegal.
//   - The start: the latest quiescent point q before the cut (no call in flight across it) from
//     which the rest is still illegal. Every linearization orders the calls before q before
//     those after it, so the key is at q in one of the states the calls before q can lead to —
//     computed exactly, window by window between quiescent points — and the sub-history from q
//     is illegal from each of them.
//
// What is printed is that sub-history, its calls in invocation order, those outside Porcupine's
// longest linearization of it marked "!", and the states that linearization ends in.

// prefix is the history of `part` as it stood at time `cut`.
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

// A window starts at a quiescent point: begin is the index of its first call in the calls
// sorted by invocation, and from the states the key may be in there.
type window struct {
	begin   int
	startNs int64
	from    []State
}

// Limits of the exact state computation; past them the start is not trimmed further.
const (
	maxWindowCalls = 14
	maxStates      = 64
)

// windows are the quiescent points of `ops` (sorted by invocation) with the states at each, as
// far as the limits allow: the calls between two points are at most maxWindowCalls, and the
// states at most maxStates. A busy history (every client always in a call) has few points.
func windows(ops []porcupine.Operation) []window {
	result := []window{{begin: 0, from: []State{{}}}}
	latestReturn := int64(-1 << 63)
	for i := 0; i < len(ops); i++ {
		last := result[len(result)-1]
		if i > last.begin && latestReturn < ops[i].Call {
			next, ok := reachable(last.from, ops[last.begin:i])
			if !ok {
				return result
			}
			result = append(result, window{begin: i, startNs: latestReturn, from: next})
		}
		latestReturn = max(latestReturn, ops[i].Return)
	}
	return result
}

// reachable is every state the key may be in after the calls of one window, from any of
// `from`: every order of its calls that respects their real-time order.
func reachable(from []State, ops []porcupine.Operation) ([]State, bool) {
	if len(ops) > maxWindowCalls {
		return nil, false
	}
	full := uint32(1)<<len(ops) - 1
	var ends []State
	seen := map[string]bool{}
	var visit func(done uint32, s State) bool
	visit = func(done uint32, s State) bool {
		key := fmt.Sprint(done, s.hash())
		if seen[key] {
			return true
		}
		seen[key] = true
		if done == full {
			for _, e := range ends {
				if e.equal(s) {
					return true
				}
			}
			ends = append(ends, s)
			return len(ends) <= maxStates
		}
		for k, op := range ops {
			if done&(1<<k) != 0 || !ready(ops, done, k) {
				continue
			}
			for _, next := range step(s, op.Input.(Input), op.Output.(Output)) {
				if !visit(done|1<<k, next) {
					return false
				}
			}
		}
		return len(seen) < 1<<16
	}
	for _, s := range from {
		if !visit(0, s) {
			return nil, false
		}
	}
	return ends, len(ends) > 0
}

// ready: every call of the window answered before call k was sent is done.
func ready(ops []porcupine.Operation, done uint32, k int) bool {
	for j, op := range ops {
		if done&(1<<j) == 0 && op.Return < ops[k].Call {
			return false
		}
	}
	return true
}

func explain(h *History, part []porcupine.Operation, limit time.Duration) string {
	key := part[0].Input.(Input).Key
	model := NewModel(h.StartNs)
	deadline := time.Now().Add(limit)
	illegal := func(m porcupine.Model, ops []porcupine.Operation) bool {
		left := time.Until(deadline)
		return left > 0 && porcupine.CheckOperationsTimeout(m, ops, left) == porcupine.Illegal
	}
	var cuts []int64
	for _, op := range part {
		if op.Output.(Output).Outcome != OutcomeUnknown {
			cuts = append(cuts, op.Return)
		}
	}
	sort.Slice(cuts, func(i, j int) bool { return cuts[i] < cuts[j] })
	cut := h.EndNs
	sub := append([]porcupine.Operation(nil), part...)
	if i := sort.Search(len(cuts), func(i int) bool {
		return illegal(model, prefix(part, cuts[i], h.EndNs))
	}); i < len(cuts) {
		cut = cuts[i]
		sub = prefix(part, cut, h.EndNs)
	}
	sort.SliceStable(sub, func(i, j int) bool { return sub[i].Call < sub[j].Call })
	from, startNs, skipped := []State{{}}, int64(0), 0
	ws := windows(sub)
	for w := len(ws) - 1; w > 0; w-- {
		tail := sub[ws[w].begin:]
		if illegal(modelFrom(ws[w].from, h.StartNs), tail) {
			from, startNs, skipped = ws[w].from, ws[w].startNs, ws[w].begin
			sub = tail
			model = modelFrom(from, h.StartNs)
			break
		}
	}
	_, info := porcupine.CheckOperationsVerbose(model, sub, max(time.Until(deadline), time.Second))
	var longest []porcupine.Operation
	for _, partials := range info.PartialLinearizationsOperations() {
		for _, l := range partials {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "key %q: its %d calls cannot be linearized.", key, len(part))
	if cut != h.EndNs {
		for _, op := range sub {
			if op.Return == cut {
				fmt.Fprintf(&b, " The answer to #%d at %s makes it illegal.", op.Input.(Input).Index,
					ms(cut, h.StartNs))
				break
			}
		}
	}
	if skipped > 0 {
		fmt.Fprintf(&b, " From %s, when no call was in flight and the key was in %s (after %d calls), the %d calls up to then (those answered later pending):\n",
			ms(startNs, h.StartNs), describeStates(from, h.StartNs), skipped, len(sub))
	} else {
		fmt.Fprintf(&b, " The %d calls up to then (those answered later pending):\n", len(sub))
	}
	inLongest := map[int]bool{}
	for _, op := range longest {
		inLongest[op.Input.(Input).Index] = true
	}
	// The last calls, and every call outside the longest linearization wherever it is.
	const shown = 30
	first, hidden := max(0, len(sub)-shown), 0
	for i, op := range sub {
		marked := !inLongest[op.Input.(Input).Index]
		if i < first && !marked {
			hidden++
			continue
		}
		if hidden > 0 {
			fmt.Fprintf(&b, "  ... %d calls\n", hidden)
			hidden = 0
		}
		mark := " "
		if marked {
			mark = "!"
		}
		fmt.Fprintf(&b, "  %s %s\n", mark, describeCall(h, op))
	}
	fmt.Fprintf(&b, "  The longest linearization found takes %d of these %d calls (those not marked !) and ends in %s",
		len(longest), len(sub), describeStates(replay(from, longest), h.StartNs))
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

// replay runs a linearization through the model from `from`: the states it can end in.
func replay(from []State, ops []porcupine.Operation) []State {
	states := from
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
