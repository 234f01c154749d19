#pragma once

// libdlock: the C++ client of dlockd (contract C3, HTTP/JSON under /v1). Standard library only.
//
//   dlock::client::Client client({.server_url = "http://127.0.0.1:7070"});
//   dlock::client::Session session(client, {.owner = "payouts-worker"});
//   if (auto lock = session.acquire("payouts/batch-17", {.ttl = 30s, .wait = 5s})) {
//     write_with_fence(lock->token());    // the resource rejects smaller tokens
//     if (!lock->still_valid()) abort_work();
//   } else {
//     // held by someone else after waiting 5 s: a decision, not an error
//   }
//
// Errors are the exceptions of dlock/errors.h. "Held" is always a value (an empty optional);
// a server or backend that cannot answer is always an error (UnavailableError, NotLeaderError,
// UnknownOutcomeError), never "held". Transient failures (connection refused or reset, 503,
// 429) are retried with capped exponential backoff and jitter until the call's deadline; a
// server that stays at a limit (429) then surfaces as ResourceExhaustedError.
//
// Lifetimes: a Client must outlive every Session, Lock and Leadership made through it.
//
// Elections: `session.campaign("payouts-primary", "10.0.0.7:8443", {.wait = 1min})` returns a
// Leadership (empty: another session leads); Client::leader reads the leader and
// Client::observe waits for the next one (docs/client.md, "Elections").

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/duration.h"
#include "dlock/errors.h"
#include "dlock/types.h"

