package dlock

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"time"
)

// SessionOptions of [Client.OpenSession].
type SessionOptions struct {
	// Owner shown by reads; empty: DLOCK_OWNER, else <user>@<hostname>.
	Owner string
	// TTL of the session; 0: the server's default (30 s).
	TTL time.Duration
	// LockDelay: when a grant of this session ends without a release (expired, revoked), its
	// name is granted to nobody for this long (C3 "Lock-delay"; 0: none).
	LockDelay time.Duration
}

// Mode of a lock.
type Mode string

// The modes of [LockOptions.Mode].
const (
	Exclusive Mode = "exclusive"
	Shared    Mode = "shared" // a read lock: readers share the key, a writer waits for them all
)

// LockOptions of an acquire.
type LockOptions struct {
	// TTL of the lock's lease; 0: the server's default (30 s). Not with SessionBound.
	TTL time.Duration
	// Wait for the key this long when it is held (0: answer at once). The context also ends
	// the wait (CodeCancelled; the server drops the waiter at once).
	Wait time.Duration
	// Mode: Exclusive (the default) or Shared.
	Mode Mode
	// Permits N > 0: one of N permits of the semaphore named by the key.
	Permits int
	// SessionBound: the lock lives exactly as long as its session (no TTL of its own).
	SessionBound bool
	// NoAutoExtend: do not extend the lock every TTL/3 in the background.
	NoAutoExtend bool
	// Namespace of the key; empty: the client's.
	Namespace string
	// Session (Client.Lock only): the options of the session opened for the lock.
	Session SessionOptions
}

// lossFlag: the first loss wins, records its reason and closes the channel.
type lossFlag struct {
	once   sync.Once
	ch     chan struct{}
	mu     sync.Mutex
	reason string
}

func newLossFlag() lossFlag { return lossFlag{ch: make(chan struct{})} }

func (f *lossFlag) mark(reason string) (first bool) {
	f.once.Do(func() {
		f.mu.Lock()
		f.reason = reason
		f.mu.Unlock()
		close(f.ch)
		first = true
	})
	return first
}

func (f *lossFlag) lost() bool {
	select {
	case <-f.ch:
		return true
	default:
		return false
	}
}

func (f *lossFlag) why() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reason
}

// DefaultOwner is DLOCK_OWNER, else <user>@<hostname>: the owner reads show for this process.
func DefaultOwner() string {
	if owner := os.Getenv("DLOCK_OWNER"); owner != "" {
		return owner
	}
	user := os.Getenv("USER")
	if user == "" {
		user = "dlock"
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		return user + "@" + host
	}
	return user
}

// Session is a dlockd session kept alive by a goroutine every TTL/3. Lost is closed once the
// server no longer has the session or its deadline passed without a successful keepalive;
// every lock of the session is lost with it. Close it when done.
type Session struct {
	client    *Client
	id        string
	owner     string
	ttl       time.Duration
	lockDelay time.Duration
	loss      lossFlag

	mu       sync.Mutex
	deadline time.Time
	locks    map[*Lock]struct{}
	closed   bool
	gone     bool // the server said it does not exist: nothing to close

	stop context.CancelFunc
	done chan struct{}
}

// OpenSession opens a session and starts its keep-alive. The context bounds the opening only.
func (c *Client) OpenSession(ctx context.Context, options SessionOptions) (*Session, error) {
	owner := options.Owner
	if owner == "" {
		owner = DefaultOwner()
	}
	answer, sentAt, err := c.openSession(ctx, owner, options.TTL, options.LockDelay)
	if err != nil {
		return nil, err
	}
	if answer.Owner != "" {
		owner = answer.Owner
	}
	s := &Session{
		client:    c,
		id:        answer.SessionID,
		owner:     owner,
		ttl:       TrustedTTL(options.TTL, time.Duration(answer.TTLMs)*time.Millisecond),
		lockDelay: time.Duration(answer.LockDelayMs) * time.Millisecond,
		loss:      newLossFlag(),
		locks:     map[*Lock]struct{}{},
		done:      make(chan struct{}),
	}
	s.deadline = LeaseDeadline(sentAt, s.ttl, c.clockDrift)
	background, stop := context.WithCancel(context.Background())
	s.stop = stop
	go s.keepaliveLoop(background, sentAt)
	return s, nil
}

