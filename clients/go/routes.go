package dlock

import (
	"context"
	"encoding/json"
	"strconv"
	"time"
)

// grant is the answer of an acquire, extend or campaign.
type grant struct {
	FencingToken int64  `json:"fencing_token"`
	TTLMs        int64  `json:"ttl_ms"`
	Lease        string `json:"lease"`
	Mode         string `json:"mode"`
	Limit        int    `json:"limit"`
	Leader       struct {
		Value string `json:"value"`
	} `json:"leader"`
	trusted time.Duration // min(asked, answered)
	sentAt  time.Time
}

type sessionAnswer struct {
	SessionID   string `json:"session_id"`
	Owner       string `json:"owner"`
	TTLMs       int64  `json:"ttl_ms"`
	LockDelayMs int64  `json:"lock_delay_ms"`
}

func (c *Client) openSession(ctx context.Context, owner string, ttl, lockDelay time.Duration) (*sessionAnswer, time.Time, error) {
	body := map[string]any{"owner": owner}
	if ttl > 0 {
		body["ttl_ms"] = ttl.Milliseconds()
	}
	if lockDelay > 0 {
		body["lock_delay_ms"] = lockDelay.Milliseconds()
	}
	cl := c.newCall(c.retryBudget)
	cl.repeatSafe = false // a repeat would open a second session
	x, err := c.send(ctx, "POST", "/v1/sessions", body, "open session", cl)
	if err != nil {
		return nil, time.Time{}, err
	}
	if err := expect(x, 201, "open session", ""); err != nil {
		return nil, time.Time{}, err
	}
	answer := &sessionAnswer{}
	if err := x.decode("open session", answer); err != nil {
		return nil, time.Time{}, err
	}
	if answer.SessionID == "" || answer.TTLMs <= 0 && ttl <= 0 {
		return nil, time.Time{}, &Error{Code: CodeInternal, Message: "open session: the server sent no session_id or ttl_ms"}
	}
	return answer, x.sentAt, nil
}

func (c *Client) keepalive(ctx context.Context, id string, cl *call) (time.Duration, time.Time, error) {
	what := "keepalive session " + id
	x, err := c.send(ctx, "POST", "/v1/sessions/"+escape(id)+"/keepalive", nil, what, cl)
	if err != nil {
		return 0, time.Time{}, err
	}
	if err := expect(x, 200, what, ""); err != nil {
		return 0, time.Time{}, err
	}
	var answer struct {
		TTLMs int64 `json:"ttl_ms"`
	}
	err = x.decode(what, &answer)
	return time.Duration(answer.TTLMs) * time.Millisecond, x.sentAt, err
}

func (c *Client) closeSession(ctx context.Context, id string) error {
	what := "close session " + id
	x, err := c.send(ctx, "DELETE", "/v1/sessions/"+escape(id), nil, what, c.newCall(c.requestTimeout))
	if err != nil {
		return err
	}
	return expect(x, 204, what, "")
}

// acquireRequest is what an acquire or campaign asks for.
type acquireRequest struct {
	key, sessionID, ns, mode string
	ttl, wait                time.Duration
	sessionBound             bool
	limit                    int
	leaderValue              *string // a campaign
}

func collection(mode string) string {
	if mode == "permit" {
		return "semaphores"
	}
	return "locks"
}

