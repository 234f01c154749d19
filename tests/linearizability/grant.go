package lincheck

// Grants: who may hold a key at once (C3 "Read-write locks and semaphores", the SPI's
// try_grant of each kind of GrantRequest), and the election's own calls.
//
//   - exclusive (a lock, a leader): alone. The session holding the key exclusive re-acquires
//     it (re-entrant) with a new, greater token; a session holding it shared does not upgrade.
//   - shared: with other shared holders only; a session's second shared acquire replaces its
//     holder with a greater token.
//   - permit: with other permits only, at most `limit` of other sessions, all agreeing on one
//     limit (another limit is `conflict` while a permit of another session lives); a
//     session's second acquire replaces its permit (never a second one) and sets the limit.
//
// Every grant's token is greater than every earlier grant's token of the key, of any mode. No
// grant takes effect while a lock-delay runs.

// blockers are the holders that exclude an acquire of `in.Mode` by `in.Session` (its own
// holder of the same mode is replaced, not a blocker), and own is that holder (-1: none).
func blockers(s State, in Input) (blocking []int, own int) {
	own = -1
	for i, h := range s.Holders {
		if h.Session == in.Session && h.Mode == in.Mode {
			own = i
			continue
		}
		if in.Mode == Exclusive || h.Mode != in.Mode {
			blocking = append(blocking, i)
		}
	}
	return blocking, own
}

// otherPermits are the permits of sessions other than the caller's.
func otherPermits(s State, session string) []int {
	var others []int
	for i, h := range s.Holders {
		if h.Mode == Permit && h.Session != session {
			others = append(others, i)
		}
	}
	return others
}

func stepAcquire(s State, in Input, out Output) []State {
	switch out.Outcome {
	case OutcomeOk:
		if out.Token <= s.MaxToken {
			return nil // a token not greater than an earlier grant's
		}
		return grants(s, in, out)
	case OutcomeUnknown:
		// Took effect, when it could (step adds: or not at all).
		return grants(s, in, out)
	}
	switch out.Error {
	case "held":
		return held(s, in, out)
	case "conflict":
		if in.Mode == Permit && len(otherPermits(s, in.Session)) > 0 && s.Limit != in.Limit {
			return []State{s}
		}
		return nil
	}
	return []State{s} // session_not_found, too_many_requests, invalid_argument: no effect
}

// grants are the states after the grant `in` → `out` (an unknown outcome: a grant with an
// unknown token), none when it could not have been made: a blocker still within its promise,
// permits over the limit, a limit conflict, a lock-delay not yet over.
func grants(s State, in Input, out Output) []State {
	blocking, _ := blockers(s, in)
	var candidates []State
	for _, n := range endEach(s, blocking, out.CompleteNs) {
		if in.Mode == Permit {
			candidates = append(candidates, permitRoom(n, in, out)...)
		} else {
			candidates = append(candidates, n)
		}
	}
	var result []State
	for _, c := range candidates {
		c = c.clone()
		if c.DelayUntil > 0 && out.CompleteNs < c.DelayUntil {
			continue
		}
		if _, own := blockers(c, in); own >= 0 {
			c.Holders = append(c.Holders[:own], c.Holders[own+1:]...)
		}
		granted := holder{Session: in.Session, Mode: in.Mode, DelayNs: in.DelayNs}
		if in.Op == "campaign" {
			granted.Value = in.Value
		}
		if out.Outcome == OutcomeOk {
			granted.Token = out.Token
			granted.ExpiresNs = out.ExpiresNs
			c.MaxToken = out.Token
		} else {
			granted.MinToken = c.MaxToken + 1
			granted.ExpiresNs = in.IfEffectExpiresNs
			granted.Undelivered = true
			c.MaxToken++
		}
		c.Holders = append(c.Holders, granted)
		if in.Mode == Permit {
			c.Limit = in.Limit
		}
		c.NotBefore = max(c.NotBefore, c.DelayUntil)
		c.DelayUntil = 0
		result = append(result, c)
	}
	return result
}

