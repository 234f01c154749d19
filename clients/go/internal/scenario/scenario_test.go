// Package scenario runs every scenario of tests/clients/scenarios.json (the format:
// tests/clients/README.md) with the Go client, on each backend of DLOCK_CLIENT_BACKENDS, against
// the servers of one harness (tests/clients/harness.cc) per backend.
package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	dlock "dlock.dev/clients/go"
)

var kinds = map[string]error{
	"held":              dlock.ErrHeld,
	"lock_lost":         dlock.ErrLockLost,
	"session_not_found": dlock.ErrSessionNotFound,
	"unavailable":       dlock.ErrUnavailable, // also not_leader and unknown_outcome, its kinds
	"not_leader":        dlock.ErrNotLeader,
	"unknown_outcome":   dlock.ErrUnknownOutcome,
	"unauthenticated":   dlock.ErrUnauthenticated,
	"permission_denied": dlock.ErrPermissionDenied,
	"conflict":          dlock.ErrConflict,
	"invalid_argument":  dlock.ErrInvalidArgument,
	"too_many_requests": dlock.ErrTooManyRequests,
	"cancelled":         dlock.ErrCancelled,
	"tls":               dlock.ErrTLS,
}

const bogusToken = "dlk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" // well-formed, known to no server

var harnesses = map[string]*harness{}

func TestMain(m *testing.M) {
	// The variables the client reads must not leak from the shell into the tests.
	for _, pair := range os.Environ() {
		name, _, _ := strings.Cut(pair, "=")
		if strings.HasPrefix(name, "DLOCK_") && !strings.HasPrefix(name, "DLOCK_CLIENT_") &&
			!strings.HasPrefix(name, "DLOCK_TEST_") {
			os.Unsetenv(name)
		}
	}
	code := m.Run()
	for _, h := range harnesses {
		h.close()
	}
	os.Exit(code)
}

func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "../../../..")
}

type scenario struct {
	Name     string           `json:"name"`
	Backends []string         `json:"backends"`
	Steps    []map[string]any `json:"steps"`
}

