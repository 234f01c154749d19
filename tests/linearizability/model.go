package lincheck

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The sequential specification of one key (a lock, read-write lock, semaphore or election name:
// they share one key space, C3). The state is the set of live holders, the greatest token
// granted so far and a lower bound of the end of a running lock-delay.
//
// Time. A call took effect at one instant between its invocation and its answer. A holder's
// expiry is known only from below: the deadline its client was promised (ExpiresNs); the
// backend ends it at that deadline or later (a reaper's pass, etcd's lease tick), never
// before. So a holder is alive until a call proves it gone, and a call that completed at C can
// prove it gone only if C >= ExpiresNs. Such a death starts the holder's lock-delay no earlier
// than ExpiresNs; a revoke starts it no earlier than the revoke's invocation.

type holder struct {
	Session string
	// 0: an acquire with an unknown outcome that took effect; its token is then at least
	// MinToken (a read or a release that names it fixes it).
	Token     uint64
	MinToken  uint64
	Mode      Mode
	Value     string // a leader's value; "" for a plain grant
	ExpiresNs int64
	DelayNs   int64
	// The grant of a call whose answer its client never read (an unknown outcome): dlockd gives
	// back a grant whose answer it could not deliver (ADR-0007), a release at any moment, so it
	// may end before its promise, and without a lock-delay.
	Undelivered bool
}

// State of one key. Immutable: every step copies it.
type State struct {
	Holders  []holder // ordered by token
	MaxToken uint64   // every grant's token is greater
	Limit    int      // the semaphore's limit while permits live
	// A lock-delay may be running, and no grant takes effect before DelayUntil (a lower bound of
	// its end). 0: none. Cleared by a grant (every delay of the key was over by then).
	DelayUntil int64
	// Every call linearized from here on took effect at NotBefore or later: an expiry or a delay
	// that an earlier call relied on had passed. A call answered before it cannot come next.
	NotBefore int64
}

func (s State) clone() State {
	c := s
	c.Holders = append([]holder(nil), s.Holders...)
	return c
}

func (s *State) normalise() {
	sort.Slice(s.Holders, func(i, j int) bool {
		a, b := s.Holders[i], s.Holders[j]
		if a.Token != b.Token {
			return a.Token < b.Token
		}
		if a.MinToken != b.MinToken {
			return a.MinToken < b.MinToken
		}
		return a.Session < b.Session
	})
	hasPermit := false
	for _, h := range s.Holders {
		hasPermit = hasPermit || h.Mode == Permit
	}
	if !hasPermit {
		s.Limit = 0
	}
}

func (s State) equal(o State) bool {
	if s.MaxToken != o.MaxToken || s.Limit != o.Limit || s.DelayUntil != o.DelayUntil ||
		s.NotBefore != o.NotBefore || len(s.Holders) != len(o.Holders) {
		return false
	}
	for i := range s.Holders {
		if s.Holders[i] != o.Holders[i] {
			return false
		}
	}
	return true
}

func (s State) hash() uint64 {
	h := fnv.New64a()
	fmt.Fprint(h, s.MaxToken, s.Limit, s.DelayUntil, s.NotBefore)
	for _, x := range s.Holders {
		fmt.Fprint(h, "|", x.Session, x.Token, x.MinToken, x.Mode, x.Value, x.ExpiresNs, x.DelayNs,
			x.Undelivered)
	}
	return h.Sum64()
}

// kill removes holder i, proven gone: it ended at `fromNs` (its expiry, or the revoke) at the
// earliest, and its lock-delay runs from then.
func (s *State) kill(i int, fromNs int64) {
	h := s.Holders[i]
	s.NotBefore = max(s.NotBefore, fromNs)
	if h.DelayNs > 0 {
		s.DelayUntil = max(s.DelayUntil, fromNs+h.DelayNs)
	}
	s.Holders = append(s.Holders[:i], s.Holders[i+1:]...)
}

// ends are the states in which holder i has ended by `completeNs`, none if it cannot have:
// given back (an undelivered grant, at any moment: a release, with no lock-delay) or expired (its
// promise ran out by then: kill, which starts its lock-delay). Without a lock-delay the first
// admits all the second does, and is the only one.
func ends(s State, i int, completeNs int64) []State {
	var result []State
	h := s.Holders[i]
	if h.Undelivered {
		n := s.clone()
		n.Holders = append(n.Holders[:i], n.Holders[i+1:]...)
		result = append(result, n)
		if h.DelayNs == 0 {
			return result
		}
	}
	if completeNs >= h.ExpiresNs {
		n := s.clone()
		n.kill(i, h.ExpiresNs)
		result = append(result, n)
	}
	return result
}

// endEach: the states in which every holder of `indices` (ascending) has ended by `completeNs`.
func endEach(s State, indices []int, completeNs int64) []State {
	states := []State{s}
	for j := len(indices) - 1; j >= 0 && len(states) > 0; j-- {
		var next []State
		for _, n := range states {
			next = append(next, ends(n, indices[j], completeNs)...)
		}
		states = next
	}
	return states
}

// learn fixes holder i's token once a call names it (an unknown grant's token shows up in a
// read, a release, an extend): later grants must exceed it.
func (s *State) learn(i int, token uint64) {
	s.Holders[i].Token = token
	s.MaxToken = max(s.MaxToken, token)
}

// find is the holder of `session` named by `token` (a holder with an unknown token whose least
// possible token is at most `token` matches too); -1 when none.
func (s State) find(session string, token uint64) int {
	for i, h := range s.Holders {
		if h.Session == session && (h.Token == token || (h.Token == 0 && token >= h.MinToken)) {
			return i
		}
	}
	return -1
}

// step is the model's transition: every state the key may be in after the call, none when the
// answer is impossible in `s`.
func step(s State, in Input, out Output) []State {
	if out.CompleteNs < s.NotBefore {
		return nil
	}
	var next []State
	switch in.Op {
	case "acquire", "campaign":
		next = stepAcquire(s, in, out)
	case "release", "resign":
		next = stepRelease(s, in, out)
	case "extend":
		next = stepExtend(s, in, out)
	case "proclaim":
		next = stepProclaim(s, in, out)
	case "read":
		next = stepRead(s, in, out)
	case "observe":
		next = stepObserve(s, in, out)
	case "revoke":
		next = stepRevoke(s, in, out)
	case "close":
		next = stepClose(s, in, out)
	}
	for i := range next {
		next[i].normalise()
	}
	if out.Outcome == OutcomeUnknown && !containsState(next, s) {
		// Or it did not take effect at all. That is the same as taking effect after every
		// other call (its answer is at the end of the history), which Porcupine tries too;
		// saying so here lets it place the call once, early, instead of carrying it to the end
		// of the history and trying it at every point: with a dozen unknown acquires and
		// revokes in a key of 2600 calls (pg under faults), that search did not end in a minute.
		next = append(next, s)
	}
	return next
}

func containsState(states []State, s State) bool {
	for _, t := range states {
		if t.equal(s) {
			return true
		}
	}
	return false
}

// stepRelease: a release (or a resign) of the holder (session, token).
func stepRelease(s State, in Input, out Output) []State {
	i := s.find(in.Session, in.Token)
	switch {
	case out.Outcome == OutcomeOk || out.Outcome == OutcomeUnknown:
		if i < 0 {
			if out.Outcome == OutcomeOk {
				return nil // released a grant that was not live
			}
			return []State{s}
		}
		n := s.clone()
		if out.Outcome == OutcomeOk {
			n.learn(i, in.Token)
		}
		n.Holders = append(n.Holders[:i], n.Holders[i+1:]...) // a release starts no delay
		return []State{n}
	case out.Error == "lock_lost":
		return lost(s, i, out)
	}
	return []State{s}
}

// lost: the call was answered lock_lost for holder i (-1: none). Legal when there is none, or
// when it may have expired by the answer (then it is gone).
func lost(s State, i int, out Output) []State {
	if i < 0 || s.Holders[i].Token == 0 {
		return []State{s} // an unknown-token holder may have another token
	}
	return ends(s, i, out.CompleteNs) // none: the grant was live, its promise had not run out
}

// stepExtend: a new expiry for the holder (session, token), the same token.
func stepExtend(s State, in Input, out Output) []State {
	i := s.find(in.Session, in.Token)
	switch {
	case out.Outcome == OutcomeOk || out.Outcome == OutcomeUnknown:
		if i < 0 {
			if out.Outcome == OutcomeOk {
				return nil
			}
			return []State{s}
		}
		if out.Outcome == OutcomeOk && out.Token != 0 && out.Token != in.Token {
			return nil // an extend keeps the token
		}
		n := s.clone()
		if out.Outcome == OutcomeOk {
			n.learn(i, in.Token)
		}
		expires := out.ExpiresNs
		if out.Outcome == OutcomeUnknown {
			expires = in.IfEffectExpiresNs
		}
		if expires != 0 {
			n.Holders[i].ExpiresNs = expires
		}
		return []State{n}
	case out.Error == "lock_lost":
		return lost(s, i, out)
	}
	return []State{s}
}

// stepClose: DELETE /v1/sessions/{id} ends every grant of the session, cleanly (no lock-delay).
// A close touches every key; the workload records it once per key it used, so each key's
// history sees it (each at its own point within the call: a weaker check than one atomic close).
func stepClose(s State, in Input, out Output) []State {
	if out.Outcome == OutcomeFail {
		return []State{s}
	}
	n := s.clone()
	kept := n.Holders[:0]
	for _, h := range n.Holders {
		if h.Session != in.Session {
			kept = append(kept, h)
		}
	}
	n.Holders = kept
	return []State{n}
}

// stepRevoke: the admin revoke ends every holder of the key; each one's delay runs from the
// revoke (or from its own expiry, if it may have expired first).
func stepRevoke(s State, in Input, out Output) []State {
	switch out.Outcome {
	case OutcomeFail:
		return []State{s}
	case OutcomeOk:
		if out.Revoked {
			if len(s.Holders) == 0 {
				return nil
			}
			if out.Token != 0 && s.find(sessionOfToken(s, out.Token), out.Token) < 0 {
				return nil // revoked a grant that was not live
			}
		} else {
			for _, h := range s.Holders {
				if !h.Undelivered && out.CompleteNs < h.ExpiresNs {
					return nil // a live grant, yet nothing to revoke
				}
			}
		}
	}
	states := []State{s}
	for i := len(s.Holders) - 1; i >= 0; i-- {
		from := min(in.InvokeNs, s.Holders[i].ExpiresNs)
		if !out.Revoked && out.Outcome == OutcomeOk {
			from = s.Holders[i].ExpiresNs
		}
		var next []State
		for _, n := range states {
			if n.Holders[i].Undelivered { // or it was given back first
				given := n.clone()
				given.Holders = append(given.Holders[:i], given.Holders[i+1:]...)
				next = append(next, given)
			}
			n = n.clone()
			n.kill(i, from)
			next = append(next, n)
		}
		states = next
	}
	return states
}

func sessionOfToken(s State, token uint64) string {
	for _, h := range s.Holders {
		if h.Token == token || (h.Token == 0 && token >= h.MinToken) {
			return h.Session
		}
	}
	return ""
}

// stepRead: GET /v1/locks/{key} (or /v1/semaphores/{name}) lists every live holder.
func stepRead(s State, in Input, out Output) []State {
	if out.Outcome == OutcomeUnknown || (out.Outcome == OutcomeFail && out.Error != "lock_not_found") {
		return []State{s}
	}
	n := s.clone()
	listed := make([]bool, len(n.Holders))
	for _, r := range out.Holders {
		found := -1
		for i, h := range n.Holders {
			if !listed[i] && (h.Token == r.Token ||
				(h.Token == 0 && r.Token >= h.MinToken && r.Session == h.Session)) &&
				(r.Session == "" || r.Session == h.Session) {
				found = i
				break
			}
		}
		if found < 0 {
			return nil // a holder the model does not have
		}
		listed[found] = true
		n.learn(found, r.Token)
	}
	var missing []int
	for i := range n.Holders {
		if !listed[i] {
			missing = append(missing, i)
		}
	}
	return endEach(n, missing, out.CompleteNs) // none: a live holder missing
}

// NewModel is the Porcupine model of every primitive (every key of the history is a partition).
// startNs is the history's start, so descriptions show times from it.
func NewModel(startNs int64) porcupine.Model {
	return modelFrom([]State{{}}, startNs)
}

// modelFrom is the model whose keys start in any of `init`.
func modelFrom(init []State, startNs int64) porcupine.Model {
	nondeterministic := porcupine.NondeterministicModel{
		Partition:      partitionByKey,
		PartitionEvent: partitionEventsByKey,
		Init: func() []interface{} {
			states := make([]interface{}, len(init))
			for i := range init {
				states[i] = init[i]
			}
			return states
		},
		Step: func(state, input, output interface{}) []interface{} {
			next := step(state.(State), input.(Input), output.(Output))
			result := make([]interface{}, len(next))
			for i := range next {
				result[i] = next[i]
			}
			return result
		},
		Equal: func(a, b interface{}) bool { return a.(State).equal(b.(State)) },
		Hash:  func(a interface{}) uint64 { return a.(State).hash() },
		DescribeOperation: func(input, output interface{}) string {
			return describeOperation(input.(Input), output.(Output), startNs)
		},
		DescribeState: func(state interface{}) string { return describeState(state.(State), startNs) },
	}
	return nondeterministic.ToModel()
}

func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	index := map[string]int{}
	var keys []string
	var parts [][]porcupine.Operation
	for _, op := range history {
		key := op.Input.(Input).Key
		i, seen := index[key]
		if !seen {
			i = len(parts)
			index[key] = i
			keys = append(keys, key)
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}

func partitionEventsByKey(history []porcupine.Event) [][]porcupine.Event {
	keyOfID := map[int]string{}
	index := map[string]int{}
	var parts [][]porcupine.Event
	for _, event := range history {
		if event.Kind == porcupine.CallEvent {
			keyOfID[event.Id] = event.Value.(Input).Key
		}
		key := keyOfID[event.Id]
		i, seen := index[key]
		if !seen {
			i = len(parts)
			index[key] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], event)
	}
	return parts
}

func ms(ns, startNs int64) string {
	if ns == Forever {
		return "∞"
	}
	return fmt.Sprintf("%.3fms", float64(ns-startNs)/1e6)
}

// short abbreviates a long session id (a 32-digit hex id) in descriptions.
func short(session string) string {
	if len(session) > 12 {
		return session[:8] + "…"
	}
	return session
}

func describeHolder(h holder, startNs int64) string {
	token := fmt.Sprint(h.Token)
	if h.Token == 0 {
		token = fmt.Sprintf("≥%d?", h.MinToken)
	}
	text := fmt.Sprintf("%s#%s %s", short(h.Session), token, h.Mode)
	if h.Value != "" {
		text += fmt.Sprintf(" leader %q", h.Value)
	}
	if h.ExpiresNs != Forever {
		text += " until≥" + ms(h.ExpiresNs, startNs)
	}
	if h.DelayNs > 0 {
		text += fmt.Sprintf(" delay %dms", h.DelayNs/1_000_000)
	}
	return text
}

func describeState(s State, startNs int64) string {
	var parts []string
	for _, h := range s.Holders {
		parts = append(parts, describeHolder(h, startNs))
	}
	text := "free"
	if len(parts) > 0 {
		text = strings.Join(parts, ", ")
	}
	text += fmt.Sprintf(" (max token %d", s.MaxToken)
	if s.Limit > 0 {
		text += fmt.Sprintf(", limit %d", s.Limit)
	}
	if s.DelayUntil > 0 {
		text += ", delay until≥" + ms(s.DelayUntil, startNs)
	}
	if s.NotBefore > 0 {
		text += ", now≥" + ms(s.NotBefore, startNs)
	}
	return text + ")"
}

func describeOperation(in Input, out Output, startNs int64) string {
	var args []string
	switch in.Op {
	case "acquire":
		args = append(args, in.Mode.String())
		if in.Mode == Permit {
			args = append(args, fmt.Sprintf("limit %d", in.Limit))
		}
		if in.WaitMs > 0 {
			args = append(args, fmt.Sprintf("wait %dms", in.WaitMs))
		}
	case "campaign":
		args = append(args, fmt.Sprintf("%q", in.Value))
	case "proclaim":
		args = append(args, fmt.Sprint(in.Token), fmt.Sprintf("%q", in.Value))
	case "release", "resign", "extend":
		args = append(args, fmt.Sprint(in.Token))
	}
	if in.DelayNs > 0 {
		args = append(args, fmt.Sprintf("delay %dms", in.DelayNs/1_000_000))
	}
	session := short(in.Session)
	if session == "" {
		session = "-"
	}
	text := fmt.Sprintf("%s %s(%s) → ", session, in.Op, strings.Join(args, ", "))
	switch out.Outcome {
	case OutcomeUnknown:
		return text + "unknown"
	case OutcomeFail:
		return text + out.Error
	}
	switch in.Op {
	case "acquire", "campaign":
		text += fmt.Sprintf("token %d", out.Token)
		if out.ExpiresNs != Forever {
			text += " until≥" + ms(out.ExpiresNs, startNs)
		}
	case "extend":
		text += "ok"
		if out.ExpiresNs != 0 && out.ExpiresNs != Forever {
			text += " until≥" + ms(out.ExpiresNs, startNs)
		}
	case "read":
		var holders []string
		for _, h := range out.Holders {
			holders = append(holders, fmt.Sprintf("%s#%d", short(h.Session), h.Token))
		}
		text += "[" + strings.Join(holders, ", ") + "]"
	case "observe":
		text += fmt.Sprintf("leader #%d %q", out.Token, out.Value)
	case "revoke":
		text += fmt.Sprintf("revoked=%v", out.Revoked)
		if out.Token != 0 {
			text += fmt.Sprintf(" #%d", out.Token)
		}
	default:
		text += "ok"
	}
	return text
}
