#pragma once

// The backend-agnostic lock service behind dlockd: runs blocking store calls on a worker pool,
// keeps first-come first-served waiter queues per key, wakes the head waiter (only the head:
// no thundering herd) on a release seen by the store's watch_releases, at the holder's
// expiry, or on a local release — which hands the lock over in one store operation.
// The per-key queue decisions live in WaiterQueue (waiter_queue.h), the session bookkeeping
// and caps in SessionBook (session_book.h); this class acts on them. Its definitions are in two
// files: lock_service_waiting.cc has acquire and everything a queue does (wait_in_queue through
// check_holder below: the pump, attempts, deadlines, the known holder, ended sessions' waiters);
// lock_service.cc has the rest (sessions, release and hand-over, the reaper, the other calls).

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/cancellation.h"
#include "core/observation.h"
#include "core/session_book.h"
#include "core/time_source.h"
#include "core/waiter_queue.h"
#include "core/watch_log.h"
#include "dlock/lock_store.h"

namespace dlock::core {

struct ServiceOptions {
  std::size_t workers = 8;
  std::chrono::milliseconds max_wait{std::chrono::minutes(5)};
  std::size_t max_waiters = 100000;
  // Sessions opened through this server and not yet closed or expired.
  std::size_t max_sessions = 100000;
  // The same per principal (open_session's `principal`); 0: none.
  std::size_t max_sessions_per_principal = 0;
  std::chrono::milliseconds reap_interval{1000};
  // How long a waiter's wake-up is deferred after a failed backend call.
  std::chrono::milliseconds retry_backoff{200};
  // The watch's event ring (WatchLog, ADR-0032): how many events it keeps, and this process's
  // mark in positions ("" : a random one).
  std::size_t watch_events = 10000;
  std::string watch_epoch;
  // Every clock read and timer of the service (ADR-0034); null: real time, timers on the
  // io_context. Not owned: it outlives the service.
  TimeSource* time = nullptr;
};

// Events the service reports for logs and metrics; implemented by the server.
class ServiceObserver {
 public:
  virtual ~ServiceObserver() = default;
  virtual void on_acquire(std::string_view outcome, std::chrono::nanoseconds latency) = 0;
  virtual void on_grant(const LockHandle& handle) = 0;
  virtual void on_release(std::string_view key, FencingToken token) = 0;
  virtual void on_expiry(const LockInfo& info) = 0;
  virtual void on_session_lost(std::string_view session_id) = 0;
  virtual void on_backend_error(const Error& error) = 0;
  virtual void on_waiters(std::int64_t delta) = 0;
  virtual void on_sessions(std::int64_t delta) = 0;
  // One backend write that may grant a lock (try_grant or handover), counted when it has returned
  // and, for a waiter's attempt or a hand-over, once its queue has ended the attempt.
  virtual void on_backend_attempt() = 0;
};

class LockService {
 public:
  template <typename T>
  using Callback = std::function<void(Outcome<T>)>;

  // `io` runs the service's timers unless options.time is set.
  LockService(Backend& backend, boost::asio::io_context& io, ServiceOptions options,
              ServiceObserver& observer);
  LockService(const LockService&) = delete;
  LockService& operator=(const LockService&) = delete;
  ~LockService();

  // Every method returns at once; the callback runs later on a worker thread — except a
  // waiter's answer at its wait_ms, which runs on the io_context's thread, so that it comes on
  // time even while every worker is blocked in a store call (ADR-0007 "Deadlines"), and a
  // keepalive's successful answer from a backend that heartbeats asynchronously
  // (Backend::try_heartbeat_async), which runs on that backend's thread.
  // `principal` ("" without authentication) is what the session counts against in
  // max_sessions_per_principal (contract C6).
  // `lock_delay`: the session's lock-delay (C2 "Lock-delay"), already checked.
  void open_session(std::string owner_id, std::chrono::milliseconds ttl, Callback<SessionInfo> done,
                    std::string principal = {},
                    std::chrono::milliseconds lock_delay = std::chrono::milliseconds(0));
  // The owner the backend recorded for the session (cached: it never changes); the error
  // SessionNotFoundError when there is no such live session. The server checks ownership
  // with it before acting on a session (ADR-0016).
  void session_owner(std::string session_id, Callback<std::string> done);
  // The same answer when this server has the owner cached (nullopt otherwise: ask
  // session_owner), at once on the calling thread: no store call, no hop to the worker pool.
  std::optional<std::string> cached_session_owner(const std::string& session_id) const {
    return sessions_.owner(session_id);
  }
  void keepalive(std::string session_id, Callback<SessionInfo> done);
  void close_session(std::string session_id, Callback<std::vector<LockInfo>> done);
  // Visibility (C3 "Sessions"): live sessions by owner prefix in ID pages, and one session with
  // what it holds (SessionNotFoundError when it is not live).
  void list_sessions(std::string owner_prefix, std::string after, std::size_t limit,
                     Callback<std::vector<SessionInfo>> done);
  struct SessionView {
    SessionInfo session;
    std::vector<LockInfo> holds;
  };
  void describe_session(std::string session_id, Callback<SessionView> done);
  // The keys `session_id` waits for on this dlockd, with its place in each queue (1 = head).
  struct SessionWait {
    std::string key;
    GrantRequest request;
    std::size_t position = 0;
    std::chrono::milliseconds waiting{0};
  };
  std::vector<SessionWait> waits_of(const std::string& session_id);

