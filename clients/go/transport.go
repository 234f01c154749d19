package dlock

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// How an exchange failed without an answer.
type failureKind int

const (
	notSent   failureKind = iota // could not connect: the request never left
	maybeSent                    // lost after the request was written: the outcome is unknown
	tlsFailed                    // the handshake was refused: configuration, not an outage
)

type transportError struct {
	kind    failureKind
	message string
}

func (e *transportError) Error() string { return e.message }

// classify tells a TLS failure and a refused connection from a lost one.
func classify(err error) failureKind {
	var verification *tls.CertificateVerificationError
	var authority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalidCert x509.CertificateInvalidError
	var header tls.RecordHeaderError
	if errors.As(err, &verification) || errors.As(err, &authority) || errors.As(err, &hostname) ||
		errors.As(err, &invalidCert) || errors.As(err, &header) {
		return tlsFailed
	}
	var op *net.OpError
	if errors.As(err, &op) {
		switch op.Op {
		case "remote error": // a TLS alert: under TLS 1.3 a refused client certificate
			return tlsFailed
		case "dial":
			return notSent
		}
	}
	if strings.Contains(err.Error(), "tls: ") {
		return tlsFailed
	}
	return maybeSent
}

// exchange is one answer and the time its request was sent.
type exchange struct {
	status int
	body   []byte
	sentAt time.Time
}

func (x *exchange) decode(what string, into any) error {
	if err := json.Unmarshal(x.body, into); err != nil {
		return &Error{Code: CodeInternal, Message: what + ": the server's answer is not the JSON expected", Status: x.status}
	}
	return nil
}

// call is one call's bounds: the deadline of it and its retries, and how it may be repeated.
type call struct {
	deadline   time.Time
	repeatSafe bool          // may be sent again after an unknown outcome
	slack      time.Duration // how long the server may legitimately hold the request (a wait)
	admin      bool          // authorised with the admin token
	// before, when set, gives each attempt's body and slack (a waiting acquire asks only for
	// what is left of its wait).
	before func() ([]byte, time.Duration)
}

func (c *Client) newCall(budget time.Duration) *call {
	return &call{deadline: time.Now().Add(budget), repeatSafe: true}
}

var transient = map[int]bool{429: true, 502: true, 503: true, 504: true}

// send sends the request, retrying transient failures (unreachable, 429/502/503/504) with
// back-off until the call's deadline; it returns the first other answer, whatever its status.
// An unreachable server, a 502/503/504 or a lost connection hands the call to the next server
// at once (until each was tried; then back-off). A lost connection ends a call that is not
// repeat-safe with CodeUnknownOutcome at once. The context's end is CodeCancelled.
func (c *Client) send(ctx context.Context, method, target string, body any, what string, cl *call) (*exchange, error) {
	var data []byte
	if body != nil {
		data, _ = json.Marshal(body)
	}
	started := time.Now()
	var failure error
	failedInRound, backoffRound, attempts := 0, 0, 0
	count := len(c.servers)
	for {
		attempts++
		if err := ctx.Err(); err != nil {
			return nil, cancelled(what, err)
		}
		slack := cl.slack
		if cl.before != nil {
			data, slack = cl.before()
		}
		sentAt := time.Now()
		timeout := min(max(time.Until(cl.deadline), time.Millisecond), c.requestTimeout+slack)
		c.mu.Lock()
		server := c.current % count
		c.mu.Unlock()
		answer, retryAfter, err := c.exchange(ctx, c.servers[server], method, target, data, cl.admin, timeout)
		moveOn := true
		if err != nil {
			var terr *transportError
			if !errors.As(err, &terr) {
				return nil, err // cancelled
			}
			failure = terr
			if (terr.kind == maybeSent && !cl.repeatSafe) || (terr.kind == tlsFailed && count == 1) {
				return nil, c.giveUp(failure, what, attempts, started)
			}
		} else {
			answer.sentAt = sentAt
			if !transient[answer.status] {
				return answer, nil
			}
			failure = errorFromResponse(answer.status, answer.body, what, "")
			moveOn = answer.status != 429 // 429 is this server's own limit: stay
		}
		now := time.Now()
		if moveOn && count > 1 {
			c.mu.Lock()
			if c.current%count == server { // only the first caller moves on
				c.current = (server + 1) % count
			}
			c.mu.Unlock()
			failedInRound++
			if failedInRound < count {
				if !now.Before(cl.deadline) {
					return nil, c.giveUp(failure, what, attempts, started)
				}
				continue
			}
			failedInRound = 0
			var terr *transportError
			if errors.As(failure, &terr) && terr.kind == tlsFailed {
				return nil, c.giveUp(failure, what, attempts, started)
			}
		}
		c.mu.Lock()
		delay := backoffDelay(c.backoffInitial, c.backoffMax, backoffRound, c.random.Float64())
		c.mu.Unlock()
		backoffRound++
		delay = max(delay, retryAfter)
		if !now.Add(delay).Before(cl.deadline) {
			return nil, c.giveUp(failure, what, attempts, started)
		}
		if err := sleep(ctx, delay); err != nil {
			return nil, cancelled(what, err)
		}
	}
}