// acquire: the grant; a CodeHeld error when still held after the wait (with the lock-delay's
// end when the server named one).
func (c *Client) acquire(ctx context.Context, r acquireRequest) (*grant, error) {
	campaign := r.leaderValue != nil
	what := "acquire " + r.key
	target := "/v1/" + collection(r.mode) + "/" + escape(r.key) + "/acquire"
	if campaign {
		what = "campaign " + r.key
		target = "/v1/elections/" + escape(r.key) + "/campaign"
	}
	target += query("ns", c.ns(r.ns))
	waitUntil := time.Now().Add(r.wait)
	var askedWait time.Duration
	cl := c.newCall(c.retryBudget + r.wait)
	cl.before = func() ([]byte, time.Duration) {
		// Recomputed before every attempt: retries after a 503 never wait past our deadline.
		askedWait = max(0, time.Until(waitUntil).Truncate(time.Millisecond))
		body := map[string]any{"session_id": r.sessionID}
		if campaign {
			body["value"] = *r.leaderValue
		} else {
			if r.sessionBound {
				body["lease"] = "session"
			}
			if r.ttl > 0 {
				body["ttl_ms"] = r.ttl.Milliseconds()
			}
			if r.mode == "shared" {
				body["mode"] = "shared"
			}
			if r.mode == "permit" {
				body["limit"] = r.limit
			}
		}
		if askedWait > 0 {
			body["wait_ms"] = askedWait.Milliseconds()
		}
		data, _ := json.Marshal(body)
		return data, askedWait
	}
	for round := 0; ; {
		x, err := c.send(ctx, "POST", target, nil, what, cl)
		if err != nil {
			return nil, err
		}
		if x.status == 200 {
			answer := &grant{}
			if err := x.decode(what, answer); err != nil {
				return nil, err
			}
			answer.trusted = TrustedTTL(r.ttl, time.Duration(answer.TTLMs)*time.Millisecond)
			answer.sentAt = x.sentAt
			return answer, nil
		}
		wire := parseErrorBody(x.body)
		if x.status != 409 || wire.Code != "held" {
			return nil, errorFromResponse(x.status, x.body, what, r.key)
		}
		// Held. The server may cap the wait below ours: keep asking until ours is spent.
		left := time.Until(waitUntil)
		if left <= 20*time.Millisecond {
			return nil, heldError(r.key, what, r.wait.Seconds(), wire.DelayedUntil)
		}
		if time.Since(x.sentAt) < askedWait/2 {
			// Answered early without waiting: pace the retries instead of spinning.
			c.mu.Lock()
			pause := min(left, backoffDelay(c.backoffInitial, c.backoffMax, round, c.random.Float64()))
			c.mu.Unlock()
			round++
			if err := sleep(ctx, pause); err != nil {
				return nil, cancelled(what, err)
			}
		}
	}
}

func (c *Client) extend(ctx context.Context, key, sessionID string, token int64, ttl time.Duration, ns, mode string, cl *call) (*grant, error) {
	what := "extend " + key
	body := map[string]any{"session_id": sessionID, "fencing_token": token}
	if ttl > 0 {
		body["ttl_ms"] = ttl.Milliseconds()
	}
	target := "/v1/" + collection(mode) + "/" + escape(key) + "/extend" + query("ns", c.ns(ns))
	x, err := c.send(ctx, "POST", target, body, what, cl)
	if err != nil {
		return nil, err
	}
	if err := expect(x, 200, what, key); err != nil {
		return nil, err
	}
	answer := &grant{}
	if err := x.decode(what, answer); err != nil {
		return nil, err
	}
	if answer.FencingToken != token {
		// Extend never changes the token: another one means another grant.
		return nil, &Error{Code: CodeLockLost, Message: what + ": the server answered token " +
			strconv.FormatInt(answer.FencingToken, 10) + ", ours is " + strconv.FormatInt(token, 10)}
	}
	answer.trusted = TrustedTTL(ttl, time.Duration(answer.TTLMs)*time.Millisecond)
	answer.sentAt = x.sentAt
	return answer, nil
}

func (c *Client) release(ctx context.Context, key, sessionID string, token int64, ns, mode string) error {
	what := "release " + key
	target := "/v1/" + collection(mode) + "/" + escape(key) + query("session_id", sessionID,
		"fencing_token", strconv.FormatInt(token, 10), "ns", c.ns(ns))
	x, err := c.send(ctx, "DELETE", target, nil, what, c.newCall(c.requestTimeout))
	if err != nil {
		return err
	}
	return expect(x, 204, what, key)
}

func (c *Client) proclaim(ctx context.Context, name, sessionID string, token int64, value, ns string) error {
	what := "proclaim " + name
	body := map[string]any{"session_id": sessionID, "fencing_token": token, "value": value}
	x, err := c.send(ctx, "POST", "/v1/elections/"+escape(name)+"/proclaim"+query("ns", c.ns(ns)), body, what, c.newCall(c.retryBudget))
	if err != nil {
		return err
	}
	if err := expect(x, 200, what, name); err != nil {
		return err
	}
	answer := &grant{}
	if err := x.decode(what, answer); err != nil {
		return err
	}
	if answer.FencingToken != token {
		return &Error{Code: CodeLockLost, Message: what + ": the server answered another token"}
	}
	return nil
}

func (c *Client) resign(ctx context.Context, name, sessionID string, token int64, ns string) error {
	what := "resign " + name
	body := map[string]any{"session_id": sessionID, "fencing_token": token}
	x, err := c.send(ctx, "POST", "/v1/elections/"+escape(name)+"/resign"+query("ns", c.ns(ns)), body, what, c.newCall(c.requestTimeout))
	if err != nil {
		return err
	}
	return expect(x, 204, what, name)
}
