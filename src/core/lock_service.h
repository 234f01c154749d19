#pragma once

// The backend-agnostic lock service behind dlockd: runs blocking store calls on a worker pool,
// keeps first-come first-served waiter queues per key, wakes the head waiter (only the head:
// no thundering herd) on a release seen by the store's watch_releases, at the holder's
// expiry, or on a local release — which hands the lock over in one store operation.

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "dlock/lock_store.h"

namespace dlock::core {

struct ServiceOptions {
  std::size_t workers = 8;
  std::chrono::milliseconds max_wait{std::chrono::minutes(5)};
  std::size_t max_waiters = 100000;
  // Sessions opened through this server and not yet closed or expired.
  std::size_t max_sessions = 100000;
  std::chrono::milliseconds reap_interval{1000};
  // How long a waiter's wake-up is deferred after a failed backend call.
  std::chrono::milliseconds retry_backoff{200};
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
  // One backend write that may grant a lock (try_insert or handover).
  virtual void on_backend_attempt() = 0;
};

// Either a value or the exception a store call threw.
template <typename T>
struct Outcome {
  std::optional<T> value;
  std::exception_ptr error;
};

class LockService {
 public:
  template <typename T>
  using Callback = std::function<void(Outcome<T>)>;

  LockService(Backend& backend, boost::asio::io_context& io, ServiceOptions options,
              ServiceObserver& observer);
  LockService(const LockService&) = delete;
  LockService& operator=(const LockService&) = delete;
  ~LockService();

  // Every method returns at once; the callback runs later on a worker thread.
  void open_session(std::string owner_id, std::chrono::milliseconds ttl,
                    Callback<SessionInfo> done);
  void keepalive(std::string session_id, Callback<SessionInfo> done);
  void close_session(std::string session_id, Callback<std::vector<LockInfo>> done);

  // Grants `key` to the session, waiting at most `wait` behind earlier waiters. An empty
  // optional value (with no error) means "held".
  void acquire(std::string key, std::string session_id, std::chrono::milliseconds ttl,
               std::chrono::milliseconds wait, Callback<std::optional<LockHandle>> done);
  void extend(std::string key, std::string session_id, FencingToken token,
              std::chrono::milliseconds ttl, Callback<LockHandle> done);
  // Value true: released. Throws (in the outcome) LockLostError when not the live grant.
  void release(std::string key, std::string session_id, FencingToken token, Callback<bool> done);
  void read(std::string key, Callback<std::optional<LockInfo>> done);
  void list(std::string prefix, std::size_t limit, Callback<std::vector<LockInfo>> done);
  void revoke(std::string key, Callback<LockOutcome> done);

  std::string_view backend_id() const { return backend_.backend_id(); }

  // Answers every waiter with UnavailableError("shutting down") and stops the reaper. Calls
  // already running finish; the worker pool is joined by the destructor.
  void shutdown();

 private:
  struct Waiter;
  struct KeyQueue;
  using WaiterPtr = std::shared_ptr<Waiter>;

  template <typename T, typename Work>
  void run(Callback<T> done, Work work);

  std::string owner_of(const std::string& session_id);
  void remember_owner(const std::string& session_id, const std::string& owner_id);
  void forget_session(const std::string& session_id);
  void prune_expired_sessions();  // under mutex_

  // Queues the waiter; true when it is now the head of its key's queue.
  bool enqueue(const std::string& key, const WaiterPtr& waiter, std::chrono::milliseconds wait);
  bool has_waiters(const std::string& key) const;
  void wake_at_expiry(const std::string& key, WallClock::time_point expires_at);
  void pump(const std::string& key);
  void pump_locked_out(const std::string& key, const WaiterPtr& head);
  void schedule_pump(const std::string& key, std::chrono::milliseconds delay);
  void arm_expiry_timer(const std::string& key);
  // Releases a grant made for a waiter that had already given up; never throws.
  void give_back(const LockHandle& orphan);
  void finish(const WaiterPtr& waiter, Outcome<std::optional<LockHandle>> outcome);
  // Answers-to-be: removes a still-pending waiter from its queue; false if already answered.
  bool take_if_pending(const std::string& key, const WaiterPtr& waiter);
  bool take_locked(const std::string& key, const WaiterPtr& waiter);  // under mutex_
  void drop_queue_if_idle(const std::string& key);
  // Answers every queued waiter of these sessions with SessionNotFoundError at once: a waiter
  // whose session ended must neither keep its place (and the gauge) nor ever be granted.
  void drop_waiters_of(const std::vector<std::string>& session_ids);
  // The waiting sessions this server cannot vouch for (opened elsewhere, or past the expiry it
  // last saw) that the backend no longer has; called by the reaper.
  std::vector<std::string> dead_waiting_sessions();
  void reap();
  void report(const std::exception_ptr& error);

  Backend& backend_;
  boost::asio::io_context& io_;
  const ServiceOptions options_;
  ServiceObserver& observer_;
  boost::asio::thread_pool workers_;

  mutable std::mutex mutex_;  // guards everything below
  std::map<std::string, KeyQueue, std::less<>> queues_;
  std::size_t waiters_ = 0;
  bool stopping_ = false;
  std::unordered_map<std::string, std::string> owners_;  // session id -> owner (immutable)
  // Sessions opened here and their last known expiry, for max_sessions and the gauge.
  std::unordered_map<std::string, WallClock::time_point> local_sessions_;
  std::unique_ptr<boost::asio::steady_timer> reap_timer_;
};

}  // namespace dlock::core
