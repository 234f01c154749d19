package lincheck

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"
)

// A simulated dlock: a sequential reference implementation of one key space (holders with
// TTLs that the backend ends late, lock-delays, re-entrant acquires, modes, limits, revoke),
// driven by clients whose calls take effect at one instant inside their interval. Its histories
// are linearizable by construction, so the models must accept every one — with unknown
// outcomes, expiries and delays — and a reference with a bug injected must be caught.

type simHolder struct {
	session   string
	token     uint64
	mode      Mode
	expiresAt int64 // when the backend ends it (its promise or later)
	delay     int64
}

type simKey struct {
	holders    []simHolder
	limit      int
	delayUntil int64
}

type simServer struct {
	keys  map[string]*simKey
	token uint64
	// injected bugs
	grantOverHolder bool // an exclusive acquire ignores a live holder now and then
	rng             *rand.Rand
}

func (s *simServer) key(name string, now int64) *simKey {
	k := s.keys[name]
	if k == nil {
		k = &simKey{}
		s.keys[name] = k
	}
	live := k.holders[:0]
	for _, h := range k.holders {
		if h.expiresAt <= now {
			if h.delay > 0 {
				k.delayUntil = max(k.delayUntil, h.expiresAt+h.delay)
			}
			continue
		}
		live = append(live, h)
	}
	k.holders = live
	permits := false
	for _, h := range k.holders {
		permits = permits || h.mode == Permit
	}
	if !permits {
		k.limit = 0
	}
	return k
}

// apply runs one call at time `now` (its linearization point) and returns the answer.
func (s *simServer) apply(in Input, ttlNs int64, now int64) Output {
	k := s.key(in.Key, now)
	find := func() int {
		for i, h := range k.holders {
			if h.session == in.Session && h.token == in.Token {
				return i
			}
		}
		return -1
	}
	switch in.Op {
	case "acquire":
		if now < k.delayUntil {
			return Output{Outcome: OutcomeFail, Error: "held"}
		}
		own, others := -1, 0
		blocked := false
		for i, h := range k.holders {
			switch {
			case h.session == in.Session && h.mode == in.Mode:
				own = i
			case in.Mode == Exclusive || h.mode != in.Mode:
				blocked = true
			case h.mode == Permit:
				others++
			}
		}
		if in.Mode == Permit && others > 0 && k.limit != in.Limit {
			return Output{Outcome: OutcomeFail, Error: "conflict"}
		}
		if in.Mode == Permit && others >= in.Limit {
			blocked = true
		}
		if blocked && s.grantOverHolder && in.Mode == Exclusive && s.rng.Intn(4) == 0 {
			blocked = false
		}
		if blocked {
			return Output{Outcome: OutcomeFail, Error: "held"}
		}
		if own >= 0 {
			k.holders = append(k.holders[:own], k.holders[own+1:]...)
		}
		s.token++
		k.holders = append(k.holders, simHolder{session: in.Session, token: s.token, mode: in.Mode,
			expiresAt: now + ttlNs + s.rng.Int63n(3_000_000), delay: in.DelayNs})
		if in.Mode == Permit {
			k.limit = in.Limit
		}
		return Output{Outcome: OutcomeOk, Token: s.token}
	case "release":
		if i := find(); i >= 0 {
			k.holders = append(k.holders[:i], k.holders[i+1:]...)
			return Output{Outcome: OutcomeOk}
		}
		return Output{Outcome: OutcomeFail, Error: "lock_lost"}
	case "extend":
		if i := find(); i >= 0 {
			k.holders[i].expiresAt = now + ttlNs + s.rng.Int63n(3_000_000)
			return Output{Outcome: OutcomeOk, Token: in.Token}
		}
		return Output{Outcome: OutcomeFail, Error: "lock_lost"}
	case "read":
		out := Output{Outcome: OutcomeOk, Holders: []HolderJSON{}}
		for _, h := range k.holders {
			out.Holders = append(out.Holders, HolderJSON{Session: h.session, Token: h.token})
		}
		return out
	case "revoke":
		out := Output{Outcome: OutcomeOk, Revoked: len(k.holders) > 0}
		for _, h := range k.holders {
			out.Token = max(out.Token, h.token)
			if h.delay > 0 {
				k.delayUntil = max(k.delayUntil, now+h.delay)
			}
		}
		k.holders = nil
		return out
	}
	panic(in.Op)
}

type simClient struct {
	id      int
	session string
	delayNs int64
	held    map[string]uint64 // key → the token this client knows it holds
	freeAt  int64
}