// permitRoom: the states in which a permit of `in.Limit` fits. Permits of other sessions on
// another limit must all have expired; of those on this limit, fewer than `limit` may live, so
// enough of the ones past their promise must have expired — which ones is not known, so there
// is one state per choice.
func permitRoom(s State, in Input, out Output) []State {
	others := otherPermits(s, in.Session)
	if len(others) > 0 && s.Limit != in.Limit {
		return endEach(s, others, out.CompleteNs)
	}
	excess := len(others) - in.Limit + 1
	if excess <= 0 {
		return []State{s}
	}
	var expirable []int
	for _, i := range others {
		if s.Holders[i].Undelivered || out.CompleteNs >= s.Holders[i].ExpiresNs {
			expirable = append(expirable, i)
		}
	}
	var result []State
	for _, chosen := range combinations(expirable, excess) {
		result = append(result, endEach(s, chosen, out.CompleteNs)...)
	}
	return result
}

// combinations of k elements of `from`, each in increasing order.
func combinations(from []int, k int) [][]int {
	if k == 0 {
		return [][]int{nil}
	}
	var result [][]int
	for i := 0; i+k <= len(from); i++ {
		for _, rest := range combinations(from[i+1:], k-1) {
			result = append(result, append([]int{from[i]}, rest...))
		}
	}
	return result
}

// held: an acquire answered 409 held is legal when a holder of another session (or another
// mode) lives, when every permit is taken, when a lock-delay may be running, or when another
// acquire waited for the key on this server meanwhile (C3: with wait_ms 0 the answer is then
// held at once, without asking the backend; a waiting acquire does not overtake the queue).
// A holder past its promise may also have ended with a lock-delay that still runs.
func held(s State, in Input, out Output) []State {
	if in.QueuedAhead || s.DelayUntil > 0 {
		return []State{s}
	}
	blocking, _ := blockers(s, in)
	if len(blocking) > 0 {
		return []State{s}
	}
	if in.Mode == Permit && len(otherPermits(s, in.Session)) >= in.Limit {
		return []State{s}
	}
	var result []State
	for i, h := range s.Holders {
		if h.DelayNs > 0 && out.CompleteNs >= h.ExpiresNs {
			n := s.clone()
			n.kill(i, h.ExpiresNs)
			result = append(result, n)
		}
	}
	return result
}

// stepProclaim: the leader (session, token) changes its value; the token stays.
func stepProclaim(s State, in Input, out Output) []State {
	i := s.find(in.Session, in.Token)
	if i >= 0 && s.Holders[i].Mode != Exclusive {
		i = -1 // a shared or permit token leads nothing
	}
	switch {
	case out.Outcome == OutcomeOk || out.Outcome == OutcomeUnknown:
		if i < 0 {
			if out.Outcome == OutcomeOk {
				return nil
			}
			return []State{s}
		}
		if out.Outcome == OutcomeOk && out.Token != 0 && out.Token != in.Token {
			return nil
		}
		n := s.clone()
		if out.Outcome == OutcomeOk {
			n.learn(i, in.Token)
		}
		n.Holders[i].Value = in.Value
		return []State{n}
	case out.Error == "lock_lost":
		return lost(s, i, out)
	}
	return []State{s}
}

// stepObserve: GET /v1/elections/{name} answers the leader (an exclusive grant with a value)
// with its token and value, or no_leader. Reading it within the call is linearizable; since
// leaders' tokens increase, successive observes see leaders in token order.
func stepObserve(s State, in Input, out Output) []State {
	leader := -1
	for i, h := range s.Holders {
		if h.Mode == Exclusive && h.Value != "" {
			leader = i
		}
	}
	switch {
	case out.Outcome == OutcomeOk:
		if leader < 0 {
			return nil
		}
		h := s.Holders[leader]
		matches := h.Token == out.Token ||
			(h.Token == 0 && out.Token >= h.MinToken && (out.Session == "" || out.Session == h.Session))
		if !matches || h.Value != out.Value || (out.Session != "" && out.Session != h.Session) {
			return nil
		}
		n := s.clone()
		n.learn(leader, out.Token)
		return []State{n}
	case out.Outcome == OutcomeFail && out.Error == "no_leader":
		if leader < 0 {
			return []State{s}
		}
		return ends(s, leader, out.CompleteNs)
	}
	return []State{s}
}
