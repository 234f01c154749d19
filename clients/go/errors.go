package dlock

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Code is the kind of an [Error]: a C3 wire code where one exists (docs/contracts/C3-http.md).
type Code string

// The error kinds. "Held" is a decision, not a failure: [Session.TryAcquire] returns it as a
// value; the forms that have no value to return ([Session.Acquire], [Client.Lock],
// [Session.Campaign]) return an [Error] of code CodeHeld. A server or backend that cannot
// answer is always CodeUnavailable (or one of its two special cases), never CodeHeld.
const (
	CodeInvalidArgument  Code = "invalid_argument"  // 400 (and 404/405/413 routes): Field names the input
	CodeTLS              Code = "tls"               // the TLS handshake failed: configuration, not an outage
	CodeUnauthenticated  Code = "unauthenticated"   // 401: the bearer token is missing or unknown
	CodePermissionDenied Code = "permission_denied" // 403: the principal lacks the role
	CodeSessionNotFound  Code = "session_not_found" // 404: the session expired or was closed
	CodeLockLost         Code = "lock_lost"         // 409 (or 404 lock_not_found), or the client deadline passed
	CodeHeld             Code = "held"              // 409: not granted within the wait
	CodeConflict         Code = "conflict"          // 409: a semaphore's limit differs from its holders'
	CodeTooManyRequests  Code = "too_many_requests" // 429 after retries
	CodeUnavailable      Code = "unavailable"       // 502/503/504 or no server reachable, after retries
	CodeNotLeader        Code = "not_leader"        // 503 not_leader (etcd without a leader), after retries
	CodeUnknownOutcome   Code = "unknown_outcome"   // the connection was lost after the request was sent
	CodeCancelled        Code = "cancelled"         // the caller's context ended the call
	CodeInternal         Code = "internal"          // 500, or an answer this client cannot read
)

// Error is every error this package returns. Compare with errors.Is against the sentinels
// (ErrHeld, ErrLockLost, …): errors.Is(err, ErrUnavailable) also holds for CodeNotLeader and
// CodeUnknownOutcome, errors.Is(err, ErrInvalidArgument) for CodeTLS, and a CodeCancelled error
// unwraps to its context's error (context.Canceled or context.DeadlineExceeded).
type Error struct {
	Code    Code
	Message string
	// Field names the bad input (CodeInvalidArgument, CodeConflict: "limit").
	Field string
	// Status is the HTTP status when a server answered, else 0.
	Status int
	// DelayedUntil (CodeHeld) is set, in the backend's time (RFC 3339), when a lock-delay keeps
	// the name ungranted.
	DelayedUntil string
	cause        error
}

// The sentinels of errors.Is, one per Code.
var (
	ErrInvalidArgument  = &Error{Code: CodeInvalidArgument}
	ErrTLS              = &Error{Code: CodeTLS}
	ErrUnauthenticated  = &Error{Code: CodeUnauthenticated}
	ErrPermissionDenied = &Error{Code: CodePermissionDenied}
	ErrSessionNotFound  = &Error{Code: CodeSessionNotFound}
	ErrLockLost         = &Error{Code: CodeLockLost}
	ErrHeld             = &Error{Code: CodeHeld}
	ErrConflict         = &Error{Code: CodeConflict}
	ErrTooManyRequests  = &Error{Code: CodeTooManyRequests}
	ErrUnavailable      = &Error{Code: CodeUnavailable}
	ErrNotLeader        = &Error{Code: CodeNotLeader}
	ErrUnknownOutcome   = &Error{Code: CodeUnknownOutcome}
	ErrCancelled        = &Error{Code: CodeCancelled}
	ErrInternal         = &Error{Code: CodeInternal}
)

func (e *Error) Error() string {
	if e.Message == "" {
		return "dlock: " + string(e.Code)
	}
	return "dlock: " + e.Message
}

// Is reports whether target is the sentinel of e's code or of a kind e is a special case of.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	switch {
	case t.Code == e.Code:
		return true
	case t.Code == CodeUnavailable:
		return e.Code == CodeNotLeader || e.Code == CodeUnknownOutcome
	case t.Code == CodeInvalidArgument:
		return e.Code == CodeTLS
	}
	return false
}

