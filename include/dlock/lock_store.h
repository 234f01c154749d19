#pragma once

// The store SPI. This header is the specification every backend (sqlite, pg, etcd) meets and
// that tests/conformance/ checks, once, for every backend. Standard library only.
//
// Common rules for every operation below:
// - Thread-safety: every method may be called concurrently from any thread.
// - Clocks: expiry is decided by the backend's clock (database now(), etcd lease), never by the
//   caller's wall clock. Client deadlines use SteadyClock captured *before* the request is sent.
// - Errors are exceptions from dlock/errors.h. A method that cannot reach a decision throws
//   UnavailableError (or NotLeaderError / UnknownOutcomeError, its subclasses) or
//   ContentionError; it never disguises that as a negative answer ("held", "not found").
// - Keys are namespace-qualified, "<namespace>/<key>", non-empty.
// - Every backend call is bounded by the store's configured call timeout; exceeding it throws
//   UnavailableError.
//
// Who checks what:
// - The server (src/server/input_checks.*): what the HTTP API documents (C3): lengths, character
//   sets, namespaces and names, the bounds of a request's TTL, wait, permits and value; 400
//   naming the field.
// - The core (src/core): what the service limits: wait_ms up to max_wait, waiter, observer and
//   session caps (ResourceExhaustedError).
// - ValidatingBackend (src/util/validating_backend.h), in which every make_*_store returns its
//   store: the shape and range of every argument below, for every store alike. Keys, owners and
//   session ids, a GrantRef's too, non-empty and at most limits::kMaxStoreFieldBytes ("key",
//   "owner", "session_id"); TTLs and leases within the store's TtlLimits ("ttl_ms"); the
//   lock-delay ("lock_delay_ms"); a permit's limit ("limit"); a leader's value ("value"). It
//   throws InvalidArgumentError naming the field before the store is called.
// - The stores: only what their backend alone needs (etcd: a key of "<namespace>/<name>", for
//   its key layout).

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/errors.h"
#include "dlock/types.h"

namespace dlock {

// Bounds every backend enforces on TTLs (locks and sessions) and on a session's lock-delay.
struct TtlLimits {
  std::chrono::milliseconds min_ttl{1000};
  std::chrono::milliseconds max_ttl{std::chrono::hours(1)};
  // The greatest lock-delay a session may ask for (C5 lock.max.delay); 0 allows none.
  std::chrono::milliseconds max_lock_delay{std::chrono::minutes(1)};
};

// Throws InvalidArgumentError naming `field` when `ttl` lies outside `limits`.
void check_ttl(std::chrono::milliseconds ttl, const TtlLimits& limits, const char* field);
// check_ttl(lease.ttl(), limits, "ttl_ms") for a TTL lease; a session-bound lease has none.
void check_lease(const LockLease& lease, const TtlLimits& limits);
// Throws InvalidArgumentError naming "lock_delay_ms" when `delay` is negative or greater than
// limits.max_lock_delay.
void check_lock_delay(std::chrono::milliseconds delay, const TtlLimits& limits);

// What reap_expired removed, so the caller can log and notify waiters.
struct ReapReport {
  std::vector<LockInfo> expired_locks;
  std::vector<std::string> expired_sessions;
};

// A live subscription from LockStore::watch_releases; destroying it cancels it (no callback
// runs after the destructor returns).
class ReleaseSubscription {
 public:
  ReleaseSubscription() = default;
  ReleaseSubscription(const ReleaseSubscription&) = delete;
  ReleaseSubscription& operator=(const ReleaseSubscription&) = delete;
  virtual ~ReleaseSubscription() = default;
};
using ReleaseSubscriptionPtr = std::unique_ptr<ReleaseSubscription>;
// What LockStore::watch_releases calls: `granted` is 0 when a grant of the key may have ended,
// else the token of a grant of the key made without a release (a hand-over's).
using ReleaseCallback = std::function<void(FencingToken granted)>;

// Where a page of LockStore::list starts (C2 "Paging"): after the grant (key, fencing_token) in
// list's order, keys compared as bytes. The default, {"", 0}, is before every grant (keys are
// never empty). A page's last grant is the next page's ListAfter.
struct ListAfter {
  std::string key;
  FencingToken fencing_token = 0;
};

class LockStore {
 public:
  LockStore() = default;
  LockStore(const LockStore&) = delete;
  LockStore& operator=(const LockStore&) = delete;
  virtual ~LockStore() = default;

