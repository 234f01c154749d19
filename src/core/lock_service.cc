#include "core/lock_service.h"

#include <boost/asio/post.hpp>
#include <set>
#include <utility>

namespace dlock::core {

namespace asio = boost::asio;
using std::chrono::milliseconds;

struct LockService::Waiter {
  std::string session_id;
  std::string owner_id;
  milliseconds ttl{0};
  Callback<std::optional<LockHandle>> done;
  std::unique_ptr<asio::steady_timer> deadline;
  bool finished = false;  // guarded by mutex_: a waiter is answered exactly once
};

struct LockService::KeyQueue {
  std::deque<WaiterPtr> waiters;
  ReleaseSubscriptionPtr subscription;
  bool busy = false;   // a backend attempt for the head waiter is in flight
  bool again = false;  // a wake-up arrived while busy: try once more afterwards
  // The failure of the last backend attempt for this key, cleared by an attempt that decided
  // (granted or held). A waiter whose wait_ms ends while it is set is answered with it, never
  // "held": no backend decision was made (lock_store.h: a failure is never "held").
  std::exception_ptr last_failure;
  std::unique_ptr<asio::steady_timer> wake_timer;
};

namespace {

const char* outcome_label(const Outcome<std::optional<LockHandle>>& outcome) {
  if (outcome.error) return "error";
  return outcome.value && *outcome.value ? "granted" : "held";
}

}  // namespace

LockService::LockService(Backend& backend, asio::io_context& io, ServiceOptions options,
                         ServiceObserver& observer)
    : backend_(backend),
      io_(io),
      options_(options),
      observer_(observer),
      workers_(options.workers == 0 ? 1 : options.workers) {
  reap_timer_ = std::make_unique<asio::steady_timer>(io_);
  reap();
}

LockService::~LockService() {
  shutdown();
  workers_.join();
}

template <typename T, typename Work>
void LockService::run(Callback<T> done, Work work) {
  asio::post(workers_, [this, done = std::move(done), work = std::move(work)]() mutable {
    Outcome<T> outcome;
    try {
      outcome.value.emplace(work());
    } catch (...) {
      outcome.error = std::current_exception();
      report(outcome.error);
    }
    done(std::move(outcome));
  });
}

void LockService::report(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& failure) {
    if (failure.retryable() && failure.code() != ErrorCode::kResourceExhausted) {
      observer_.on_backend_error(failure);
    }
  } catch (...) {
  }
}

std::string LockService::owner_of(const std::string& session_id) {
  {
    std::lock_guard lock(mutex_);
    if (const auto found = owners_.find(session_id); found != owners_.end()) return found->second;
  }
  const auto session = backend_.get_session(session_id);
  if (!session) throw SessionNotFoundError("session " + session_id + " not found or expired");
  remember_owner(session_id, session->owner_id);
  return session->owner_id;
}

void LockService::remember_owner(const std::string& session_id, const std::string& owner_id) {
  std::lock_guard lock(mutex_);
  // A session's owner never changes, so the cache never goes stale; it only needs a bound.
  if (owners_.size() >= 1'000'000) owners_.clear();
  owners_[session_id] = owner_id;
}

void LockService::open_session(std::string owner_id, milliseconds ttl, Callback<SessionInfo> done) {
  run<SessionInfo>(std::move(done), [this, owner_id = std::move(owner_id), ttl] {
    {
      std::lock_guard lock(mutex_);
      if (local_sessions_.size() >= options_.max_sessions) prune_expired_sessions();
      if (local_sessions_.size() >= options_.max_sessions) {
        throw ResourceExhaustedError("too many open sessions (limit " +
                                     std::to_string(options_.max_sessions) + ")");
      }
    }
    auto session = backend_.open_session(owner_id, ttl);
    remember_owner(session.session_id, session.owner_id);
    std::lock_guard lock(mutex_);
    if (local_sessions_.insert_or_assign(session.session_id, session.expires_at).second) {
      observer_.on_sessions(+1);
    }
    return session;
  });
}

