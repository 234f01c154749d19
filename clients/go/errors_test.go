package dlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestEveryC3CodeMapsToItsKind(t *testing.T) {
	for _, c := range []struct {
		status int
		code   string
		want   *Error
	}{
		{400, "invalid_argument", ErrInvalidArgument},
		{413, "payload_too_large", ErrInvalidArgument},
		{404, "not_found", ErrInvalidArgument},
		{405, "method_not_allowed", ErrInvalidArgument},
		{401, "unauthenticated", ErrUnauthenticated},
		{401, "unauthorized", ErrUnauthenticated},
		{403, "permission_denied", ErrPermissionDenied},
		{403, "forbidden", ErrPermissionDenied},
		{404, "session_not_found", ErrSessionNotFound},
		{409, "lock_lost", ErrLockLost},
		{404, "lock_not_found", ErrLockLost},
		{409, "held", ErrHeld},
		{409, "conflict", ErrConflict},
		{429, "too_many_requests", ErrTooManyRequests},
		{503, "unavailable", ErrUnavailable},
		{503, "not_leader", ErrNotLeader},
		{500, "internal", ErrInternal},
		{502, "", ErrUnavailable}, // a proxy's page
		{504, "", ErrUnavailable},
		{418, "", ErrInvalidArgument},
		{500, "", ErrInternal},
	} {
		body := fmt.Sprintf(`{"error":{"code":%q,"message":"m","field":"f"}}`, c.code)
		if c.code == "" {
			body = "<html>bad gateway</html>"
		}
		err := errorFromResponse(c.status, []byte(body), "acquire k", "k")
		if !errors.Is(err, c.want) {
			t.Errorf("%d %q: %v is not %s", c.status, c.code, err, c.want.Code)
		}
		if c.want != ErrHeld && errors.Is(err, ErrHeld) {
			t.Errorf("%d %q: %v is held", c.status, c.code, err)
		}
	}
	if !errors.Is(&Error{Code: CodeNotLeader}, ErrUnavailable) || !errors.Is(&Error{Code: CodeUnknownOutcome}, ErrUnavailable) {
		t.Error("not_leader and unknown_outcome are kinds of unavailable")
	}
	if errors.Is(&Error{Code: CodeUnavailable}, ErrNotLeader) || errors.Is(&Error{Code: CodeTLS}, ErrUnavailable) {
		t.Error("unavailable is not not_leader; a TLS failure is never unavailable")
	}
	held := errorFromResponse(409, []byte(`{"error":{"code":"held","message":"held by alice","delayed_until":"2026-12-06T10:00:00Z"}}`), "acquire k", "k")
	if strings.Contains(held.Error(), "alice") || held.DelayedUntil == "" {
		t.Errorf("held: %v (delayed until %q)", held, held.DelayedUntil)
	}
	cancelledErr := cancelled("acquire k", context.Canceled)
	if !errors.Is(cancelledErr, ErrCancelled) || !errors.Is(cancelledErr, context.Canceled) {
		t.Error("a cancelled error is ErrCancelled and context.Canceled")
	}
}

// fake answers the session route with a session and every other request with respond.
func fake(t *testing.T, respond func(w http.ResponseWriter, r *http.Request)) *httptest.Server {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/sessions" {
			w.WriteHeader(201)
			fmt.Fprint(w, `{"session_id":"s1","owner":"o","ttl_ms":30000}`)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/keepalive") {
			fmt.Fprint(w, `{"ttl_ms":30000}`)
			return
		}
		respond(w, r)
	}))
	t.Cleanup(server.Close)
	return server
}