namespace dlock::client {

// The server URL used when neither an option nor DLOCK_SERVER names one.
inline constexpr std::string_view kDefaultServerUrl = "http://127.0.0.1:7070";

// The clock-rate allowance used when neither ClientOptions::clock_drift nor DLOCK_CLOCK_DRIFT
// sets one: every lease is trusted for 1 % less than its TTL (docs/adr/0012).
inline constexpr double kDefaultClockDrift = 0.01;

// Durations ("500ms", "30s", ...): dlock/duration.h, also reachable as client::parse_duration.
using dlock::format_duration;
using dlock::parse_duration;
// Parses a clock-rate allowance, "0.01" or "1%": a fraction in [0, 0.5) (docs/adr/0012).
// Throws InvalidArgumentError whose field() is `field` for anything else.
double parse_clock_drift(std::string_view text, std::string_view field = "clock_drift");

// "<user>@<hostname>" (DLOCK_OWNER when set): the owner shown by get/list for this process.
std::string default_owner();

// 401 and 403 answers (contract C6) are dlock::UnauthenticatedError and
// dlock::PermissionDeniedError (dlock/errors.h); the name stays reachable here.
using PermissionDeniedError = dlock::PermissionDeniedError;

// The TLS handshake with an https:// server failed: its certificate did not verify against the
// CA (ClientOptions::tls_ca_file, else the system's), does not name the host, or the server
// refused ours. A configuration error: not retried on that server, never reported as an outage.
class TlsError : public InvalidArgumentError {
 public:
  explicit TlsError(const std::string& message) : InvalidArgumentError("tls", message) {}
};

struct ClientOptions {
  // http://host:port or https://host:port, optionally with a path prefix. A comma-separated
  // list names several dlockd sharing one backend (see `servers`). Empty: DLOCK_SERVER (also a
  // comma-separated list), else kDefaultServerUrl.
  std::string server_url;
  // Several dlockd sharing one backend, tried in turn: a call moves to the next one when a
  // server cannot be reached or answers 503, and after a lost connection only for calls that
  // are safe to repeat (docs/client.md, "Failover"). Non-empty: wins over server_url.
  std::vector<std::string> servers;
  // Bearer token sent as `Authorization: Bearer <token>` with every /v1 request (contract C6).
  // Empty: the first line of token_file, else DLOCK_TOKEN, else the first line of the file
  // DLOCK_TOKEN_FILE names. Never shown in errors or logs.
  std::string token;
  std::string token_file;
  // Bearer token for the admin API (revoke); empty: DLOCK_ADMIN_TOKEN, else `token`.
  std::string admin_token;
  // TLS for https:// servers (TLS 1.2 or later, the server's certificate verified and its name
  // checked against the URL's host). tls_ca_file: PEM CA certificates to trust (empty:
  // DLOCK_CACERT, else the system's). tls_cert_file / tls_key_file: a client certificate and
  // its key for mTLS (empty: DLOCK_CERT / DLOCK_KEY; the key defaults to the cert file).
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // Upper bound for one HTTP exchange (connect + write + read). A waiting acquire adds its wait.
  std::chrono::milliseconds request_timeout{std::chrono::seconds(10)};
  // How long a plain call keeps retrying transient failures before it throws.
  std::chrono::milliseconds retry_budget{std::chrono::seconds(15)};
  // Backoff between retries: initial * 2^attempt capped at backoff_max, with jitter.
  std::chrono::milliseconds backoff_initial{std::chrono::milliseconds(50)};
  std::chrono::milliseconds backoff_max{std::chrono::seconds(2)};
  // Idle keep-alive connections kept for reuse.
  std::size_t max_idle_connections = 8;
  // Allowance for clock-rate error between this host's steady clock and the clock that ends a
  // lease on the server side (docs/adr/0012): a lease of `ttl` is trusted until its request's
  // send time + ttl - ceil(ttl * clock_drift). A fraction in [0, 0.5). Empty: DLOCK_CLOCK_DRIFT
  // when set ("0.02" or "2%"), else kDefaultClockDrift. Invalid: InvalidArgumentError.
  std::optional<double> clock_drift;
  // Where errors that cannot be reported to a caller go (a Lock's destructor failing to
  // release, a keepalive failing). Called from any thread. Empty: one line on stderr.
  std::function<void(std::string_view message)> log;
};

// A deadline on the steady clock for one call, including its retries. Empty: retry_budget.
using Deadline = std::optional<SteadyClock::time_point>;

struct ExtendResult {
  FencingToken fencing_token = 0;  // unchanged by extend
  // The TTL this client counts on: the smaller of the one asked for and the one answered.
  std::chrono::milliseconds ttl{0};
  // Send time of the extend request + `ttl` less the clock-rate allowance: believe in the lock
  // until then at most.
  SteadyClock::time_point client_deadline{};
  WallClock::time_point server_expiry{};
};

struct AcquireOptions {
  // Lease length; 0 means the server's default (30 s unless configured otherwise).
  std::chrono::milliseconds ttl{0};
  // How long to wait for a held key before reporting "held"; 0 = try once.
  std::chrono::milliseconds wait{0};
  // Namespace; empty means the server's default namespace ("default").
  std::string ns;
  // Extend the lock from a background thread every ttl/3 while the Lock object lives.
  bool auto_extend = false;
  // Called once, from the auto-extend thread, when the lock is lost: extend answered
  // lock_lost, or the client deadline passed without a successful extend. Must not block long.
  std::function<void(const std::string& reason)> on_lost;
  // A lock that lives exactly as long as the session (docs/adr/0018-session-bound-locks.md): no
  // TTL of its own (`ttl` must be 0), kept by the session's keepalives, so `auto_extend` is not
  // needed (and is ignored); its deadline is the session's.
  bool session_bound = false;
  // Which hold (docs/adr/0020-more-primitives-design.md). kExclusive (the default): the mutex,
  // or the write side of a read-write lock. kShared: the read side; any number of shared
  // holders of `key` at once, none while an exclusive holder lives, and each gets a token of
  // its own. For a semaphore leave `mode` alone and set `permits` (kPermit is accepted too).
  HoldMode mode = HoldMode::kExclusive;
  // > 0: acquire one permit of the semaphore `key` of this many permits (/v1/semaphores). Every
  // live holder must agree on the number: another one is ConflictError (field "limit"). All
  // taken after `wait`: an empty optional ("held"), as for a lock. 0 with mode kPermit, or > 0
  // with mode kShared: InvalidArgumentError.
  std::uint32_t permits = 0;
};

// An acquire waiting for a name on the dlockd that answered (C3 "Waiters"), the head first.
struct Waiter {
  std::size_t position = 0;  // 1: the next to try
  std::string owner_id;
  HoldMode mode = HoldMode::kExclusive;
  std::uint32_t limit = 0;  // a permit's
  std::chrono::milliseconds waiting{0};
  std::string session_id;  // only where C6 shows it
};

// What GET /v1/locks/{key} says of a name: its live holders (none: free) and its waiters.
struct KeyState {
  std::vector<LockInfo> holders;
  std::vector<Waiter> waiters;
};

// A session as GET /v1/sessions lists it; `principal` only with authentication (C6).
struct ListedSession {
  SessionInfo session;
  std::string principal;
};

// One session in full (GET /v1/sessions/{id}): as listed, what it holds in every namespace (each
// grant with its namespace) and what it waits for on the dlockd that answered.
struct SessionDetail {
  struct Held {
    std::string ns;
    LockInfo lock;
  };
  struct Wait {
    std::string ns;
    std::string key;
    HoldMode mode = HoldMode::kExclusive;
    std::uint32_t limit = 0;   // a permit's
    std::size_t position = 0;  // 1: the next to try
    std::chrono::milliseconds waiting{0};
  };
  ListedSession listed;
  std::vector<Held> holds;
  std::vector<Wait> waits;
};

// One page of GET /v1/sessions (C3 "Paging"); `next` empty on the last page.
struct SessionPage {
  std::vector<ListedSession> sessions;
  std::string next;
};

// One page of GET /v1/locks (C3 "Paging"): at most the limit asked of grants and lock-delays
// together, and `next`, the `after` of the following page (empty: this is the last page).
struct LockPage {
  std::vector<LockInfo> locks;
  std::vector<KeyDelay> delays;
  std::string next;
  // One per entry of `locks`, in order: how many acquires wait for its key on the dlockd that
  // answered (C3 "Waiters"), and its namespace (only from list_every_namespace; else empty).
  std::vector<std::size_t> waiting;
  std::vector<std::string> namespaces;
};

// What Client::semaphore reports about a semaphore.
struct SemaphoreInfo {
  std::string name;
  // The number of permits its live holders agreed on; 0 when no permit is held.
  std::uint32_t limit = 0;
  // Every live permit holder, each with its own fencing token.
  std::vector<LockInfo> holders;
  // The acquires waiting for a permit on the dlockd that answered, the head first.
  std::vector<Waiter> waiters;
};

// An election's leader (docs/adr/0020-more-primitives-design.md, "Leader election"; C3
// "Elections"): an exclusive, session-bound grant of the name that carries a value.
struct LeaderInfo {
  std::string name;
  std::string owner;
  // What the leader proclaims (an address, an ID): up to 1024 bytes of text.
  std::string value;
  FencingToken fencing_token = 0;
  WallClock::time_point acquired_at{};
  WallClock::time_point expires_at{};
  // Shown to readers allowed to see it (contract C6); empty otherwise.
  std::optional<std::string> session_id;
};

// One event of a watch (Client::watch, C3 "Watch"): a grant, release, expire, revoke,
// waiter_joined, waiter_left, or a reset (the position could not be continued: re-read the
// state). Fields the server did not send are empty.
struct WatchEvent {
  std::string position;
  std::string kind;
  std::string ns;
  std::string key;
  std::string owner;
  std::string mode;
  std::string reason;
  std::optional<FencingToken> fencing_token;
  std::optional<std::string> session_id;  // shown only to whom C6 lets see it
  WallClock::time_point at{};
  std::string json;  // the event as the server sent it, one line
};

// One answer of a watch: its events, and the position to pass as `after` next.
struct WatchPage {
  std::vector<WatchEvent> events;
  std::string next;
};

struct CampaignOptions {
  // How long to wait while another session leads (or the name is held as a lock) before
  // reporting "held"; 0 = try once. Campaigns and lock acquires of the name queue first-come
  // first-served.
  std::chrono::milliseconds wait{0};
  // Namespace; empty means the server's default namespace ("default").
  std::string ns;
};

class Client;
class Session;
namespace detail {
struct ClientCore;
struct SessionState;
struct LockState;
class Transport;
}  // namespace detail

// A grant held through a Session. Move-only; releases the grant on destruction (errors there
// are logged through ClientOptions::log, never thrown). Its owning Client must outlive it.
class Lock {
 public:
  Lock(Lock&&) noexcept;
  Lock& operator=(Lock&&) noexcept;
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;
  ~Lock();