// simulate records a history of `calls` calls by `clients` clients on `keys` keys of `primitive`.
func simulate(seed int64, primitive string, clients, keys, calls int, bug bool) *HistoryJSON {
	rng := rand.New(rand.NewSource(seed))
	server := &simServer{keys: map[string]*simKey{}, rng: rng, grantOverHolder: bug}
	const ms = int64(time.Millisecond)
	var cs []*simClient
	for i := 0; i < clients; i++ {
		c := &simClient{id: i, session: fmt.Sprintf("s%d", i), held: map[string]uint64{}}
		if primitive == LockDelay {
			c.delayNs = int64(rng.Intn(3)) * 5 * ms
		}
		cs = append(cs, c)
	}
	type pending struct {
		client       *simClient
		op           OperationJSON
		in           Input
		point        int64
		ttlNs        int64
		unknown, run bool
	}
	next := func(c *simClient) pending {
		key := fmt.Sprintf("k%d", rng.Intn(keys))
		p := pending{client: c}
		p.op = OperationJSON{Client: c.id, Session: c.session, Key: key, Primitive: primitive}
		p.op.InvokeNs = c.freeAt + rng.Int63n(2*ms)
		p.point = p.op.InvokeNs + rng.Int63n(3*ms)
		p.op.CompleteNs = p.point + rng.Int63n(3*ms)
		p.ttlNs = int64(10+rng.Intn(20)) * ms
		token, holding := c.held[key]
		switch r := rng.Intn(20); {
		case r == 0 && primitive == LockDelay:
			p.op.Op, p.op.Session = "revoke", ""
		case r < 3:
			p.op.Op, p.op.Session = "read", ""
		case holding && r < 9:
			p.op.Op, p.op.Input.Token = "release", token
		case holding && r < 14:
			p.op.Op, p.op.Input.Token = "extend", token
			p.op.Input.TTLMs = p.ttlNs / ms
		default:
			p.op.Op = "acquire"
			p.op.Input.TTLMs = p.ttlNs / ms
			p.op.Input.LockDelayMs = c.delayNs / ms
			switch primitive {
			case RWLock:
				p.op.Input.Mode = []string{"shared", "exclusive"}[rng.Intn(2)]
			case Semaphore:
				p.op.Input.Limit = 2 // now and then another limit: a conflict while permits live
				if rng.Intn(10) == 0 {
					p.op.Input.Limit = 1 + 2*rng.Intn(2)
				}
			}
		}
		p.in, _ = derive(0, p.op, 0)
		p.unknown = rng.Intn(15) == 0
		p.run = !p.unknown || rng.Intn(2) == 0
		return p
	}
	file := &HistoryJSON{}
	var queue []pending
	for _, c := range cs {
		queue = append(queue, next(c))
	}
	for n := 0; n < calls; n++ {
		sort.Slice(queue, func(i, j int) bool { return queue[i].point < queue[j].point })
		p := queue[0]
		c := p.client
		out := Output{Outcome: OutcomeUnknown}
		if p.run {
			out = server.apply(p.in, p.ttlNs, p.point)
		}
		op := p.op
		switch {
		case p.unknown:
			op.Outcome = "unknown"
			if op.Op == "release" || op.Op == "extend" {
				delete(c.held, op.Key) // the client gives up on a grant it is unsure of
			}
		case out.Outcome == OutcomeOk:
			op.Outcome = "ok"
			op.Output = OutputJSON{Token: out.Token, Holders: out.Holders, Revoked: out.Revoked}
			switch op.Op {
			case "acquire":
				c.held[op.Key] = out.Token
			case "release":
				delete(c.held, op.Key)
			}
		default:
			op.Outcome = "fail"
			op.Output = OutputJSON{Error: out.Error}
			if out.Error == "lock_lost" {
				delete(c.held, op.Key)
			}
		}
		file.Operations = append(file.Operations, op)
		c.freeAt = op.CompleteNs
		queue[0] = next(c)
	}
	return file
}

func TestSimulatedHistoriesAreLinearizable(t *testing.T) {
	for _, primitive := range []string{Mutex, RWLock, Semaphore, LockDelay} {
		for seed := int64(1); seed <= 20; seed++ {
			file := simulate(seed, primitive, 5, 2, 400, false)
			h, err := FromJSON(file)
			if err != nil {
				t.Fatal(err)
			}
			r := CheckModel(h, primitive, 20*time.Second)
			if r.Verdict != VerdictOk {
				t.Fatalf("%s seed %d: %s\n%s", primitive, seed, r.Verdict, strings.Join(r.Explanations, "\n"))
			}
		}
	}
}

// A reference that grants an exclusive acquire over a live holder now and then: the checker
// must notice in most runs (a grant over a holder whose promise ran out is legal, and an
// unknown outcome can hide one).
func TestSimulatedOverlappingGrantsAreCaught(t *testing.T) {
	caught := 0
	for seed := int64(1); seed <= 20; seed++ {
		h, err := FromJSON(simulate(seed, Mutex, 5, 2, 400, true))
		if err != nil {
			t.Fatal(err)
		}
		if r := CheckModel(h, Mutex, 20*time.Second); r.Verdict == VerdictIllegal {
			caught++
		}
	}
	if caught < 18 {
		t.Fatalf("caught %d of 20 buggy runs", caught)
	}
}