  // Atomically grants `key` to (owner_id, session_id) as `request` asks, in one backend operation
  // with no read-then-write window. Returns the grant (its mode is the request's), or
  // std::nullopt when a live grant of another session excludes it ("held" is a decision, not an
  // error).
  // - The lease (request.lease()) is a TTL of the grant's own, or LockLease::session(): the grant
  //   then lives exactly as long as its session (heartbeats keep it, the session's expiry or close
  //   ends it) and the handle's deadline and expiry are the session's as of the grant (ADR-0018).
  // - The token is strictly greater than every token ever issued for `key`, of any mode,
  //   including the token of an expired holder being taken over: a writer's token is greater
  //   than every reader's before it.
  // - Expired holders (their TTL or, session-bound, their session) are neither counted nor
  //   excluding, without a reaper having run.
  // - Re-entrant: a session holds at most one grant of a name. The same (owner_id, session_id)
  //   asking again gets a new, strictly greater token and the lease (and value) asked for this
  //   time; a permit holder never takes a second permit.
  // Exclusive: held while a live grant of another session, of any mode, holds `key`.
  // Shared and permit (holder sets, docs/adr/0020-more-primitives-design.md): held while a live
  // holder of another mode holds `key` (an exclusive grant excludes every other holder; shared
  // holders and permit holders exclude each other) or, for a permit, while `limit` permit holders
  // of other sessions are live. A session that holds `key` shared or as a permit is "held" when
  // it asks for it exclusive: there is no upgrade or downgrade.
  // Leader (elections, ADR-0020 "Leader election"): an exclusive grant carrying the leader's
  // value; every promise of an exclusive grant holds, and read, read_holders and list report the
  // value. A grant made exclusive or by handover has no value: a plain lock that takes over a
  // leader's name does not inherit it.
  // Throws InvalidArgumentError ("ttl_ms" for a TTL outside the limits; "limit" for a permit limit
  // of 0 or above limits::kMaxSemaphoreLimit; "value" for a leader value that is empty, longer
  // than limits::kMaxLeaderValueBytes or holding a NUL byte), ConflictError ("limit") when live
  // permit holders of `key` of other sessions agreed on another limit, SessionNotFoundError when
  // the session does not exist or has expired, Unavailable/Contention on backend failure.
  virtual std::optional<LockHandle> try_grant(std::string_view key, std::string_view owner_id,
                                              std::string_view session_id,
                                              const GrantRequest& request) = 0;

  // Replaces the value of the live leader grant `grant` names (as extend finds it) in one atomic
  // operation, and returns the grant as read reports it: the same token, the same lease and
  // expiry (a proclaim neither extends nor detaches the grant's lease).
  // Throws LockLostError when that grant is not live (released, expired, revoked, taken over, or
  // the token names a shared or permit holder), InvalidArgumentError ("value").
  virtual LockInfo proclaim(const GrantRef& grant, std::string_view value) = 0;

  // Every live holder of `key`, ordered by token: one exclusive grant, or its shared holders, or
  // its permit holders (each LockInfo carries its mode and, for permits, the limit).
  virtual std::vector<LockInfo> read_holders(std::string_view key) = 0;

  // The live grant of `key`, or std::nullopt when nobody holds it (absent or expired).
  // For a key held by shared or permit holders: the one with the greatest token.
  // A grant whose *session* has expired stays held (for read and try_grant alike) until its
  // own expiry or until reap_expired removes it: never released early, never granted twice.
  // A session-bound grant is live exactly while its session is; it reports the session's expiry.
  virtual std::optional<LockInfo> read(std::string_view key) = 0;

  // Live grants whose key starts with `prefix` and that come after `after` -- (key, token) greater
  // than (after.key, after.fencing_token) -- ordered by key (as bytes), at most `limit` of them.
  // Every live holder is one entry (a key held shared by three sessions is three), ordered by
  // token within a key. Paging with the last grant of each page as the next `after` lists every
  // grant that lives through the walk once (C2 "Paging").
  virtual std::vector<LockInfo> list(std::string_view prefix, const ListAfter& after,
                                     std::size_t limit) = 0;