  const std::string& key() const;
  const std::string& ns() const;
  const std::string& session_id() const;
  // The fencing token of this grant; fixed for its whole life (INV-04).
  FencingToken token() const;
  // True until the monotonic client deadline passes, or the lock or its session was reported
  // lost. The deadline is the send time of the last successful acquire or extend + the smaller
  // of the TTL asked for and the TTL answered, less the clock-rate allowance (clock_drift), and
  // never later than its session's deadline (a lock dies with its session), so the client stops
  // believing in the lock no later than the server expires it.
  bool still_valid() const;
  SteadyClock::time_point client_deadline() const;
  // Expiry as the server's clock reported it; informational only.
  WallClock::time_point server_expiry() const;
  // Why the lock was lost; empty while it is not known to be lost.
  std::string lost_reason() const;
  // True when the server granted a session-bound lock (ADR-0018): it lives as long as its
  // session, and extend() is a checked no-op that moves no deadline.
  bool session_bound() const;
  // kExclusive, kShared (a read lock) or kPermit (one permit of a semaphore), as the server
  // granted it.
  HoldMode mode() const;
  // For a permit: the semaphore's number of permits; else 0.
  std::uint32_t limit() const;

  // Extends the lease now (ttl 0: the last granted TTL). Throws LockLostError when the grant
  // is gone, UnavailableError when the server cannot answer. A permit is extended and released
  // through /v1/semaphores/{name} (the server would accept the lock routes too: the token names
  // the grant), so the server's access log, metrics and authorisation see a semaphore's traffic
  // under the route it was acquired by.
  void extend(std::chrono::milliseconds ttl = std::chrono::milliseconds(0));
  // Releases the grant and reports failures (LockLostError when it was no longer ours).
  // Afterwards the Lock is inert and its destructor does nothing.
  void release();