  // Grants `key` to the session as `request` asks, waiting at most `wait` behind earlier waiters.
  // An empty optional value (with no error) means "held". The request's lease: a TTL, or
  // LockLease::session() for a grant that lives as long as the session (ADR-0018).
  // `cancellation` (may be null) ties the request to its client's connection (ADR-0007 "A wait
  // belongs to its connection"): cancelled while waiting, the waiter leaves its queue at once
  // and is answered as at its deadline ("held"); cancelled after a grant (the answer could not
  // be delivered), the grant is given back and the key's next waiter attempted.
  // `request`: exclusive, a shared holder, one permit of N, or a leader (ADR-0020); the queue is
  // one per key, first come first served across modes.
  void acquire(std::string key, std::string session_id, GrantRequest request,
               std::chrono::milliseconds wait, Callback<std::optional<LockHandle>> done,
               CancellationPtr cancellation = nullptr);
  // Elections (ADR-0020): a campaign is acquire of a session-bound leader request;
  // proclaim replaces the leading grant's value (same token); resign is release.
  void proclaim(std::string key, std::string session_id, FencingToken token, std::string value,
                Callback<LockInfo> done);
  // Observes `key`'s election: answers as soon as `satisfied(read(key))` or when `wait` has
  // passed (with the state then), waking on the store's watch_releases notifications only
  // (no polling), one read per wake-up. `cancellation` (may be null) ends it early (answered
  // UnavailableError, which nobody reads). Counted against max_waiters.
  void observe(std::string key, std::function<bool(const std::optional<LockInfo>&)> satisfied,
               std::chrono::milliseconds wait, Callback<std::optional<LockInfo>> done,
               CancellationPtr cancellation = nullptr);
  // Every live holder of the key (one exclusive grant, or its shared or permit holders).
  void read_holders(std::string key, Callback<std::vector<LockInfo>> done);
  void extend(std::string key, std::string session_id, FencingToken token,
              std::chrono::milliseconds ttl, Callback<LockHandle> done);
  // Value true: released. Throws (in the outcome) LockLostError when not the live grant.
  void release(std::string key, std::string session_id, FencingToken token, Callback<bool> done);
  void read(std::string key, Callback<std::optional<LockInfo>> done);
  // A page of the grants under `prefix` after `after` (LockStore::list).
  void list(std::string prefix, ListAfter after, std::size_t limit,
            Callback<std::vector<LockInfo>> done);
  void revoke(std::string key, Callback<LockOutcome> done);
  // The acquires waiting for `key` on this dlockd, in queue order (there is no common queue
  // across several dlockd, C3): answered at once, from memory.
  struct QueuedWaiter {
    std::string session_id;
    std::string owner_id;
    GrantRequest request;
    std::chrono::milliseconds waiting{0};
  };
  std::vector<QueuedWaiter> waiters(const std::string& key);
  // How many acquires wait for each of `keys` on this service, in order: one look under the
  // lock for a whole list page (GET /v1/locks "waiting").
  std::vector<std::size_t> waiting_counts(const std::vector<std::string>& keys);
  // Lock-delay (C2 "Lock-delay"): the keys under `prefix` a delay keeps from new grants, and an
  // administrator's end of `key`'s delays (its waiters are tried again at once).
  void list_delays(std::string prefix, std::string after, std::size_t limit,
                   Callback<std::vector<KeyDelay>> done);
  void clear_delay(std::string key, Callback<bool> done);