  // Lock-delay (C2 "Lock-delay"): the names starting with `prefix` and greater than `after` (as
  // bytes; "" for the first page) that a lock-delay keeps from every new grant now, ordered by
  // key, at most `limit` of them, each with the end of the latest of its running delays. etcd
  // lists a grant that ended but whose delay it has not started yet (no store has found the end)
  // as ending its delay from now: the delay starts then, if later.
  virtual std::vector<KeyDelay> list_delays(std::string_view prefix, std::string_view after,
                                            std::size_t limit) = 0;

  // An administrator's end of every lock-delay of `key` running now (C2 "Lock-delay"): the name is
  // then granted as if its ended grants had been released. Live grants, and the delays they will
  // carry when they end, are untouched. Returns whether a delay was running; when one was,
  // watch_releases fires for `key` (waiters try again).
  virtual bool clear_delay(std::string_view key) = 0;

  // Extends the grant `grant` names -- by key, owner, session and token, whatever its mode -- to
  // expire `ttl` from now (backend clock). Keeps the token. Returns the grant's handle (same token,
  // its own mode, new client_deadline and server_expiry).
  // Throws LockLostError when the token names no live grant of its key held by that owner and
  // session (expired, released, revoked or taken over), InvalidArgumentError for a bad TTL.
  // A session-bound grant has no TTL of its own to extend: `ttl` is ignored, nothing is written,
  // and the answer (same token) carries the session's current expiry after checking that the
  // grant is still live (LockLostError otherwise). Heartbeats extend it (ADR-0018).
  // A shared or permit holder is extended alone: the other holders of its key keep their own
  // leases.
  virtual LockHandle extend(const GrantRef& grant, std::chrono::milliseconds ttl) = 0;

  // Releases the grant `grant` names: an exclusive, shared or permit holder. Returns true when
  // that grant was live and is now released; false when it was not the live grant (a later grant
  // is never touched; an expired row of this grant is removed all the same).
  virtual bool delete_if_owner(const GrantRef& grant) = 0;

  // Hands the live exclusive grant `from` names to (next_owner_id, next_session_id) in one backend
  // operation, minting a new, strictly greater token; the new grant is exclusive, has no value and
  // has `lease` (a TTL, or bound to the next session). Returns the new grant, or std::nullopt
  // when the next session is no longer alive (then `from`'s grant has simply been released).
  // Throws LockLostError when `from` names no live exclusive grant (nothing is changed) -- also
  // when its token names a live shared or permit holder, which the caller then releases with
  // delete_if_owner.
  virtual std::optional<LockHandle> handover(const GrantRef& from, std::string_view next_owner_id,
                                             std::string_view next_session_id, LockLease lease) = 0;

  // Administrative force-release of every live holder of `key`; the outcome names the one with
  // the greatest token.
  virtual LockOutcome revoke(std::string_view key) = 0;

  // Removes expired grants (holders of every mode) and expired sessions (with their locks).
  // Backends whose leases expire by themselves (etcd) may report nothing. Safe to run from several
  // servers at once.
  virtual ReapReport reap_expired() = 0;

  // Calls `on_released` (from a store thread; it must not block) whenever a grant (a holder, of
  // any mode) of `key` may have ended: delete_if_owner, revoke, a handover whose next session was
  // dead, close_session or reap_expired through this store or, for backends with shared storage
  // (pg, etcd), through any store on the same storage; for etcd also lease expiry. Spurious
  // calls are allowed, missed releases are not: a release after watch_releases returns is
  // always reported. Waiters use it instead of polling; they still retry try_grant, which
  // alone decides.
  // Hand-overs: it is also called, with the new grant's token, for every handover that granted,
  // through any store on the same storage: the holder changed without a release, and a caller
  // that keeps what it learnt of a key's holder hears of it (ADR-0036). Other grants may be
  // reported so too (etcd reports every put of the lock key).
  // Elections: it is also called whenever a leader grant is made by try_grant or its value
  // replaced by proclaim, through any store on the same storage,
  // so that an election's observers wait on it too (they re-read; read alone decides).
  virtual ReleaseSubscriptionPtr watch_releases(std::string_view key,
                                                ReleaseCallback on_released) = 0;