 private:
  friend class Session;
  friend class Leadership;
  explicit Lock(std::unique_ptr<detail::LockState> state);
  std::unique_ptr<detail::LockState> state_;
};

// Leadership of an election won through Session::campaign: a session-bound grant of the name
// (ADR-0018) with a value. It lives exactly as long as its session: it has no TTL and no
// extend; keep the session alive to stay leader. Move-only; resigns on destruction unless it
// was resigned or lost already (errors there are logged, never thrown). Its Client must
// outlive it.
class Leadership {
 public:
  Leadership(Leadership&&) noexcept;
  Leadership& operator=(Leadership&&) noexcept;
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;
  ~Leadership();

  const std::string& name() const;
  const std::string& ns() const;
  const std::string& session_id() const;
  // The fencing token of this leadership; fixed for its whole life (a proclaim keeps it), and
  // every later leader's is greater.
  FencingToken token() const;
  // The value last campaigned with or proclaimed.
  std::string value() const;
  // As Lock::still_valid: false once resigned, once reported lost (a proclaim answered
  // lock_lost), or once its session is lost or its session's deadline passed.
  bool still_valid() const;
  // The session's deadline: a leader is trusted no longer than its session.
  SteadyClock::time_point client_deadline() const;
  // Why the leadership was lost; empty while it is not known to be lost.
  std::string lost_reason() const;

  // Changes the value without a new election: the token stays. Throws LockLostError when this
  // session no longer leads with this token (resigned, expired, superseded); the leadership is
  // then lost.
  void proclaim(const std::string& value);
  // Resigns now (the next campaigner leads with a greater token) and reports failures
  // (LockLostError when it no longer led). Afterwards the destructor does nothing.
  void resign();

  // The grant underneath as the lock routes see it: an exclusive, session-bound lock of the
  // name (C3 "Elections"). Its release() resigns through the election route.
  Lock& lock();
  const Lock& lock() const;

 private:
  friend class Session;
  explicit Leadership(Lock lock);
  Lock lock_;
};

struct SessionOptions {
  // Who holds the locks, shown by get/list. Empty: default_owner().
  std::string owner;
  // Session lease; 0 = the server's default. Keepalives are sent every ttl/3.
  std::chrono::milliseconds ttl{0};
  // Called once, from the keepalive thread, when the session is lost: keepalive answered
  // session_not_found, or the TTL passed without a successful keepalive. (`{}`: so that
  // `{.owner = ..., .lock_delay = ...}` compiles without -Wmissing-field-initializers.)
  std::function<void(const std::string& reason)> on_lost{};
  // Lock-delay (C2 "Lock-delay"; docs/client.md, "Lock-delay"): when a grant of this session
  // ends without a release (its session expired, or an admin revoked it), the server grants the
  // name to nobody for this long, so a holder that went on acting after its lease silently
  // ended is done before the next one starts. For a resource that cannot check fencing tokens;
  // 0 (the default) when it can. At most the server's lock.max.delay (1 min unless configured):
  // more is InvalidArgumentError (field "lock_delay_ms"); negative, InvalidArgumentError. Sent
  // only when > 0, so a server without lock-delay sees the request it always saw.
  std::chrono::milliseconds lock_delay{0};
};

// A liveness lease with a background keepalive thread; closes itself (releasing its locks on
// the server) on destruction. Move-only. Its Client must outlive it.
class Session {
 public:
  // Opens the session; throws on failure.
  Session(Client& client, SessionOptions options = {});
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session();