  // Whether a waiter may (still) wait for `key`, from its session's stored owner: null, or the
  // error it is answered with. The server's rule (C6: a principal removed from the tokens file,
  // or no longer allowed to lock in the key's namespace); the service reads no owner format.
  using WaiterCheck =
      std::function<std::exception_ptr(std::string_view owner, std::string_view key)>;
  // A reload of the tokens file (C6): from now on `check` decides for every waiter as it queues,
  // and now for every queued one; each it refuses is answered with its error and leaves its queue
  // (the next waiter moves up). `done` gets the stored owners of the waiters answered.
  void recheck_waiters(WaiterCheck check, Callback<std::vector<std::string>> done);
  // The sessions this server knows (opened or used through it since it started: their owners are
  // cached) whose stored owner `chosen` picks.
  std::vector<std::string> known_sessions(
      const std::function<bool(std::string_view owner)>& chosen) const {
    return sessions_.sessions_of(chosen);
  }

  std::string_view backend_id() const { return backend_.backend_id(); }
  // The events of the locks this dlockd serves (C3 "Watch").
  WatchLog& watch_log() { return watch_; }

  // Answers every waiter with UnavailableError("shutting down") and stops the reaper. Calls
  // already running finish; the worker pool is joined by the destructor.
  void shutdown();

 private:
  // One key's queue and what the service keeps beside it. Held by shared_ptr so that a waiting
  // acquire and its timers look the key up once; `dropped` tells them it left queues_.
  struct KeyState {
    explicit KeyState(std::string name) : key(std::move(name)) {}
    const std::string key;
    WaiterQueue queue;                    // guarded by mutex_, as is everything below
    ReleaseSubscriptionPtr subscription;  // a release of `key` seen by the store: pump
    TimerPtr wake_timer;                  // the holder's expiry, or a retry
    bool dropped = false;
    // The key's exclusive holder as this service last learnt it (ADR-0036): an acquire that
    // joins the queue learns from it whether it is the holder re-acquiring, without reading the
    // store. Learnt from this service's grants and hand-overs and from reads; forgotten by every
    // release, revoke and reaped expiry this service makes and by every release or other
    // holder's grant the store reports (watch_releases); trusted until the grant's expiry.
    struct KnownHolder {
      std::string session_id;
      FencingToken token = 0;
      WallClock::time_point expires_at;
    };
    std::optional<KnownHolder> holder;
    std::uint64_t holder_version = 0;  // bumped by every change of `holder`
  };
  using KeyStatePtr = std::shared_ptr<KeyState>;
  // What dropping an idle queue leaves to destroy once mutex_ is released.
  struct Dropped {
    ReleaseSubscriptionPtr subscription;
    TimerPtr timer;
  };

  template <typename T, typename Work>
  void run(Callback<T> done, Work work);

  // One backend write that may grant `key`: the store's try_grant.
  std::optional<LockHandle> try_grant(const std::string& key, const std::string& owner_id,
                                      const std::string& session_id, const GrantRequest& request);

  std::string owner_of(const std::string& session_id);
  void forget_session(const std::string& session_id);

