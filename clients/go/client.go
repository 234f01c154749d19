package dlock

import (
	"context"
	"math/rand"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Client talks to one or several dlockd sharing one backend. It is safe for concurrent use;
// share one per process. Close releases its idle connections.
type Client struct {
	servers        []string
	token          string
	adminToken     string
	clockDrift     float64
	requestTimeout time.Duration
	retryBudget    time.Duration
	backoffInitial time.Duration
	backoffMax     time.Duration
	namespace      string
	http           *http.Client

	mu      sync.Mutex
	current int // the server calls go to first
	random  *rand.Rand
}

// New makes a client (no request is sent). Errors are CodeInvalidArgument naming the field.
func New(config Config) (*Client, error) {
	servers, err := resolveServers(config.Servers)
	if err != nil {
		return nil, err
	}
	token, err := resolveToken(config.Token, config.TokenFile)
	if err != nil {
		return nil, err
	}
	admin := orEnv(config.AdminToken, "DLOCK_ADMIN_TOKEN")
	if admin != "" {
		if admin, err = checkBearer(admin, "admin_token"); err != nil {
			return nil, err
		}
	}
	drift, err := resolveClockDrift(config.ClockDrift)
	if err != nil {
		return nil, err
	}
	transport := &http.Transport{
		Proxy:               nil, // a lock service is reached directly
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
		ForceAttemptHTTP2:   false,
	}
	for _, server := range servers {
		if strings.HasPrefix(server, "https://") {
			tlsConfig, err := tlsConfig(orEnv(config.CAFile, "DLOCK_CACERT"),
				orEnv(config.CertFile, "DLOCK_CERT"), orEnv(config.KeyFile, "DLOCK_KEY"))
			if err != nil {
				return nil, err
			}
			transport.TLSClientConfig = tlsConfig
			break
		}
	}
	return &Client{
		servers:        servers,
		token:          token,
		adminToken:     admin,
		clockDrift:     drift,
		requestTimeout: orDefault(config.RequestTimeout, 10*time.Second),
		retryBudget:    orDefault(config.RetryBudget, 15*time.Second),
		backoffInitial: orDefault(config.BackoffInitial, 50*time.Millisecond),
		backoffMax:     orDefault(config.BackoffMax, 2*time.Second),
		namespace:      orEnv(config.Namespace, "DLOCK_NAMESPACE"),
		http:           &http.Client{Transport: transport},
		random:         rand.New(rand.NewSource(time.Now().UnixNano())),
	}, nil
}

// Servers are the URLs the client talks to, in failover order.
func (c *Client) Servers() []string { return append([]string(nil), c.servers...) }

// ClockDrift is the clock-rate allowance of the client's deadlines.
func (c *Client) ClockDrift() float64 { return c.clockDrift }

// Close releases idle connections. Sessions are closed by their own Close.
func (c *Client) Close() { c.http.CloseIdleConnections() }

func escape(name string) string { return url.PathEscape(name) }

func query(pairs ...string) string {
	values := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			values.Set(pairs[i], pairs[i+1])
		}
	}
	if len(values) == 0 {
		return ""
	}
	return "?" + values.Encode()
}

func (c *Client) ns(ns string) string {
	if ns != "" {
		return ns
	}
	return c.namespace
}

// LockInfo is a live holder of a key, as GET /v1/locks/{key} shows it.
type LockInfo struct {
	Key          string `json:"key"`
	FencingToken int64  `json:"fencing_token"`
	Owner        string `json:"owner"`
	Mode         string `json:"mode"`
	Lease        string `json:"lease"`
	AcquiredAt   string `json:"acquired_at"`
	ExpiresAt    string `json:"expires_at"`
	SessionID    string `json:"session_id"` // shown to its own principal and admins only (C6)
	Limit        int    `json:"limit"`      // a permit's semaphore size
}

// SemaphoreInfo: the agreed limit (0 while no permit is held) and the permit holders.
type SemaphoreInfo struct {
	Name    string     `json:"name"`
	Limit   int        `json:"limit"`
	Holders []LockInfo `json:"holders"`
}

// LeaderInfo is an election's leader.
type LeaderInfo struct {
	Name   string `json:"name"`
	Leader struct {
		Owner string `json:"owner"`
		Value string `json:"value"`
	} `json:"leader"`
	FencingToken int64  `json:"fencing_token"`
	AcquiredAt   string `json:"acquired_at"`
	ExpiresAt    string `json:"expires_at"`
	SessionID    string `json:"session_id"`
}

// Value is the leader's value.
func (l *LeaderInfo) Value() string { return l.Leader.Value }