// ID is the session's ID.
func (s *Session) ID() string { return s.id }

// Owner is the owner the server recorded.
func (s *Session) Owner() string { return s.owner }

// TTL is the session's trusted TTL: min(asked, answered).
func (s *Session) TTL() time.Duration { return s.ttl }

// LockDelay is the lock-delay the server granted (0 from a dlockd without it).
func (s *Session) LockDelay() time.Duration { return s.lockDelay }

// Lost is closed once the session is known lost.
func (s *Session) Lost() <-chan struct{} { return s.loss.ch }

// LostReason says why the session was lost ("" while it is not).
func (s *Session) LostReason() string { return s.loss.why() }

// Deadline is the time until which the session is trusted; the zero Time once it is lost.
func (s *Session) Deadline() time.Time {
	if s.loss.lost() {
		return time.Time{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

func (s *Session) markLost(reason string) {
	if !s.loss.mark(reason) {
		return
	}
	s.mu.Lock()
	locks := s.grants()
	s.mu.Unlock()
	for _, l := range locks {
		l.loss.mark("session lost: " + reason) // a lock dies with its session
	}
}

// grants: the session's live grants (s.mu held).
func (s *Session) grants() []*Lock {
	locks := make([]*Lock, 0, len(s.locks))
	for l := range s.locks {
		locks = append(locks, l)
	}
	return locks
}

func (s *Session) keepaliveLoop(ctx context.Context, sentAt time.Time) {
	defer close(s.done)
	c := s.client
	next := sentAt.Add(s.ttl / 3)
	for {
		if sleep(ctx, time.Until(next)) != nil {
			return
		}
		s.mu.Lock()
		deadline := s.deadline
		s.mu.Unlock()
		answered, sent, err := c.keepalive(ctx, s.id, &call{deadline: deadline, repeatSafe: true})
		switch {
		case err == nil:
			// A keepalive renews for the session's TTL: never trust more than it opened with.
			ttl := TrustedTTL(s.ttl, answered)
			s.mu.Lock()
			s.deadline = LeaseDeadline(sent, ttl, c.clockDrift)
			s.mu.Unlock()
			next = sent.Add(ttl / 3)
		case errors.Is(err, ErrSessionNotFound):
			s.mu.Lock()
			s.gone = true
			s.mu.Unlock()
			s.markLost("session expired on the server: " + err.Error())
			return
		case ctx.Err() != nil:
			return
		case !time.Now().Before(deadline):
			s.markLost("no successful keepalive within the session TTL: " + err.Error())
			return
		default:
			log.Printf("dlock: keepalive of session %s failed, retrying: %v", s.id, err)
			next = minTime(deadline, time.Now().Add(c.backoffInitial))
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Close stops the keep-alive and closes the session on the server, releasing its locks.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	locks := s.grants()
	s.mu.Unlock()
	s.stop()
	<-s.done
	for _, l := range locks {
		l.stopBackground()
		l.loss.mark("its session was closed")
	}
	s.mu.Lock()
	gone := s.gone
	s.mu.Unlock()
	if gone {
		return nil
	}
	// Short: closing is a courtesy (the session expires by itself).
	err := s.client.closeSession(ctx, s.id)
	if errors.Is(err, ErrSessionNotFound) {
		return nil
	}
	return err
}

// TryAcquire acquires key. Held after the wait is a decision, not an error: (nil, false, nil).
func (s *Session) TryAcquire(ctx context.Context, key string, options LockOptions) (*Lock, bool, error) {
	l, err := s.Acquire(ctx, key, options)
	if errors.Is(err, ErrHeld) {
		return nil, false, nil
	}
	return l, err == nil, err
}

// Acquire acquires key; an [Error] of CodeHeld when it is still held after the wait (its
// DelayedUntil set when a lock-delay is why).
func (s *Session) Acquire(ctx context.Context, key string, options LockOptions) (*Lock, error) {
	mode := string(options.Mode)
	switch {
	case mode == "":
		mode = string(Exclusive)
	case mode != string(Exclusive) && mode != string(Shared):
		return nil, invalid("mode", "acquire %s: mode %q", key, mode)
	}
	if options.Permits < 0 {
		return nil, invalid("limit", "acquire %s: permits %d", key, options.Permits)
	}
	if options.Permits > 0 {
		if mode == string(Shared) {
			return nil, invalid("mode", "acquire %s: a shared hold and a semaphore permit exclude each other", key)
		}
		mode = "permit"
	}
	if options.SessionBound && options.TTL > 0 {
		return nil, invalid("ttl_ms", "acquire %s: a session-bound lock has no TTL of its own", key)
	}
	answer, err := s.client.acquire(ctx, acquireRequest{
		key: key, sessionID: s.id, ns: options.Namespace, mode: mode, ttl: options.TTL,
		wait: options.Wait, sessionBound: options.SessionBound, limit: options.Permits,
	})
	if err != nil {
		return nil, err
	}
	return s.newLock(key, options.Namespace, mode, answer, !options.NoAutoExtend, kindLock), nil
}

// Campaign campaigns to lead the election name with value, waiting up to wait while another
// session leads; an [Error] of CodeHeld when it still does. A leadership lives exactly as long
// as the session.
func (s *Session) Campaign(ctx context.Context, name, value string, wait time.Duration) (*Leadership, error) {
	answer, err := s.client.acquire(ctx, acquireRequest{
		key: name, sessionID: s.id, mode: string(Exclusive), wait: wait, sessionBound: true,
		leaderValue: &value,
	})
	if err != nil {
		return nil, err
	}
	answer.Lease = "session" // a leader lives exactly as long as its session (C3)
	l := s.newLock(name, "", string(Exclusive), answer, false, kindLeader)
	leadership := &Leadership{Lock: l, value: value}
	if answer.Leader.Value != "" {
		leadership.value = answer.Leader.Value
	}
	return leadership, nil
}

type grantKind int

const (
	kindLock grantKind = iota
	kindLeader
)

// Lock is a grant held through a session: Token is its fencing token, fixed for its life.
//
// It is trusted until Deadline: the send time of the acquire (or last extend) + min(TTL asked,
// TTL answered) less the clock-rate allowance, and never past its session's deadline. Lost is
// closed once the lock is known lost (a refused extend, a revoke, its session lost, its
// deadline passed without a successful extend); Check returns a CodeLockLost error once it is
// no longer trusted. Call Check before each write, and pass Token to the resource.
type Lock struct {
	session      *Session
	key, ns      string
	mode         string
	token        int64
	limit        int
	sessionBound bool
	kind         grantKind
	ownsSession  bool // opened by Client.Lock: Release closes the session too
	loss         lossFlag

	mu       sync.Mutex
	ttl      time.Duration
	deadline time.Time // its own (none when session-bound)
	released bool
	gone     bool // the server said the grant is not live

	stop context.CancelFunc
	done chan struct{}
}

func (s *Session) newLock(key, ns, mode string, answer *grant, autoExtend bool, kind grantKind) *Lock {
	l := &Lock{
		session: s, key: key, ns: ns, mode: mode, token: answer.FencingToken, limit: answer.Limit,
		sessionBound: answer.Lease == "session", kind: kind, loss: newLossFlag(), ttl: answer.trusted,
	}
	if answer.Mode != "" {
		l.mode = answer.Mode
	}
	if !l.sessionBound {
		l.deadline = LeaseDeadline(answer.sentAt, l.ttl, s.client.clockDrift)
	}
	s.mu.Lock()
	s.locks[l] = struct{}{}
	s.mu.Unlock()
	if s.loss.lost() { // lost while the acquire was in flight
		l.loss.mark("session lost: " + s.LostReason())
	}
	if !l.sessionBound {
		background, stop := context.WithCancel(context.Background())
		l.stop, l.done = stop, make(chan struct{})
		go l.watch(background, answer.sentAt, autoExtend)
	}
	return l
}

// Key is the locked key (a semaphore's or an election's name).
func (l *Lock) Key() string { return l.key }

// Token is the fencing token: pass it with every write to the protected resource.
func (l *Lock) Token() int64 { return l.token }

// Mode is "exclusive", "shared" or "permit".
func (l *Lock) Mode() string { return l.mode }

// Session is the session holding the lock.
func (l *Lock) Session() *Session { return l.session }

// Lost is closed once the lock is known lost.
func (l *Lock) Lost() <-chan struct{} { return l.loss.ch }

// LostReason says why the lock was lost ("" while it is not).
func (l *Lock) LostReason() string { return l.loss.why() }

// Deadline is the time until which the lock is trusted: its own, capped by its session's.
func (l *Lock) Deadline() time.Time {
	session := l.session.Deadline()
	if l.sessionBound {
		return session
	}
	l.mu.Lock()
	own := l.deadline
	l.mu.Unlock()
	return minTime(own, session)
}

// Valid reports whether the lock is trusted now: not released, not lost, before its deadline.
func (l *Lock) Valid() bool {
	l.mu.Lock()
	released := l.released
	l.mu.Unlock()
	return !released && !l.loss.lost() && time.Now().Before(l.Deadline())
}

// Check returns nil while the lock is trusted, else a CodeLockLost error: call it before each
// write.
func (l *Lock) Check() error {
	if l.Valid() {
		return nil
	}
	l.mu.Lock()
	released := l.released
	l.mu.Unlock()
	if !released && !time.Now().Before(l.Deadline()) {
		l.loss.mark("the lock's client deadline passed without a successful extend")
	}
	reason := l.LostReason()
	if reason == "" {
		reason = "released"
	}
	return &Error{Code: CodeLockLost, Message: fmt.Sprintf("%s (token %d): %s", l.key, l.token, reason)}
}

// watch extends the lock every TTL/3 (when autoExtend) and reports it lost once its deadline
// passes without a successful extend.
func (l *Lock) watch(ctx context.Context, sentAt time.Time, autoExtend bool) {
	defer close(l.done)
	c := l.session.client
	l.mu.Lock()
	next := sentAt.Add(l.ttl / 3)
	l.mu.Unlock()
	for {
		l.mu.Lock()
		deadline, ttl := l.deadline, l.ttl
		l.mu.Unlock()
		wake := deadline
		if autoExtend && next.Before(wake) {
			wake = next
		}
		if sleep(ctx, time.Until(wake)) != nil || l.loss.lost() {
			return
		}
		if !time.Now().Before(deadline) {
			l.loss.mark("the lock's client deadline passed without a successful extend")
			return
		}
		if !autoExtend {
			continue
		}
		answer, err := c.extend(ctx, l.key, l.session.id, l.token, ttl, l.ns, l.mode, &call{deadline: deadline, repeatSafe: true})
		switch {
		case err == nil:
			l.record(answer)
			next = answer.sentAt.Add(answer.trusted / 3)
		case errors.Is(err, ErrLockLost):
			l.setGone()
			l.loss.mark("lock lost: " + err.Error())
			return
		case errors.Is(err, ErrSessionNotFound):
			l.setGone()
			l.session.mu.Lock()
			l.session.gone = true
			l.session.mu.Unlock()
			l.session.markLost("session expired on the server: " + err.Error())
			return
		case ctx.Err() != nil:
			return
		case !time.Now().Before(deadline):
			l.loss.mark("no successful extend before the lock's deadline: " + err.Error())
			return
		default:
			log.Printf("dlock: extending %s failed, retrying: %v", l.key, err)
			next = minTime(deadline, time.Now().Add(c.backoffInitial))
		}
	}
}

func (l *Lock) setGone() {
	l.mu.Lock()
	l.gone = true
	l.mu.Unlock()
}

func (l *Lock) record(answer *grant) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ttl = answer.trusted
	l.deadline = LeaseDeadline(answer.sentAt, l.ttl, l.session.client.clockDrift)
}

// Extend extends the lock now, with the same token; ttl 0: its current TTL.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if l.sessionBound {
		return invalid("ttl_ms", "extend %s: a session-bound lock lives as long as its session", l.key)
	}
	if ttl <= 0 {
		l.mu.Lock()
		ttl = l.ttl
		l.mu.Unlock()
	}
	c := l.session.client
	answer, err := c.extend(ctx, l.key, l.session.id, l.token, ttl, l.ns, l.mode, c.newCall(c.retryBudget))
	if errors.Is(err, ErrLockLost) {
		l.setGone()
		l.loss.mark("lock lost: " + err.Error())
	}
	if err != nil {
		return err
	}
	l.record(answer)
	return nil
}

func (l *Lock) stopBackground() {
	if l.stop != nil {
		l.stop()
		<-l.done
	}
}

// Release releases the grant (a Leadership resigns). A CodeLockLost error when it was already
// lost. A lock from Client.Lock closes its session too.
func (l *Lock) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return nil
	}
	l.released = true
	l.mu.Unlock()
	l.stopBackground()
	err := l.release(ctx)
	if l.ownsSession {
		if closeErr := l.session.Close(ctx); err == nil {
			err = closeErr
		}
	}
	return err
}