  // Exactly "sqlite", "pg" or "etcd".
  virtual std::string_view backend_id() const = 0;
};

class SessionRegistry {
 public:
  SessionRegistry() = default;
  SessionRegistry(const SessionRegistry&) = delete;
  SessionRegistry& operator=(const SessionRegistry&) = delete;
  virtual ~SessionRegistry() = default;

  // Opens a session for `owner_id` that expires `ttl` after its last heartbeat.
  // Throws InvalidArgumentError ("ttl_ms" / "owner" / "lock_delay_ms") for bad input.
  //
  // Lock-delay (ADR-0020 "Lock-delay", C2 "Lock-delay"): every grant made for this session
  // (exclusive, shared, permit, leader, or handed over to it) carries `lock_delay`. When such a
  // grant ends WITHOUT a release -- its TTL passed, its session expired, or it was revoked -- no
  // grant of its name, in any mode and to any session (its own included), is made until
  // `lock_delay` after that end: try_grant answers "held". The end is the backend's (a TTL's or the
  // session's expiry by the backend clock, the revoke's commit); etcd may start the delay later,
  // never earlier. A release, a hand-over and close_session end a grant cleanly: no delay. Grants
  // that live on are untouched. When a delay ends, watch_releases fires for the name no later than
  // the first reap_expired after its end (etcd: when the delay's lease expires). 0 (the default):
  // no delay.
  virtual SessionInfo open_session(std::string_view owner_id, std::chrono::milliseconds ttl,
                                   std::chrono::milliseconds lock_delay) = 0;
  // open_session(owner_id, ttl, 0): no lock-delay. (A backend re-exports it with
  // `using SessionRegistry::open_session;`.)
  SessionInfo open_session(std::string_view owner_id, std::chrono::milliseconds ttl) {
    return open_session(owner_id, ttl, std::chrono::milliseconds(0));
  }

  // Renews the session for another full TTL. Throws SessionNotFoundError when it does not
  // exist or has already expired (an expired session is never revived).
  virtual SessionInfo heartbeat(std::string_view session_id) = 0;

  // heartbeat without holding the calling thread while the backend answers, where a backend can
  // (docs/adr/0024-asynchronous-store-calls.md). Returns false when it cannot for this session
  // now -- the caller then calls heartbeat -- having done nothing and left `done` alone. Returns
  // true when it has started: `done` (moved from) is then called exactly once, on any thread,
  // possibly before this returns, with heartbeat's answer or the exception heartbeat would have
  // thrown. Never waits for the backend. Every started call must have completed before the
  // backend is destroyed. The default cannot.
  using HeartbeatDone = std::function<void(std::optional<SessionInfo>, std::exception_ptr)>;
  virtual bool try_heartbeat_async(std::string_view session_id, HeartbeatDone& done) {
    (void)session_id;
    (void)done;
    return false;
  }

  // The live session, or std::nullopt. heartbeat and get_session report the session's
  // lock_delay as opened.
  virtual std::optional<SessionInfo> get_session(std::string_view session_id) = 0;

  // Visibility (C3 "Sessions"): the live sessions whose owner starts with `owner_prefix` and
  // whose ID is greater than `after` (a page's last ID; "" for the first page), ordered by ID, at
  // most `limit` of them.
  virtual std::vector<SessionInfo> list_sessions(std::string_view owner_prefix,
                                                 std::string_view after, std::size_t limit) = 0;
  // The live grants of `session_id` (every mode), ordered by key, then token; none for a session
  // that does not exist.
  virtual std::vector<LockInfo> session_grants(std::string_view session_id) = 0;

  // Closes the session and releases every lock it holds (exclusive, shared and permit holders),
  // session-bound or not; returns the released grants.
  // Throws SessionNotFoundError when the session does not exist or has expired.
  virtual std::vector<LockInfo> close_session(std::string_view session_id) = 0;
};

// One backend: the lock store and the session registry over the same storage.
class Backend : public LockStore, public SessionRegistry {};
using BackendPtr = std::unique_ptr<Backend>;

}  // namespace dlock