void LockService::prune_expired_sessions() {
  // Sessions that expired without this server hearing of it (closed or reaped through another
  // dlockd, or an etcd lease that lapsed) would otherwise count against the cap for ever. The
  // grace period absorbs clock skew between this host and the backend.
  const auto horizon = WallClock::now() - std::chrono::seconds(5);
  const auto before = local_sessions_.size();
  std::erase_if(local_sessions_, [&](const auto& entry) { return entry.second < horizon; });
  observer_.on_sessions(-static_cast<std::int64_t>(before - local_sessions_.size()));
}

void LockService::forget_session(const std::string& session_id) {
  std::lock_guard lock(mutex_);
  owners_.erase(session_id);
  if (local_sessions_.erase(session_id) > 0) observer_.on_sessions(-1);
}

void LockService::keepalive(std::string session_id, Callback<SessionInfo> done) {
  run<SessionInfo>(std::move(done), [this, session_id = std::move(session_id)] {
    try {
      auto session = backend_.heartbeat(session_id);
      std::lock_guard lock(mutex_);
      if (const auto found = local_sessions_.find(session_id); found != local_sessions_.end()) {
        found->second = session.expires_at;
      }
      return session;
    } catch (const SessionNotFoundError&) {
      forget_session(session_id);
      drop_waiters_of({session_id});
      throw;
    }
  });
}

void LockService::close_session(std::string session_id, Callback<std::vector<LockInfo>> done) {
  run<std::vector<LockInfo>>(std::move(done), [this, session_id = std::move(session_id)] {
    std::vector<LockInfo> released;
    try {
      released = backend_.close_session(session_id);
    } catch (const SessionNotFoundError&) {
      forget_session(session_id);
      drop_waiters_of({session_id});
      throw;
    }
    forget_session(session_id);
    drop_waiters_of({session_id});
    for (const auto& info : released) {
      observer_.on_release(info.key, info.fencing_token);
      pump(info.key);
    }
    return released;
  });
}

void LockService::acquire(std::string key, std::string session_id, milliseconds ttl,
                          milliseconds wait, Callback<std::optional<LockHandle>> done) {
  const auto started = SteadyClock::now();
  auto measured = [this, started,
                   done = std::move(done)](Outcome<std::optional<LockHandle>> outcome) {
    observer_.on_acquire(outcome_label(outcome), SteadyClock::now() - started);
    if (outcome.value && *outcome.value) observer_.on_grant(**outcome.value);
    done(std::move(outcome));
  };
  asio::post(workers_, [this, key = std::move(key), session_id = std::move(session_id), ttl, wait,
                        measured = std::move(measured)]() mutable {
    try {
      if (wait > options_.max_wait) {
        throw InvalidArgumentError(
            "wait_ms", "wait_ms must be at most " + std::to_string(options_.max_wait.count()));
      }
      const auto owner_id = owner_of(session_id);
      bool queued = false;
      {
        std::lock_guard lock(mutex_);
        const auto queue = queues_.find(key);
        queued = queue != queues_.end() && !queue->second.waiters.empty();
      }
      if (queued) {
        // First come, first served: nobody overtakes queued waiters, except the holder itself
        // re-acquiring (re-entrant: it would otherwise wait for its own lock).
        const auto holder = backend_.read(key);
        if (holder && holder->session_id == session_id) {
          observer_.on_backend_attempt();
          measured({backend_.try_insert(key, owner_id, session_id, ttl), nullptr});
          return;
        }
        if (wait.count() <= 0) {
          measured({std::optional<LockHandle>{}, nullptr});
          return;
        }
      } else if (wait.count() <= 0) {
        observer_.on_backend_attempt();
        measured({backend_.try_insert(key, owner_id, session_id, ttl), nullptr});
        return;
      }
      auto waiter = std::make_shared<Waiter>();
      waiter->session_id = session_id;
      waiter->owner_id = owner_id;
      waiter->ttl = ttl;
      waiter->done = measured;  // a copy: if enqueue refuses, `measured` still answers below
      // Only a new head makes an attempt: later arrivals wait their turn without touching the
      // backend (64 waiters must not mean 64 failing writes).
      if (enqueue(key, waiter, wait)) pump(key);
    } catch (...) {
      report(std::current_exception());
      measured({std::nullopt, std::current_exception()});
    }
  });
}

