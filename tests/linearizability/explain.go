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
	maxWindowCalls = 60
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
	full := uint64(1)<<len(ops) - 1
	var ends []State
	seen := map[string]bool{}
	var visit func(done uint64, s State) bool
	visit = func(done uint64, s State) bool {
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
func ready(ops []porcupine.Operation, done uint64, k int) bool {
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
	// Without the reads and refusals it does not need, the history has more quiescent points.
	total := len(sub)
	sub, pruned := pruneObservers(sub, cut, func(ops []porcupine.Operation) bool { return illegal(model, ops) })
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
	fmt.Fprintf(&b, "key %q: its %s cannot be linearized.", key, calls(len(part)))
	if cut != h.EndNs {
		for _, op := range sub {
			if op.Return == cut {
				fmt.Fprintf(&b, " The answer to #%d at %s makes it illegal.", op.Input.(Input).Index,
					ms(cut, h.StartNs))
				break
			}
		}
	}
	if time.Now().After(deadline) {
		fmt.Fprintf(&b, " (The time limit ran out before the smallest sub-history was found: what"+
			" follows may be longer than the violation needs.)")
	}
	fmt.Fprintf(&b, " Of the %s up to then (those answered later pending)", calls(total))
	if pruned > 0 {
		fmt.Fprintf(&b, ", leaving out %d reads and refusals it does not need", pruned)
	}
	if skipped > 0 {
		if pruned > 0 {
			fmt.Fprintf(&b, " and")
		} else {
			fmt.Fprintf(&b, ",")
		}
		fmt.Fprintf(&b, " starting at %s, when no call was in flight and the key was in %s (after %s)",
			ms(startNs, h.StartNs), describeStates(from, h.StartNs), calls(skipped))
	}
	fmt.Fprintf(&b, ", this sub-history of %s cannot be linearized:\n", calls(len(sub)))
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
	fmt.Fprintf(&b, "  The longest linearization found takes %d of its %s (those not marked !) and ends in %s",
		len(longest), calls(len(sub)), describeStates(replay(from, longest), h.StartNs))
	return b.String()
}

// observes: a call that changes no state whatever it is linearized after — a read, an observe,
// or an answer saying nothing was done (held, lock_lost, conflict, ...). Leaving such calls out
// of an illegal sub-history keeps it illegal only if the violation does not need them; and if
// what is left is illegal, so is the history with them (they only add constraints).
func observes(op porcupine.Operation) bool {
	in, out := op.Input.(Input), op.Output.(Output)
	return in.Op == "read" || in.Op == "observe" || out.Outcome == OutcomeFail
}

// pruneObservers leaves out of `ops` the observing calls that its illegality does not need, but
// never the call answered at `cut`: in chunks, halving their size down to single calls (so a
// violation that needs a few observers of thousands costs tens of checks, not thousands), while
// `illegal` answers in time. Returns what is left and how many were left out.
func pruneObservers(ops []porcupine.Operation, cut int64, illegal func([]porcupine.Operation) bool) ([]porcupine.Operation, int) {
	prunable := map[int]bool{} // by call index
	for _, op := range ops {
		if observes(op) && op.Return != cut {
			prunable[op.Input.(Input).Index] = true
		}
	}
	candidates := func() []int {
		var result []int
		for _, op := range ops {
			if index := op.Input.(Input).Index; prunable[index] {
				result = append(result, index)
			}
		}
		return result
	}
	without := func(drop map[int]bool) []porcupine.Operation {
		var kept []porcupine.Operation
		for _, op := range ops {
			if !drop[op.Input.(Input).Index] {
				kept = append(kept, op)
			}
		}
		return kept
	}
	pruned := 0
	for size := len(prunable); size >= 1; size /= 2 {
		left := candidates()
		for end := len(left); end > 0; end -= size { // the latest first: the violation is at the end
			chunk := map[int]bool{}
			for _, index := range left[max(0, end-size):end] {
				chunk[index] = true
			}
			if trial := without(chunk); illegal(trial) {
				ops = trial
				pruned += len(chunk)
				for index := range chunk {
					delete(prunable, index)
				}
			}
		}
		if size == 1 {
			break
		}
	}
	return ops, pruned
}

func calls(n int) string {
	if n == 1 {
		return "1 call"
	}
	return fmt.Sprintf("%d calls", n)
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