  // Queues the waiter behind earlier ones and, when it is the new head, makes its attempt.
  void wait_in_queue(const std::string& key, const WaiterPtr& waiter,
                     std::chrono::milliseconds wait, const CancellationPtr& cancellation);
  // A waiter ended early (its deadline, or its connection closed: `cancelled`): answered "held",
  // or the last attempt's failure, unless already answered — or, at its deadline while its
  // attempt is in flight, by that attempt (WaiterQueue::give_up).
  void give_up(const std::weak_ptr<KeyState>& weak_state, const std::weak_ptr<Waiter>& weak,
               bool cancelled);
  // One backend attempt for the head waiter of the key, if none is in flight.
  void pump(const std::string& key);
  void pump(const KeyStatePtr& state);
  void attempt(const KeyStatePtr& state, const WaiterPtr& head);
  // Acts on a decided attempt (try_grant or handover) for `head`: answers it when `delivered`
  // (granted, or refused with `refused`), gives an orphan grant back, and moves the queue on.
  // `session_ended`: the refusal was the head's session ending, so its other waits end too.
  void deliver(const KeyStatePtr& state, const WaiterPtr& head, bool delivered,
               std::optional<LockHandle> granted, std::exception_ptr refused,
               bool session_ended = true);
  void arm_expiry_timer(const KeyStatePtr& state, bool waiting);
  // Under mutex_: whether `session_id` holds the key, when `state` knows its holder.
  std::optional<bool> known_holder(const KeyState& state, const std::string& session_id) const;
  // Under mutex_: `holders`, read from the store, are the key's holders, unless the known holder
  // changed since `version` (a read that a release overtook).
  void learn_holders(KeyState& state, std::uint64_t version, const std::vector<LockInfo>& holders);
  // Under mutex_: this service granted `granted`.
  void learn_holder(KeyState& state, const LockHandle& granted);
  // A grant of `key` ended or may have: what this service knew of its holder is stale.
  void forget_holder(const std::string& key);
  // The store reported `key` (watch_releases): a possible release (granted 0) pumps the queue;
  // another holder's grant (not the known one, with no attempt of ours in flight to explain it)
  // makes the key's holder unknown and is checked by one read (check_holder). On a worker.
  void store_reported(const std::string& key, FencingToken granted);
  // Reads the key's holder and learns it; a waiter of the holder's own session, queued while the
  // holder was not known to be it, moves to the front (WaiterQueue::promote) and is attempted.
  void check_holder(const KeyStatePtr& state);
  // Under mutex_ (as check_holder, from a read that started at `version`): true when a waiter
  // moved to the front and the queue must be pumped.
  bool learn_read_holder(KeyState& state, std::uint64_t version,
                         const std::optional<LockInfo>& holder);
  void wake_at_expiry(const KeyStatePtr& state, WallClock::time_point expires_at);
  // Pumps the queue after `delay`, or drops it now if nobody waits.
  void schedule_pump(const KeyStatePtr& state, std::chrono::milliseconds delay);
  void drop_if_idle(const KeyStatePtr& state);
  void drop_locked(KeyState& state, Dropped& dropped);  // under mutex_
  void count_answered(std::size_t count);               // under mutex_
  // Releases a grant made for a waiter that had already given up; never throws.
  void give_back(const LockHandle& orphan);
  // The same for a grant whose answer did not reach its client (its cancellation fired after
  // the grant), then attempts for the key's next waiter; on a worker.
  void give_back_undelivered(const LockHandle& orphan);
  // Answers every queued waiter of these sessions with SessionNotFoundError at once: a waiter
  // whose session ended must neither keep its place (and the gauge) nor ever be granted.
  void drop_waiters_of(const std::vector<std::string>& session_ids);
  // The waiting sessions this server cannot vouch for (opened elsewhere, or past the expiry it
  // last saw) that the backend no longer has; called by the reaper.
  std::vector<std::string> dead_waiting_sessions();
  void reap();
  void report(const std::exception_ptr& error);
  // A grant ended by a release (or given back): reported to the observer and the watch, and no
  // longer the key's known holder.
  void note_release(const std::string& key, FencingToken token, const std::string& owner_id,
                    const std::string& session_id);
  void note(WatchKind kind, const std::string& key, FencingToken token, const std::string& owner_id,
            const std::string& session_id, HoldMode mode = HoldMode::kExclusive,
            std::string reason = {});

  Backend& backend_;
  const ServiceOptions options_;
  ServiceObserver& observer_;
  std::unique_ptr<TimeSource> real_time_;  // when options.time is null
  TimeSource& time_;
  SessionBook sessions_;  // its own lock
  WatchLog watch_;        // its own lock
  boost::asio::thread_pool workers_;
  // Heartbeats started with Backend::try_heartbeat_async and not yet answered: the destructor
  // waits for them (their answers come on the backend's threads and use this service).
  std::mutex async_mutex_;
  std::condition_variable async_idle_;
  std::size_t async_in_flight_ = 0;

  mutable std::mutex mutex_;  // guards everything below
  std::map<std::string, KeyStatePtr, std::less<>> queues_;
  std::size_t waiters_ = 0;
  // Live elections' observers, by id: each leaves when answered (shutdown answers the rest).
  std::unordered_map<std::uint64_t, std::weak_ptr<Observation>> observations_;
  std::uint64_t next_observation_ = 0;
  bool stopping_ = false;
  TimerPtr reap_timer_;
  WaiterCheck waiter_check_;  // set by recheck_waiters
};

}  // namespace dlock::core