bool LockService::enqueue(const std::string& key, const WaiterPtr& waiter, milliseconds wait) {
  bool needs_subscription = false;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) throw UnavailableError("server is shutting down");
    if (waiters_ >= options_.max_waiters) {
      throw ResourceExhaustedError("too many waiters (limit " +
                                   std::to_string(options_.max_waiters) + ")");
    }
    const auto queue = queues_.find(key);
    needs_subscription = queue == queues_.end() || !queue->second.subscription;
  }
  // Subscribed before the first attempt, so a release between attempt and wait is not missed.
  ReleaseSubscriptionPtr subscription;
  if (needs_subscription) {
    subscription = backend_.watch_releases(
        key, [this, key] { asio::post(workers_, [this, key] { pump(key); }); });
  }
  std::lock_guard lock(mutex_);
  auto& queue = queues_[key];
  if (!queue.subscription) queue.subscription = std::move(subscription);
  waiter->deadline = std::make_unique<asio::steady_timer>(io_);
  queue.waiters.push_back(waiter);
  const bool is_head = queue.waiters.size() == 1;
  ++waiters_;
  observer_.on_waiters(+1);
  // At the deadline a still-queued waiter is answered "held", or the backend's failure when
  // the last attempt for the key failed.
  waiter->deadline->expires_after(wait);
  waiter->deadline->async_wait([this, key, weak = std::weak_ptr<Waiter>(waiter)](auto error) {
    if (error) return;
    asio::post(workers_, [this, key, weak] {
      const auto expired = weak.lock();
      if (!expired) return;
      std::exception_ptr failure;
      {
        std::lock_guard lock(mutex_);
        const auto queue = queues_.find(key);
        if (queue != queues_.end()) failure = queue->second.last_failure;
        if (!take_locked(key, expired)) return;
      }
      finish(expired, {std::optional<LockHandle>{}, failure});
    });
  });
  return is_head;
}

bool LockService::take_if_pending(const std::string& key, const WaiterPtr& waiter) {
  std::lock_guard lock(mutex_);
  return take_locked(key, waiter);
}

bool LockService::take_locked(const std::string& key, const WaiterPtr& waiter) {
  if (waiter->finished) return false;
  waiter->finished = true;
  --waiters_;
  observer_.on_waiters(-1);
  if (waiter->deadline) waiter->deadline->cancel();
  const auto queue = queues_.find(key);
  if (queue != queues_.end()) std::erase(queue->second.waiters, waiter);
  return true;
}

void LockService::give_back(const LockHandle& orphan) {
  try {
    backend_.delete_if_owner(orphan.key, orphan.owner_id, orphan.session_id, orphan.fencing_token);
    observer_.on_release(orphan.key, orphan.fencing_token);
  } catch (...) {
    // The grant then simply expires with its TTL; nobody holds a handle to it.
    report(std::current_exception());
  }
}

void LockService::finish(const WaiterPtr& waiter, Outcome<std::optional<LockHandle>> outcome) {
  waiter->done(std::move(outcome));
}