  const std::string& id() const;
  const std::string& owner() const;
  std::chrono::milliseconds ttl() const;
  // The lock-delay the server granted (SessionInfo::lock_delay); 0 from a server without it.
  std::chrono::milliseconds lock_delay() const;
  bool lost() const;
  std::string lost_reason() const;

  // Acquires `key` (a lock, a read lock, or one permit of a semaphore: options.mode and
  // options.permits), waiting up to options.wait. Empty optional = held by someone else (every
  // permit taken) after the wait (a decision). Throws SessionNotFoundError,
  // InvalidArgumentError, ConflictError (a semaphore's limit differs), UnavailableError.
  std::optional<Lock> acquire(const std::string& key, AcquireOptions options = {});

  // Campaigns for the election `name` with `value` (1..1024 bytes), waiting up to
  // options.wait. Empty optional = another session leads (or the name is held) after the wait:
  // a decision. A campaign by a session that leads already replaces its leadership with a new,
  // greater token. Throws SessionNotFoundError, InvalidArgumentError, UnavailableError.
  std::optional<Leadership> campaign(const std::string& name, const std::string& value,
                                     CampaignOptions options = {});

  // Closes the session now and reports failures. Afterwards the destructor does nothing.
  void close();

 private:
  // Shared with the Locks acquired through this session, which must see it lost.
  std::shared_ptr<detail::SessionState> state_;
};

// The low-level calls, one per C3 route, as the CLI uses them. Thread-safe: one Client may be
// shared by every thread of a process; it pools keep-alive connections.
class Client {
 public:
  explicit Client(ClientOptions options = {});
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  // The first server URL (after DLOCK_SERVER and the default were applied).
  const std::string& server_url() const;
  // Every server, in the order they are tried.
  const std::vector<std::string>& servers() const;

  // SessionInfo::ttl is the smaller of `ttl` (when not 0) and the answered TTL. `lock_delay`
  // as SessionOptions::lock_delay (sent as "lock_delay_ms" only when > 0);
  // SessionInfo::lock_delay is the answered one (0 when the server sent none).
  SessionInfo open_session(const std::string& owner, std::chrono::milliseconds ttl,
                           Deadline deadline = {},
                           std::chrono::milliseconds lock_delay = std::chrono::milliseconds(0));
  // Returns the new TTL and server expiry as answered (no lock_delay: the answer has none, so
  // SessionInfo::lock_delay is 0). Throws SessionNotFoundError.
  SessionInfo keepalive(const std::string& session_id, Deadline deadline = {});
  // Releases the session's locks on the server. Throws SessionNotFoundError.
  void close_session(const std::string& session_id, Deadline deadline = {});