func quickClient(t *testing.T, servers ...string) *Client {
	t.Setenv("DLOCK_TOKEN", "")
	t.Setenv("DLOCK_TOKEN_FILE", "")
	c, err := New(Config{Servers: servers, RetryBudget: 400 * time.Millisecond,
		BackoffInitial: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func openSession(t *testing.T, c *Client) *Session {
	s, err := c.OpenSession(context.Background(), SessionOptions{Owner: "o"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stop(); <-s.done })
	return s
}

// answering: a session on a fake whose every lock request is answered status with a C3 error
// of code, and the count of those requests.
func answering(t *testing.T, status int, code string) (*Session, *atomic.Int32) {
	var count atomic.Int32
	server := fake(t, func(w http.ResponseWriter, r *http.Request) {
		count.Add(1)
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"code":%q,"message":"m"}}`, code)
	})
	return openSession(t, quickClient(t, server.URL)), &count
}

func TestOutageIsUnavailableNeverHeld(t *testing.T) {
	s, acquires := answering(t, 503, "unavailable")
	l, granted, err := s.TryAcquire(context.Background(), "k", LockOptions{TTL: time.Second})
	if granted || l != nil || !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrHeld) {
		t.Fatalf("TryAcquire during an outage: %v %v %v", l, granted, err)
	}
	if _, err := s.Acquire(context.Background(), "k", LockOptions{Wait: 200 * time.Millisecond}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Acquire during an outage: %v", err)
	}
	if acquires.Load() < 4 {
		t.Fatalf("%d attempts: an outage is retried", acquires.Load())
	}
}

func TestHeldIsAValueFromTryAcquireAndAnErrorFromAcquire(t *testing.T) {
	s, _ := answering(t, 409, "held")
	l, granted, err := s.TryAcquire(context.Background(), "k", LockOptions{})
	if l != nil || granted || err != nil {
		t.Fatalf("TryAcquire of a held key: %v %v %v", l, granted, err)
	}
	if _, err := s.Acquire(context.Background(), "k", LockOptions{}); !errors.Is(err, ErrHeld) {
		t.Fatalf("Acquire of a held key: %v", err)
	}
}

func TestTooManyRequestsIsRetriedThenTyped(t *testing.T) {
	s, attempts := answering(t, 429, "too_many_requests")
	_, _, err := s.TryAcquire(context.Background(), "k", LockOptions{})
	if !errors.Is(err, ErrTooManyRequests) || attempts.Load() < 2 {
		t.Fatalf("429: %v after %d attempts", err, attempts.Load())
	}
}

func TestUnauthenticatedIsNotRetried(t *testing.T) {
	var attempts atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		w.WriteHeader(401)
		fmt.Fprint(w, `{"error":{"code":"unauthenticated","message":"no token"}}`)
	}))
	defer server.Close()
	_, err := quickClient(t, server.URL).OpenSession(context.Background(), SessionOptions{})
	if !errors.Is(err, ErrUnauthenticated) || attempts.Load() != 1 {
		t.Fatalf("401: %v after %d attempts", err, attempts.Load())
	}
}

func TestFailoverMovesToTheNextServer(t *testing.T) {
	down := fake(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
	up := fake(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"key":"k","fencing_token":7,"ttl_ms":1000,"lease":"ttl","mode":"exclusive"}`)
	})
	c := quickClient(t, down.URL, up.URL)
	s := openSession(t, c)
	l, err := s.Acquire(context.Background(), "k", LockOptions{TTL: time.Second, NoAutoExtend: true})
	if err != nil || l.Token() != 7 {
		t.Fatalf("acquire with the first server down: %v %v", l, err)
	}
	l.stopBackground()
}

func TestOpeningASessionIsNotRepeatedAfterAnUnknownOutcome(t *testing.T) {
	var attempts atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close() // read, then lost: maybe applied
	}))
	defer server.Close()
	_, err := quickClient(t, server.URL).OpenSession(context.Background(), SessionOptions{})
	if !errors.Is(err, ErrUnknownOutcome) || attempts.Load() != 1 {
		t.Fatalf("lost connection: %v after %d attempts", err, attempts.Load())
	}
}

func TestUnreachableIsUnavailable(t *testing.T) {
	server := httptest.NewServer(http.NotFoundHandler())
	url := server.URL
	server.Close()
	_, err := quickClient(t, url).OpenSession(context.Background(), SessionOptions{})
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("nobody listening: %v", err)
	}
}

func TestCancellingAWaitEndsIt(t *testing.T) {
	server := fake(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // then the server notices the client closing the connection
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	s := openSession(t, quickClient(t, server.URL))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	started := time.Now()
	_, err := s.Acquire(ctx, "k", LockOptions{Wait: 30 * time.Second})
	if !errors.Is(err, ErrCancelled) || !errors.Is(err, context.DeadlineExceeded) || time.Since(started) > 2*time.Second {
		t.Fatalf("cancelled wait: %v after %v", err, time.Since(started))
	}
}

func TestTokensFromOptionFileAndEnvironment(t *testing.T) {
	token := "dlk_" + strings.Repeat("B", 43)
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DLOCK_TOKEN", "")
	t.Setenv("DLOCK_TOKEN_FILE", path)
	if got, err := resolveToken("", ""); got != token || err != nil {
		t.Errorf("DLOCK_TOKEN_FILE: %q %v", got, err)
	}
	t.Setenv("DLOCK_TOKEN", "dlk_env")
	if got, _ := resolveToken("", ""); got != "dlk_env" {
		t.Errorf("DLOCK_TOKEN before DLOCK_TOKEN_FILE: %q", got)
	}
	if got, _ := resolveToken("", path); got != token {
		t.Errorf("the option's file before the environment: %q", got)
	}
	if got, _ := resolveToken("dlk_option", path); got != "dlk_option" {
		t.Errorf("the option first: %q", got)
	}
	_, err := resolveToken("not a token", "")
	if !errors.Is(err, ErrInvalidArgument) || strings.Contains(err.Error(), "not a token") {
		t.Errorf("a malformed token: %v (never shown)", err)
	}
}