func (l *Lock) release(ctx context.Context) error {
	s := l.session
	s.mu.Lock()
	delete(s.locks, l)
	sessionGone, sessionClosed := s.gone, s.closed
	s.mu.Unlock()
	l.mu.Lock()
	gone := l.gone
	l.mu.Unlock()
	verb := "release "
	if l.kind == kindLeader {
		verb = "resign "
	}
	if gone || sessionGone {
		reason := l.LostReason()
		if reason == "" {
			reason = "gone"
		}
		return &Error{Code: CodeLockLost, Message: verb + l.key + ": " + reason}
	}
	if sessionClosed {
		return nil // closing the session released it
	}
	if l.kind == kindLeader {
		return s.client.resign(ctx, l.key, s.id, l.token, l.ns)
	}
	return s.client.release(ctx, l.key, s.id, l.token, l.ns, l.mode)
}

// Lock opens a session of its own (options.Session) and acquires key in it; an [Error] of
// CodeHeld when it is still held after options.Wait. Release the lock to close the session.
func (c *Client) Lock(ctx context.Context, key string, options LockOptions) (*Lock, error) {
	s, err := c.OpenSession(ctx, options.Session)
	if err != nil {
		return nil, err
	}
	l, err := s.Acquire(ctx, key, options)
	if err != nil {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.requestTimeout)
		defer cancel()
		_ = s.Close(closeCtx)
		return nil, err
	}
	l.ownsSession = true
	return l, nil
}