  // Empty = held after `wait`. LockHandle::client_deadline = steady time the granting request
  // was sent + min(ttl asked, ttl answered) less the clock-rate allowance (ttl 0 asks for the
  // server's default: then the answered one). `lease` is a TTL (a duration converts to it) or
  // LockLease::session() (`"lease": "session"`, ADR-0018: the answered TTL is the session's and
  // LockHandle::session_bound is set). Waits longer than the server's maximum are re-issued
  // until `wait`.
  // `mode`: kExclusive (a lock) or kShared (a read lock, `"mode": "shared"`); LockHandle::mode
  // is the mode granted. A permit is acquire_permit's.
  std::optional<LockHandle> acquire(const std::string& key, const std::string& session_id,
                                    LockLease lease, std::chrono::milliseconds wait,
                                    const std::string& ns = {}, Deadline deadline = {},
                                    HoldMode mode = HoldMode::kExclusive);
  // One permit of the semaphore `name` of `limit` (> 0) permits (POST
  // /v1/semaphores/{name}/acquire). Empty = every permit taken after `wait`. Throws
  // ConflictError (field "limit") when the live holders agreed on another limit.
  std::optional<LockHandle> acquire_permit(const std::string& name, const std::string& session_id,
                                           std::uint32_t limit, LockLease lease,
                                           std::chrono::milliseconds wait,
                                           const std::string& ns = {}, Deadline deadline = {});
  // `mode` kPermit sends extend and release through /v1/semaphores/{key} (Lock::extend says
  // why); any other mode through /v1/locks/{key}. The server accepts either for any grant.
  ExtendResult extend(const std::string& key, const std::string& session_id, FencingToken token,
                      std::chrono::milliseconds ttl, const std::string& ns = {},
                      Deadline deadline = {}, HoldMode mode = HoldMode::kExclusive);
  // Throws LockLostError when (session, token) is not a live grant.
  void release(const std::string& key, const std::string& session_id, FencingToken token,
               const std::string& ns = {}, Deadline deadline = {},
               HoldMode mode = HoldMode::kExclusive);
  // Empty = no live grant (lock_not_found). With several holders (shared, permits): the one
  // with the greatest token; LockInfo::mode and ::limit say which kind.
  std::optional<LockInfo> get(const std::string& key, const std::string& ns = {},
                              Deadline deadline = {});
  // Every live holder of `key` (GET /v1/locks/{key}, "holders"), in the server's order; empty
  // when the key is free. One for an exclusive lock, any number of readers or permits.
  std::vector<LockInfo> holders(const std::string& key, const std::string& ns = {},
                                Deadline deadline = {});
  // The live sessions the caller may see (C6), by ID: those whose owner starts with `owner` (of
  // `principal`, when given), the page after `after` (empty: the first), at most `limit` (0: the
  // server's default).
  SessionPage list_sessions(const std::string& owner, const std::string& principal,
                            std::size_t limit, const std::string& after, Deadline deadline = {});
  // One session: what it holds and waits for (GET /v1/sessions/{id}). Another principal's
  // session, unless the caller administers every namespace, is SessionNotFoundError (C6).
  SessionDetail session_detail(const std::string& session_id, Deadline deadline = {});
  // The holders of `key` and the acquires waiting for it on the server that answers.
  KeyState state(const std::string& key, const std::string& ns = {}, Deadline deadline = {});
  // The semaphore `name`: its agreed limit and every permit holder (GET /v1/semaphores/{name});
  // limit 0 and no holders when every permit is free.
  SemaphoreInfo semaphore(const std::string& name, const std::string& ns = {},
                          Deadline deadline = {});
  // The first page of the grants under `prefix` (list_page's locks).
  std::vector<LockInfo> list(const std::string& prefix, std::size_t limit = 0,
                             const std::string& ns = {}, Deadline deadline = {});
  // The page after `after` (a previous page's `next`; empty: the first page), of at most `limit`
  // entries (0: the server's default).
  LockPage list_page(const std::string& prefix, std::size_t limit, const std::string& after,
                     const std::string& ns = {}, Deadline deadline = {});
  // As list_page, in every namespace (GET /v1/locks?all_namespaces=true): with a tokens file,
  // only for an administrator of every namespace (else PermissionDeniedError).
  LockPage list_every_namespace(std::size_t limit, const std::string& after,
                                Deadline deadline = {});
  // The election `name`'s leader (GET /v1/elections/{name}); empty when nobody leads, or when
  // the name is held without a value (a plain lock, readers, permits).
  std::optional<LeaderInfo> leader(const std::string& name, const std::string& ns = {},
                                   Deadline deadline = {});
  // Observes the election `name` (one long poll): answers as soon as a leader with a token
  // greater than `after_token` leads, or, with `after_value`, the leader with token
  // `after_token` proclaims another value; at the latest after `wait` (at most the server's
  // lock.max.wait), with the state then (empty: nobody leads). Pass the last answer's token and
  // value to see every change once. Each attempt may take `wait` beyond request_timeout, and
  // the call's deadline allows `wait` beyond retry_budget (ADR-0012).
  std::optional<LeaderInfo> observe(const std::string& name, FencingToken after_token,
                                    const std::optional<std::string>& after_value,
                                    std::chrono::milliseconds wait, const std::string& ns = {},
                                    Deadline deadline = {});
  // The events of the key `target` (or, with `prefix`, of every key beginning with it) after
  // the position `after` ("" : from now), waiting at most `wait` for the first (GET /v1/watch,
  // one long poll; C3 "Watch"). Pass the answer's `next` as the following call's `after`.
  WatchPage watch(const std::string& target, bool prefix, const std::string& after,
                  std::chrono::milliseconds wait, const std::string& ns = {},
                  Deadline deadline = {});

  // Admin: removes the current grant whoever holds it. Needs the admin token.
  LockOutcome revoke(const std::string& key, const std::string& ns = {}, Deadline deadline = {});

  // For tests: replaces the HTTP transport (e.g. with a scripted fake).
  Client(ClientOptions options, std::unique_ptr<detail::Transport> transport);

 private:
  friend class Session;
  friend class Lock;
  std::unique_ptr<detail::ClientCore> core_;
};

}  // namespace dlock::client