void LockService::drop_queue_if_idle(const std::string& key) {
  ReleaseSubscriptionPtr subscription;  // destroyed after the lock is released
  std::unique_ptr<asio::steady_timer> timer;
  {
    std::lock_guard lock(mutex_);
    const auto queue = queues_.find(key);
    if (queue == queues_.end() || queue->second.busy || !queue->second.waiters.empty()) return;
    subscription = std::move(queue->second.subscription);
    timer = std::move(queue->second.wake_timer);
    if (timer) timer->cancel();
    queues_.erase(queue);
  }
}

void LockService::drop_waiters_of(const std::vector<std::string>& session_ids) {
  if (session_ids.empty()) return;
  const std::set<std::string, std::less<>> ended(session_ids.begin(), session_ids.end());
  std::vector<std::pair<std::string, WaiterPtr>> dropped;
  {
    std::lock_guard lock(mutex_);
    if (waiters_ == 0) return;
    for (const auto& [key, queue] : queues_) {
      for (const auto& waiter : queue.waiters) {
        if (ended.contains(waiter->session_id)) dropped.emplace_back(key, waiter);
      }
    }
    // A head whose attempt is in flight is taken too: that attempt then finds it answered and
    // gives back whatever it was granted (the store refuses a dead session anyway, C2).
    std::erase_if(dropped,
                  [this](const auto& entry) { return !take_locked(entry.first, entry.second); });
  }
  std::set<std::string> keys;
  for (const auto& [key, waiter] : dropped) {
    finish(waiter, {std::nullopt, std::make_exception_ptr(SessionNotFoundError(
                                      "session " + waiter->session_id +
                                      " ended while waiting (closed or expired)"))});
    keys.insert(key);
  }
  // The next waiter may now be the head (or the queue empty, its subscription no longer needed).
  for (const auto& key : keys) pump(key);
}

std::vector<std::string> LockService::dead_waiting_sessions() {
  std::set<std::string> unsure;
  {
    std::lock_guard lock(mutex_);
    const auto now = WallClock::now();
    for (const auto& [key, queue] : queues_) {
      for (const auto& waiter : queue.waiters) {
        const auto known = local_sessions_.find(waiter->session_id);
        if (known == local_sessions_.end() || known->second <= now) {
          unsure.insert(waiter->session_id);
        }
      }
    }
  }
  std::vector<std::string> dead;
  for (const auto& session_id : unsure) {
    try {
      if (!backend_.get_session(session_id)) dead.push_back(session_id);
    } catch (...) {
      report(std::current_exception());  // unknown: the waiter keeps its place until next time
    }
  }
  return dead;
}

void LockService::pump(const std::string& key) {
  WaiterPtr head;
  {
    std::lock_guard lock(mutex_);
    const auto queue = queues_.find(key);
    if (queue == queues_.end()) return;
    if (queue->second.busy) {
      queue->second.again = true;
      return;
    }
    if (queue->second.waiters.empty()) {
      head = nullptr;
    } else {
      queue->second.busy = true;
      queue->second.again = false;
      head = queue->second.waiters.front();
    }
  }
  if (!head) {
    drop_queue_if_idle(key);
    return;
  }
  pump_locked_out(key, head);
}

// One backend attempt for the head waiter only: one write per wake-up, however many wait.
void LockService::pump_locked_out(const std::string& key, const WaiterPtr& head) {
  std::optional<LockHandle> granted;
  std::exception_ptr refused;
  try {
    observer_.on_backend_attempt();
    granted = backend_.try_insert(key, head->owner_id, head->session_id, head->ttl);
  } catch (const SessionNotFoundError&) {
    refused = std::current_exception();
  } catch (...) {
    report(std::current_exception());
    {
      std::lock_guard lock(mutex_);
      queues_[key].busy = false;
      queues_[key].last_failure = std::current_exception();
    }
    schedule_pump(key, options_.retry_backoff);  // transient: the head keeps its place
    return;
  }
  bool again = false;
  bool delivered = false;
  {
    std::lock_guard lock(mutex_);
    auto& queue = queues_[key];
    queue.last_failure = nullptr;  // the backend decided
    // Take the head out before clearing `busy`: otherwise another pump could find the same head
    // still queued and grant it again (a re-entrant acquire with a newer token), leaving the
    // waiter with a superseded token.
    if (granted || refused) delivered = take_locked(key, head);
    queue.busy = false;
    again = queue.again;
    queue.again = false;
  }
  if (granted) {
    if (delivered) {
      const auto expiry = granted->server_expiry;
      finish(head, {std::move(granted), nullptr});
      wake_at_expiry(key, expiry);  // the next waiter waits for this grant to end
    } else {
      give_back(*granted);  // the waiter gave up while its grant was in flight
      pump(key);
    }
  } else if (refused) {
    if (delivered) finish(head, {std::nullopt, refused});
    drop_waiters_of({head->session_id});  // its other keys' waits are just as dead
    pump(key);
  } else if (again) {
    pump(key);
  } else {
    arm_expiry_timer(key);
  }
}