// get answers GET path into into; false when answered 404 with noneCode.
func (c *Client) get(ctx context.Context, path, what, noneCode string, cl *call, into any) (bool, error) {
	x, err := c.send(ctx, "GET", path, nil, what, cl)
	if err != nil {
		return false, err
	}
	if x.status == 404 && noneCode != "" && parseErrorBody(x.body).Code == noneCode {
		return false, nil
	}
	if err := expect(x, 200, what, ""); err != nil {
		return false, err
	}
	return true, x.decode(what, into)
}

// Holders are the live holders of key (empty when it is free): one for an exclusive lock,
// each reader of a shared one.
func (c *Client) Holders(ctx context.Context, key string) ([]LockInfo, error) {
	var answer struct {
		LockInfo
		Holders []LockInfo `json:"holders"`
	}
	found, err := c.get(ctx, "/v1/locks/"+escape(key)+query("ns", c.namespace), "get "+key,
		"lock_not_found", c.newCall(c.retryBudget), &answer)
	if err != nil || !found {
		return nil, err
	}
	if len(answer.Holders) == 0 {
		return []LockInfo{answer.LockInfo}, nil
	}
	return answer.Holders, nil
}

// Semaphore reads the semaphore name: its agreed limit and its permit holders.
func (c *Client) Semaphore(ctx context.Context, name string) (*SemaphoreInfo, error) {
	info := &SemaphoreInfo{Name: name}
	_, err := c.get(ctx, "/v1/semaphores/"+escape(name)+query("ns", c.namespace),
		"get semaphore "+name, "", c.newCall(c.retryBudget), info)
	if err != nil {
		return nil, err
	}
	return info, nil
}

// Leader reads the election's leader: nil when nobody leads.
func (c *Client) Leader(ctx context.Context, name string) (*LeaderInfo, error) {
	info := &LeaderInfo{Name: name}
	found, err := c.get(ctx, "/v1/elections/"+escape(name)+query("ns", c.namespace),
		"get leader "+name, "no_leader", c.newCall(c.retryBudget), info)
	if err != nil || !found {
		return nil, err
	}
	return info, nil
}

// Observe is one long poll: it answers once a leader with a token greater than afterToken
// leads, or that leader proclaims a value other than afterValue, at the latest after wait with
// the state then (nil: nobody leads). Pass the last answer's token and value to see each
// change once. The context cancels the poll.
func (c *Client) Observe(ctx context.Context, name string, afterToken int64, afterValue string, wait time.Duration) (*LeaderInfo, error) {
	waitMs := ""
	if wait > 0 {
		waitMs = strconv.FormatInt(wait.Milliseconds(), 10)
	}
	path := "/v1/elections/" + escape(name) + query("ns", c.namespace,
		"after_token", strconv.FormatInt(afterToken, 10), "after_value", afterValue, "wait_ms", waitMs)
	if afterToken > 0 && afterValue == "" {
		// An empty after_value is a value to compare with.
		path += "&after_value="
	}
	cl := c.newCall(c.retryBudget + wait)
	cl.slack = wait
	info := &LeaderInfo{Name: name}
	found, err := c.get(ctx, path, "observe "+name, "no_leader", cl, info)
	if err != nil || !found {
		return nil, err
	}
	return info, nil
}

// Revoke (admin) ends key's grant. It needs the admin token (Config.AdminToken,
// DLOCK_ADMIN_TOKEN, else the token). Not repeated after an unknown outcome: a repeat could
// revoke a grant made after the first.
func (c *Client) Revoke(ctx context.Context, key string) error {
	what := "revoke " + key
	cl := c.newCall(c.retryBudget)
	cl.repeatSafe, cl.admin = false, true
	x, err := c.send(ctx, "POST", "/v1/admin/locks/"+escape(key)+"/revoke"+query("ns", c.namespace), nil, what, cl)
	if err != nil {
		return err
	}
	return expect(x, 200, what, key)
}

// ClearDelay (admin) ends the lock-delays running on key (it is granted at once, its waiters
// tried); whether one was running.
func (c *Client) ClearDelay(ctx context.Context, key string) (bool, error) {
	what := "clear the lock-delay of " + key
	cl := c.newCall(c.retryBudget)
	cl.repeatSafe, cl.admin = false, true
	x, err := c.send(ctx, "POST", "/v1/admin/locks/"+escape(key)+"/clear-delay"+query("ns", c.namespace), nil, what, cl)
	if err != nil {
		return false, err
	}
	if err := expect(x, 200, what, key); err != nil {
		return false, err
	}
	var answer struct {
		Cleared bool `json:"cleared"`
	}
	return answer.Cleared, x.decode(what, &answer)
}