// Unwrap returns the cause: the context's error of a CodeCancelled error.
func (e *Error) Unwrap() error { return e.cause }

// Retryable reports whether the same call may succeed later (an outage, a server limit).
func (e *Error) Retryable() bool {
	return errors.Is(e, ErrUnavailable) || e.Code == CodeTooManyRequests
}

// The C3 error codes and the kind each maps to. "held" is answered as a decision where it is one.
var codeKinds = map[string]Code{
	"invalid_argument":   CodeInvalidArgument,
	"payload_too_large":  CodeInvalidArgument,
	"not_found":          CodeInvalidArgument,
	"method_not_allowed": CodeInvalidArgument,
	"unauthenticated":    CodeUnauthenticated,
	"unauthorized":       CodeUnauthenticated,
	"permission_denied":  CodePermissionDenied,
	"forbidden":          CodePermissionDenied,
	"session_not_found":  CodeSessionNotFound,
	"lock_lost":          CodeLockLost,
	"lock_not_found":     CodeLockLost,
	"held":               CodeHeld,
	"conflict":           CodeConflict,
	"too_many_requests":  CodeTooManyRequests,
	"unavailable":        CodeUnavailable,
	"not_leader":         CodeNotLeader,
	"internal":           CodeInternal,
}

var statusKinds = map[int]Code{
	400: CodeInvalidArgument,
	401: CodeUnauthenticated,
	403: CodePermissionDenied,
	413: CodeInvalidArgument,
	429: CodeTooManyRequests,
	502: CodeUnavailable,
	503: CodeUnavailable,
	504: CodeUnavailable,
}

// wireError is the error object of a C3 error body.
type wireError struct {
	Code         string `json:"code"`
	Message      string `json:"message"`
	Field        string `json:"field"`
	DelayedUntil string `json:"delayed_until"`
}

func parseErrorBody(body []byte) wireError {
	var envelope struct {
		Error wireError `json:"error"`
	}
	_ = json.Unmarshal(body, &envelope) // not a C3 error body: empty
	return envelope.Error
}

// errorFromResponse is the typed error of an answer that is not the route's success. what names
// the call ("acquire payouts/batch-17"), key the key a held error names.
func errorFromResponse(status int, body []byte, what, key string) *Error {
	wire := parseErrorBody(body)
	message := wire.Message
	if message == "" {
		// A hint of what answered (a proxy, a wrong port) without flooding the message.
		text := string(body)
		if len(text) > 200 {
			text = text[:200]
		}
		message = fmt.Sprintf("HTTP %d", status)
		if text = strings.TrimSpace(text); text != "" {
			message += ": " + text
		}
	}
	if wire.Code == "held" {
		return heldError(key, what, 0, wire.DelayedUntil)
	}
	code, ok := codeKinds[wire.Code]
	if !ok {
		code, ok = statusKinds[status]
	}
	if !ok {
		code = CodeInternal
		if status >= 400 && status < 500 {
			code = CodeInvalidArgument
		}
	}
	if code == CodeUnauthenticated {
		message += " (a bearer token is missing or unknown: see DLOCK_TOKEN)"
	}
	field := wire.Field
	if (code == CodeInvalidArgument || code == CodeConflict) && field == "" {
		field = "request"
		if status == 413 {
			field = "body"
		}
	}
	return &Error{Code: code, Message: what + ": " + message, Field: field, Status: status}
}

// heldError names the key, never a holder (the client does not know one).
func heldError(key, what string, waited float64, delayedUntil string) *Error {
	if key == "" {
		key = what
	}
	suffix := ""
	if waited > 0 {
		suffix = fmt.Sprintf(" after waiting %g s", waited)
	}
	message := key + " is held by another session" + suffix
	if delayedUntil != "" {
		message = key + " is kept ungranted by a lock-delay until " + delayedUntil + suffix
	}
	return &Error{Code: CodeHeld, Message: message, Status: 409, DelayedUntil: delayedUntil}
}

func invalid(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf(format, args...), Field: field}
}