bool LockService::has_waiters(const std::string& key) const {
  std::lock_guard lock(mutex_);
  const auto queue = queues_.find(key);
  return queue != queues_.end() && !queue->second.waiters.empty();
}

void LockService::arm_expiry_timer(const std::string& key) {
  if (!has_waiters(key)) {
    drop_queue_if_idle(key);
    return;
  }
  std::optional<LockInfo> holder;
  try {
    holder = backend_.read(key);
  } catch (...) {
    report(std::current_exception());
    schedule_pump(key, options_.retry_backoff);
    return;
  }
  if (!holder) {
    schedule_pump(key, milliseconds(10));  // freed in between: try again shortly
    return;
  }
  wake_at_expiry(key, holder->expires_at);
}

void LockService::wake_at_expiry(const std::string& key, WallClock::time_point expires_at) {
  if (!has_waiters(key)) {
    drop_queue_if_idle(key);
    return;
  }
  // The holder's expiry by the backend's clock, mapped onto the local monotonic clock. Only a
  // wake-up time: the attempt it triggers is what decides.
  const auto remaining = std::chrono::duration_cast<milliseconds>(expires_at - WallClock::now());
  schedule_pump(key, std::clamp(remaining + milliseconds(5), milliseconds(10),
                                milliseconds(std::chrono::hours(1))));
}

void LockService::schedule_pump(const std::string& key, milliseconds delay) {
  std::lock_guard lock(mutex_);
  const auto queue = queues_.find(key);
  if (queue == queues_.end() || stopping_) return;
  auto& timer = queue->second.wake_timer;
  if (!timer) timer = std::make_unique<asio::steady_timer>(io_);
  timer->expires_after(delay);
  timer->async_wait([this, key](auto error) {
    if (!error) asio::post(workers_, [this, key] { pump(key); });
  });
}

void LockService::extend(std::string key, std::string session_id, FencingToken token,
                         milliseconds ttl, Callback<LockHandle> done) {
  run<LockHandle>(std::move(done),
                  [this, key = std::move(key), session_id = std::move(session_id), token, ttl] {
                    LockHandle handle{key, owner_of(session_id), session_id, token, {}, {}};
                    return backend_.extend(handle, ttl);
                  });
}