// TestScenarios: one subtest <name>-<backend> per scenario and backend. DLOCK_TEST_FILTER
// (scripts/mutation-check) is a regular expression those names must match.
func TestScenarios(t *testing.T) {
	path := os.Getenv("DLOCK_CLIENT_SCENARIOS")
	if path == "" {
		path = filepath.Join(root(), "tests/clients/scenarios.json")
	}
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var document struct {
		Format    int        `json:"format"`
		Scenarios []scenario `json:"scenarios"`
	}
	if err := json.Unmarshal(text, &document); err != nil {
		t.Fatal(err)
	}
	if document.Format != 1 {
		t.Fatalf("this runner reads format 1 of the scenario list, not %d", document.Format)
	}
	backends := os.Getenv("DLOCK_CLIENT_BACKENDS")
	if backends == "" {
		backends = "sqlite,pg,etcd"
	}
	var filter *regexp.Regexp
	if f := os.Getenv("DLOCK_TEST_FILTER"); f != "" {
		filter = regexp.MustCompile(f)
	}
	binary := os.Getenv("DLOCK_CLIENT_HARNESS")
	if binary == "" {
		binary = filepath.Join(root(), "build/tests/clients/dlock_client_harness")
	}
	selected := 0
	for _, backend := range strings.Split(backends, ",") {
		for _, sc := range document.Scenarios {
			name := sc.Name + "-" + backend
			if !contains(sc.Backends, backend) || (filter != nil && !filter.MatchString(name)) {
				continue
			}
			selected++
			sc, backend := sc, backend
			t.Run(name, func(t *testing.T) {
				h := harnesses[backend]
				if h == nil {
					if _, err := os.Stat(binary); err != nil {
						t.Skipf("no harness at %s (build dlock_client_harness)", binary)
					}
					if h, err = startHarness(binary, backend); err != nil {
						t.Fatal(err)
					}
					harnesses[backend] = h
				}
				run := &run{t: t, h: h, names: map[string]any{}, started: map[string]time.Time{},
					ns: fmt.Sprintf("%.40s-%x", sc.Name, time.Now().UnixNano()&0xffffffff)}
				defer run.close()
				run.steps(sc.Steps)
			})
		}
	}
	if filter != nil && selected == 0 {
		fmt.Println("DLOCK_TEST_FILTER selected no test")
		t.Fatal("DLOCK_TEST_FILTER selected no test")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// outcome is what a step did: its value (nil for held/none) or its error, and how long it took.
type outcome struct {
	value   any
	err     error
	elapsed time.Duration
}

type task struct {
	step   map[string]any
	cancel context.CancelFunc
	done   chan struct{}
	result outcome
}

type run struct {
	t        *testing.T
	h        *harness
	ns       string
	names    map[string]any
	started  map[string]time.Time
	tasks    map[string]*task
	clients  []*dlock.Client
	sessions []*dlock.Session
}

func (r *run) steps(steps []map[string]any) {
	r.tasks = map[string]*task{}
	for number, step := range steps {
		if err := r.step(step); err != nil {
			text, _ := json.Marshal(step)
			r.t.Fatalf("step %d %s: %v", number+1, text, err)
		}
	}
}

func (r *run) close() {
	for _, task := range r.tasks {
		task.cancel()
	}
	if err := r.h.bringBack(); err != nil { // first: closing sessions needs a server
		r.t.Errorf("bringing the servers back: %v", err)
	}
	for _, s := range r.sessions {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.Close(ctx)
		cancel()
	}
	for _, c := range r.clients {
		c.Close()
	}
}

func str(step map[string]any, key string) string {
	s, _ := step[key].(string)
	return s
}

// duration reads "500ms", "10s", "5m" or a number of seconds; 0 when absent.
func duration(value any) time.Duration {
	switch v := value.(type) {
	case float64:
		return time.Duration(v * float64(time.Second))
	case string:
		d, err := time.ParseDuration(v)
		if err != nil {
			panic(fmt.Sprintf("not a duration: %q", v))
		}
		return d
	}
	return 0
}

func tokenOf(value any) int64 {
	switch v := value.(type) {
	case *dlock.Lock:
		return v.Token()
	case *dlock.Leadership:
		return v.Token()
	case *dlock.LeaderInfo:
		return v.FencingToken
	}
	panic(fmt.Sprintf("no token in %T", value))
}

func (r *run) step(step map[string]any) error {
	switch str(step, "do") {
	case "client":
		return r.client(step)
	case "session":
		c := r.names[str(step, "client")].(*dlock.Client)
		return r.outcomeOf(step, func(ctx context.Context) (any, error) {
			s, err := c.OpenSession(ctx, dlock.SessionOptions{Owner: str(step, "owner"),
				TTL: duration(step["ttl"]), LockDelay: duration(step["lock_delay"])})
			if err != nil {
				return nil, err
			}
			r.sessions = append(r.sessions, s)
			return s, nil
		}, nil)
	case "acquire":
		return r.acquire(step)
	case "campaign":
		s := r.names[str(step, "session")].(*dlock.Session)
		return r.outcomeOf(step, func(ctx context.Context) (any, error) {
			l, err := s.Campaign(ctx, str(step, "name"), str(step, "value"), duration(step["wait"]))
			if errors.Is(err, dlock.ErrHeld) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			return l, nil
		}, map[string]any{"granted": true})
	case "observe":
		c := r.names[str(step, "client")].(*dlock.Client)
		after := r.names[str(step, "after")].(*dlock.Leadership)
		token, value := after.Token(), after.Value()
		wait := duration(step["wait"])
		if wait == 0 {
			wait = 10 * time.Second
		}
		return r.outcomeOf(step, func(ctx context.Context) (any, error) {
			return nilable(c.Observe(ctx, str(step, "name"), token, value, wait))
		}, nil)
	case "leader":
		c := r.names[str(step, "client")].(*dlock.Client)
		return r.outcomeOf(step, func(ctx context.Context) (any, error) {
			return nilable(c.Leader(ctx, str(step, "name")))
		}, nil)
	case "proclaim":
		l := r.names[str(step, "leader")].(*dlock.Leadership)
		return r.outcomeOf(step, func(ctx context.Context) (any, error) {
			return nil, l.Proclaim(ctx, str(step, "value"))
		}, nil)
	case "resign":
		l := r.names[str(step, "leader")].(*dlock.Leadership)
		return r.outcomeOf(step, func(ctx context.Context) (any, error) { return nil, l.Resign(ctx) }, nil)
	case "release":
		l := r.lock(str(step, "lock"))
		return r.outcomeOf(step, func(ctx context.Context) (any, error) { return nil, l.Release(ctx) }, nil)
	case "revoke":
		c := r.names[str(step, "client")].(*dlock.Client)
		return r.outcomeOf(step, func(ctx context.Context) (any, error) {
			return nil, c.Revoke(ctx, str(step, "key"))
		}, nil)
	case "clear_delay":
		c := r.names[str(step, "client")].(*dlock.Client)
		return r.outcomeOf(step, func(ctx context.Context) (any, error) {
			return c.ClearDelay(ctx, str(step, "key"))
		}, nil)
	case "close":
		s := r.names[str(step, "session")].(*dlock.Session)
		return r.outcomeOf(step, func(ctx context.Context) (any, error) { return nil, s.Close(ctx) }, nil)
	case "await":
		task := r.tasks[str(step, "task")]
		within := duration(step["within"])
		select {
		case <-task.done:
		case <-time.After(within):
			return fmt.Errorf("%s still pending after %v", str(step, "task"), within)
		}
		var def map[string]any
		if do := str(task.step, "do"); do == "acquire" || do == "campaign" {
			def = map[string]any{"granted": true}
		}
		if err := r.expect(step, task.result, def); err != nil {
			return err
		}
		if task.result.value != nil {
			r.names[str(step, "task")] = task.result.value
		}
		return nil
	case "pending":
		task := r.tasks[str(step, "task")]
		select {
		case <-task.done:
			return fmt.Errorf("%s finished early: %v %v", str(step, "task"), task.result.value, task.result.err)
		case <-time.After(duration(step["for"])):
			return nil
		}
	case "cancel":
		r.tasks[str(step, "task")].cancel()
		return nil
	case "read":
		return r.read(step)
	case "semaphore":
		c := r.names[str(step, "client")].(*dlock.Client)
		info, err := c.Semaphore(context.Background(), str(step, "name"))
		if err != nil {
			return err
		}
		want := step["expect"].(map[string]any)
		if limit, ok := want["limit"].(float64); ok && info.Limit != int(limit) {
			return fmt.Errorf("limit %d", info.Limit)
		}
		if holders, ok := want["holders"].(float64); ok && len(info.Holders) != int(holders) {
			return fmt.Errorf("%d holders", len(info.Holders))
		}
		return nil
	case "hold":
		l := r.lock(str(step, "lock"))
		end := time.Now().Add(duration(step["for"]))
		for time.Now().Before(end) {
			select {
			case <-l.Lost():
				return fmt.Errorf("lost while held: %s", l.LostReason())
			default:
			}
			if !l.Valid() {
				return fmt.Errorf("not valid while held (deadline %v)", time.Until(l.Deadline()))
			}
			time.Sleep(50 * time.Millisecond)
		}
		return l.Check()
	case "lost":
		l := r.lock(str(step, "lock"))
		within := duration(step["within"])
		select {
		case <-l.Lost():
		case <-time.After(within):
			return fmt.Errorf("no lost signal within %v", within)
		}
		if l.Valid() {
			return errors.New("lost but still valid")
		}
		if err := l.Check(); !errors.Is(err, dlock.ErrLockLost) {
			return fmt.Errorf("Check() = %v, not lock_lost", err)
		}
		return nil
	case "deadline":
		name := str(step, "lock")
		trusted := r.lock(name).Deadline().Sub(r.started[name])
		low, high := duration(step["at_least"]), duration(step["at_most"])
		if trusted < low || trusted > high {
			return fmt.Errorf("trusted for %v, not in [%v, %v]", trusted, low, high)
		}
		return nil
	case "server":
		line := str(step, "command")
		if server, ok := step["server"]; ok {
			line += " " + fmt.Sprint(server)
		}
		return r.h.command(line)
	}
	return fmt.Errorf("unknown step %q", str(step, "do"))
}

// nilable turns a nil pointer into a nil interface (held, none).
func nilable[T any](value *T, err error) (any, error) {
	if value == nil {
		return nil, err
	}
	return value, err
}

func (r *run) lock(name string) *dlock.Lock {
	switch v := r.names[name].(type) {
	case *dlock.Lock:
		return v
	case *dlock.Leadership:
		return v.Lock
	}
	panic(fmt.Sprintf("%s is not a lock", name))
}

func (r *run) client(step map[string]any) error {
	servers := map[string][]string{"first": r.h.Servers[:1], "all": r.h.Servers,
		"auth": {r.h.AuthServer}, "tls": {r.h.TLSServer}}[str(step, "servers")]
	if servers == nil {
		servers = r.h.Servers[:1]
	}
	budget := 5 * time.Second
	if step["retry_budget"] != nil {
		budget = duration(step["retry_budget"])
	}
	config := dlock.Config{Servers: servers, Namespace: r.ns, RetryBudget: budget,
		RequestTimeout: 5 * time.Second, BackoffMax: 500 * time.Millisecond}
	variables := map[string]string{}
	if tls, ok := step["tls"].(map[string]any); ok {
		ca := r.h.TLS[tls["ca"].(string)]
		cert, key := "", ""
		if tls["client_cert"] == true {
			cert, key = r.h.TLS["client_cert"], r.h.TLS["client_key"]
		}
		if tls["source"] == "env" { // the CLI's variables, read when the client is made
			variables["DLOCK_CACERT"], variables["DLOCK_CERT"], variables["DLOCK_KEY"] = ca, cert, key
		} else {
			config.CAFile, config.CertFile, config.KeyFile = ca, cert, key
		}
	}
	if drift, ok := step["clock_drift"].(float64); ok {
		config.ClockDrift = drift
	}
	if str(step, "admin_token") == "admin" {
		config.AdminToken = r.h.AdminToken
	}
	if token := str(step, "token"); token != "" {
		if token == "bogus" {
			token = bogusToken
		} else {
			token = r.h.Tokens[token]
		}
		path := filepath.Join(r.t.TempDir(), "token")
		switch str(step, "token_source") {
		case "", "option":
			config.Token = token
		case "file":
			config.TokenFile = path
		case "env":
			variables["DLOCK_TOKEN"] = token
		case "env_file":
			variables["DLOCK_TOKEN_FILE"] = path
		}
		if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
			return err
		}
	}
	for name, value := range variables {
		os.Setenv(name, value)
	}
	c, err := dlock.New(config)
	for name := range variables {
		os.Unsetenv(name)
	}
	if err != nil {
		return err
	}
	r.clients = append(r.clients, c)
	r.names[str(step, "as")] = c
	return nil
}

func (r *run) acquire(step map[string]any) error {
	s := r.names[str(step, "session")].(*dlock.Session)
	options := dlock.LockOptions{TTL: duration(step["ttl"]), Wait: duration(step["wait"]),
		Mode: dlock.Mode(str(step, "mode")), NoAutoExtend: step["auto_extend"] == false,
		SessionBound: step["session_bound"] == true}
	if permits, ok := step["permits"].(float64); ok {
		options.Permits = int(permits)
	}
	if as := str(step, "as"); as != "" {
		r.started[as] = time.Now()
	}
	return r.outcomeOf(step, func(ctx context.Context) (any, error) {
		if str(step, "form") == "with" {
			return nilable(s.Acquire(ctx, str(step, "key"), options))
		}
		l, granted, err := s.TryAcquire(ctx, str(step, "key"), options)
		if !granted {
			return nil, err
		}
		return l, nil
	}, map[string]any{"granted": true})
}

func (r *run) read(step map[string]any) error {
	c := r.names[str(step, "client")].(*dlock.Client)
	want, _ := step["expect"].(map[string]any)
	end := time.Now().Add(duration(step["within"]))
	for {
		holders, err := c.Holders(context.Background(), str(step, "key"))
		problem := ""
		if err != nil {
			problem = err.Error()
		} else {
			var tokens []int64
			for _, h := range holders {
				tokens = append(tokens, h.FencingToken)
			}
			if want["free"] == true && len(holders) > 0 {
				problem = fmt.Sprintf("held by tokens %v", tokens)
			}
			if n, ok := want["holders"].(float64); ok && len(holders) != int(n) {
				problem = fmt.Sprintf("%d holders", len(holders))
			}
			if name, ok := want["token_of"].(string); ok {
				token := tokenOf(r.names[name])
				found := false
				for _, t := range tokens {
					found = found || t == token
				}
				if !found {
					problem = fmt.Sprintf("tokens %v, not %d", tokens, token)
				}
			}
		}
		if problem == "" {
			return nil
		}
		if !time.Now().Before(end) {
			return errors.New(problem)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// outcomeOf runs action now (or in the background) and checks or records its outcome.
func (r *run) outcomeOf(step map[string]any, action func(context.Context) (any, error), def map[string]any) error {
	if step["background"] == true {
		ctx, cancel := context.WithCancel(context.Background())
		t := &task{step: step, cancel: cancel, done: make(chan struct{})}
		r.tasks[str(step, "as")] = t
		go func() {
			defer close(t.done)
			started := time.Now()
			value, err := action(ctx)
			t.result = outcome{value, err, time.Since(started)}
		}()
		return nil
	}
	started := time.Now()
	value, err := action(context.Background())
	result := outcome{value, err, time.Since(started)}
	if err := r.expect(step, result, def); err != nil {
		return err
	}
	if as := str(step, "as"); as != "" && value != nil {
		r.names[as] = value
	}
	return nil
}

func (r *run) expect(step map[string]any, o outcome, def map[string]any) error {
	want, ok := step["expect"].(map[string]any)
	if !ok {
		want = def
	}
	if kind, ok := want["error"].(string); ok {
		if !errors.Is(o.err, kinds[kind]) {
			return fmt.Errorf("expected error %s, got %v (value %v)", kind, o.err, o.value)
		}
		var typed *dlock.Error
		errors.As(o.err, &typed)
		if field, ok := want["field"].(string); ok && typed.Field != field {
			return fmt.Errorf("field %q", typed.Field)
		}
		if want["delayed"] == true && typed.DelayedUntil == "" {
			return fmt.Errorf("no lock-delay named: %v", o.err)
		}
		if excludes, ok := want["message_excludes"].([]any); ok {
			for _, text := range excludes {
				if strings.Contains(o.err.Error(), text.(string)) {
					return fmt.Errorf("the message names %q: %v", text, o.err)
				}
			}
		}
	} else if o.err != nil {
		return fmt.Errorf("expected %v, got error %v", want, o.err)
	}
	if want["granted"] == true && o.value == nil {
		return errors.New("expected a grant, got held")
	}
	if (want["held"] == true || want["none"] == true) && o.value != nil {
		return fmt.Errorf("expected none/held, got %v", o.value)
	}
	if least, ok := want["after_at_least"]; ok && o.elapsed < duration(least) {
		return fmt.Errorf("answered after %v < %v", o.elapsed, duration(least))
	}
	if names, ok := want["token_greater_than"].([]any); ok {
		for _, name := range names {
			if mine, theirs := tokenOf(o.value), tokenOf(r.names[name.(string)]); mine <= theirs {
				return fmt.Errorf("token %d not greater than %s's %d", mine, name, theirs)
			}
		}
	}
	if name, ok := want["token_of"].(string); ok {
		if mine, theirs := tokenOf(o.value), tokenOf(r.names[name]); mine != theirs {
			return fmt.Errorf("token %d, not %s's %d", mine, name, theirs)
		}
	}
	if cleared, ok := want["cleared"]; ok && o.value != cleared {
		return fmt.Errorf("cleared %v", o.value)
	}
	if value, ok := want["value"].(string); ok {
		got := ""
		switch v := o.value.(type) {
		case *dlock.LeaderInfo:
			got = v.Value()
		case *dlock.Leadership:
			got = v.Value()
		}
		if got != value {
			return fmt.Errorf("value %q, not %q", got, value)
		}
	}
	return nil
}