// Leadership is the leadership of an election: a session-bound exclusive grant carrying a
// value. Release (or Resign) resigns.
type Leadership struct {
	*Lock
	mu    sync.Mutex
	value string
}

// Name is the election's name.
func (l *Leadership) Name() string { return l.key }

// Value is the value this leader proclaims.
func (l *Leadership) Value() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.value
}

// Proclaim sets a new value without a new election: the token stays. CodeLockLost when this
// session no longer leads with this token.
func (l *Leadership) Proclaim(ctx context.Context, value string) error {
	l.Lock.mu.Lock()
	released := l.released
	l.Lock.mu.Unlock()
	if released {
		return &Error{Code: CodeLockLost, Message: "proclaim " + l.key + ": resigned"}
	}
	err := l.session.client.proclaim(ctx, l.key, l.session.id, l.token, value, l.ns)
	if errors.Is(err, ErrLockLost) || errors.Is(err, ErrSessionNotFound) {
		l.setGone()
		l.loss.mark("leadership lost: " + err.Error())
		return &Error{Code: CodeLockLost, Message: err.(*Error).Message}
	}
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.value = value
	l.mu.Unlock()
	return nil
}

// Resign gives the leadership up; the next campaigner leads with a greater token.
func (l *Leadership) Resign(ctx context.Context) error { return l.Release(ctx) }