// exchange is one request to one server, bounded by timeout.
func (c *Client) exchange(ctx context.Context, server, method, target string, data []byte, admin bool, timeout time.Duration) (*exchange, time.Duration, error) {
	attempt, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var reader io.Reader
	if data != nil {
		reader = bytes.NewReader(data)
	}
	request, err := http.NewRequestWithContext(attempt, method, server+target, reader)
	if err != nil {
		return nil, 0, invalid("server", "%s %s: %v", method, target, err)
	}
	if data != nil {
		request.Header.Set("Content-Type", "application/json")
	}
	bearer := c.token
	if admin && c.adminToken != "" {
		bearer = c.adminToken
	}
	if bearer != "" {
		request.Header.Set("Authorization", "Bearer "+bearer)
	}
	response, err := c.http.Do(request)
	if err == nil {
		var body []byte
		body, err = io.ReadAll(io.LimitReader(response.Body, 4<<20))
		response.Body.Close()
		if err == nil {
			var retryAfter time.Duration
			if seconds, perr := strconv.Atoi(strings.TrimSpace(response.Header.Get("Retry-After"))); perr == nil && seconds > 0 {
				retryAfter = time.Duration(seconds) * time.Second
			}
			return &exchange{status: response.StatusCode, body: body}, retryAfter, nil
		}
	}
	if ctx.Err() != nil {
		return nil, 0, cancelled(method+" "+target, ctx.Err())
	}
	if attempt.Err() != nil {
		return nil, 0, &transportError{maybeSent, fmt.Sprintf("%s: no answer within %v", server, timeout)}
	}
	return nil, 0, &transportError{classify(err), fmt.Sprintf("%s: %v", server, unwrapURL(err))}
}

func unwrapURL(err error) error {
	if inner := errors.Unwrap(err); inner != nil {
		return inner
	}
	return err
}

func (c *Client) giveUp(failure error, what string, attempts int, started time.Time) error {
	plural := "s"
	if attempts == 1 {
		plural = ""
	}
	suffix := fmt.Sprintf(" (gave up after %d attempt%s in %.1f s)", attempts, plural, time.Since(started).Seconds())
	var typed *Error
	if errors.As(failure, &typed) {
		copied := *typed
		copied.Message += suffix
		return &copied
	}
	message := fmt.Sprintf("%s: %v%s", what, failure, suffix)
	var terr *transportError
	if errors.As(failure, &terr) {
		switch terr.kind {
		case tlsFailed:
			return &Error{Code: CodeTLS, Message: message, Field: "tls"}
		case maybeSent:
			return &Error{Code: CodeUnknownOutcome, Message: message}
		}
	}
	return &Error{Code: CodeUnavailable, Message: message}
}

func cancelled(what string, cause error) *Error {
	return &Error{Code: CodeCancelled, Message: what + ": " + cause.Error(), cause: cause}
}

func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// expect is the typed error of an answer other than status.
func expect(x *exchange, status int, what, key string) error {
	if x.status != status {
		return errorFromResponse(x.status, x.body, what, key)
	}
	return nil
}