void LockService::release(std::string key, std::string session_id, FencingToken token,
                          Callback<bool> done) {
  run<bool>(
      std::move(done), [this, key = std::move(key), session_id = std::move(session_id), token] {
        const LockHandle from{key, owner_of(session_id), session_id, token, {}, {}};
        WaiterPtr head;
        {
          std::lock_guard lock(mutex_);
          const auto queue = queues_.find(key);
          if (queue != queues_.end() && !queue->second.busy && !queue->second.waiters.empty()) {
            queue->second.busy = true;
            head = queue->second.waiters.front();
          }
        }
        if (!head) {
          if (!backend_.delete_if_owner(key, from.owner_id, session_id, token)) {
            throw LockLostError("lock " + key + " token " + std::to_string(token) +
                                " is not held by this session");
          }
          observer_.on_release(key, token);
          return true;
        }
        // A waiter on this server: release and re-grant in one backend operation.
        std::optional<LockHandle> next;
        try {
          observer_.on_backend_attempt();
          next = backend_.handover(from, head->owner_id, head->session_id, head->ttl);
        } catch (...) {
          {
            std::lock_guard lock(mutex_);
            queues_[key].last_failure = std::current_exception();
            queues_[key].busy = false;
          }
          pump(key);
          throw;
        }
        bool delivered = false;
        {
          // As in pump_locked_out: the head leaves the queue before `busy` is cleared.
          std::lock_guard lock(mutex_);
          delivered = take_locked(key, head);
          queues_[key].busy = false;
        }
        observer_.on_release(key, token);
        if (!next) {
          // The waiter's session died while it waited: the lock was simply released.
          if (delivered) {
            finish(head, {std::nullopt, std::make_exception_ptr(SessionNotFoundError(
                                            "session expired while waiting"))});
          }
          drop_waiters_of({head->session_id});
          pump(key);
        } else if (delivered) {
          const auto expiry = next->server_expiry;
          finish(head, {std::move(next), nullptr});
          wake_at_expiry(key, expiry);
        } else {
          give_back(*next);
          pump(key);
        }
        return true;
      });
}

void LockService::read(std::string key, Callback<std::optional<LockInfo>> done) {
  run<std::optional<LockInfo>>(std::move(done),
                               [this, key = std::move(key)] { return backend_.read(key); });
}

void LockService::list(std::string prefix, std::size_t limit,
                       Callback<std::vector<LockInfo>> done) {
  run<std::vector<LockInfo>>(std::move(done), [this, prefix = std::move(prefix), limit] {
    return backend_.list(prefix, limit);
  });
}

void LockService::revoke(std::string key, Callback<LockOutcome> done) {
  run<LockOutcome>(std::move(done), [this, key = std::move(key)] {
    auto outcome = backend_.revoke(key);
    pump(key);
    return outcome;
  });
}

void LockService::reap() {
  reap_timer_->expires_after(options_.reap_interval);
  reap_timer_->async_wait([this](auto error) {
    if (error) return;
    asio::post(workers_, [this] {
      try {
        const auto report_ = backend_.reap_expired();
        for (const auto& info : report_.expired_locks) {
          observer_.on_expiry(info);
          pump(info.key);
        }
        for (const auto& session : report_.expired_sessions) {
          observer_.on_session_lost(session);
          forget_session(session);
        }
        drop_waiters_of(report_.expired_sessions);
        // Stores do not report every ended session (an etcd session lease that lapsed with no
        // grant, a session closed through another dlockd): ask about the waiting ones.
        drop_waiters_of(dead_waiting_sessions());
      } catch (...) {
        report(std::current_exception());
      }
      std::lock_guard lock(mutex_);
      if (!stopping_) reap();
    });
  });
}

void LockService::shutdown() {
  std::map<std::string, KeyQueue, std::less<>> queues;
  std::vector<WaiterPtr> answered;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    reap_timer_->cancel();
    for (auto& [key, queue] : queues_) {
      if (queue.wake_timer) queue.wake_timer->cancel();
      for (auto& waiter : queue.waiters) {
        if (waiter->finished) continue;
        waiter->finished = true;
        if (waiter->deadline) waiter->deadline->cancel();
        answered.push_back(waiter);
      }
      observer_.on_waiters(-static_cast<std::int64_t>(queue.waiters.size()));
      queue.waiters.clear();
    }
    waiters_ = 0;
    queues.swap(queues_);
  }
  for (auto& waiter : answered) {
    finish(waiter,
           {std::nullopt, std::make_exception_ptr(UnavailableError("server is shutting down"))});
  }
}

}  // namespace dlock::core
