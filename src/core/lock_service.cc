#include "core/lock_service.h"

#include <boost/asio/post.hpp>
#include <cstdio>
#include <random>
#include <set>
#include <unordered_map>
#include <utility>

namespace dlock::core {

namespace asio = boost::asio;
using std::chrono::milliseconds;

namespace {

// A mark no earlier process of this dlockd (nor another dlockd) is likely to have had: 64 bits.
std::string random_epoch() {
  std::random_device device;
  const auto value = (std::uint64_t{device()} << 32) | device();
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

LockService::LockService(Backend& backend, asio::io_context& io, ServiceOptions options,
                         ServiceObserver& observer)
    : backend_(backend),
      options_(options),
      observer_(observer),
      real_time_(options.time ? nullptr : std::make_unique<AsioTimeSource>(io)),
      time_(options.time ? *options.time : *real_time_),
      sessions_(SessionLimits{options.max_sessions, options.max_sessions_per_principal}),
      watch_(time_, options.watch_events,
             options.watch_epoch.empty() ? random_epoch() : options.watch_epoch),
      workers_(options.workers == 0 ? 1 : options.workers) {
  reap_timer_ = time_.make_timer();
  reap();
}

LockService::~LockService() {
  shutdown();
  {
    std::unique_lock lock(async_mutex_);
    async_idle_.wait(lock, [this] { return async_in_flight_ == 0; });
  }
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

void LockService::note(WatchKind kind, const std::string& key, FencingToken token,
                       const std::string& owner_id, const std::string& session_id, HoldMode mode,
                       std::string reason) {
  watch_.record(WatchEvent{.seq = 0,
                           .kind = kind,
                           .key = key,
                           .token = token,
                           .owner_id = owner_id,
                           .session_id = session_id,
                           .mode = mode,
                           .at = time_.wall_now(),
                           .reason = std::move(reason)});
}

void LockService::note_release(const std::string& key, FencingToken token,
                               const std::string& owner_id, const std::string& session_id) {
  forget_holder(key);
  observer_.on_release(key, token);
  note(WatchKind::kRelease, key, token, owner_id, session_id);
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

// --- sessions ---------------------------------------------------------------------------------

std::string LockService::owner_of(const std::string& session_id) {
  if (auto owner = sessions_.owner(session_id)) return std::move(*owner);
  const auto session = backend_.get_session(session_id);
  if (!session) throw SessionNotFoundError("session " + session_id + " not found or expired");
  sessions_.remember_owner(session_id, session->owner_id);
  return session->owner_id;
}

void LockService::open_session(std::string owner_id, milliseconds ttl, Callback<SessionInfo> done,
                               std::string principal, milliseconds lock_delay) {
  run<SessionInfo>(std::move(done), [this, owner_id = std::move(owner_id), ttl,
                                     principal = std::move(principal), lock_delay] {
    // The check and a held place in one step: concurrent opens cannot all pass the caps.
    const auto capacity = sessions_.reserve(principal, time_.wall_now());
    if (capacity.pruned > 0) observer_.on_sessions(-static_cast<std::int64_t>(capacity.pruned));
    if (!capacity.refusal.empty()) throw ResourceExhaustedError(capacity.refusal);
    SessionInfo session;
    try {
      session = backend_.open_session(owner_id, ttl, lock_delay);
    } catch (...) {
      sessions_.release_reservation(principal);
      throw;
    }
    sessions_.remember_owner(session.session_id, session.owner_id);
    if (sessions_.add(session.session_id, principal, session.expires_at, true)) {
      observer_.on_sessions(+1);
    }
    return session;
  });
}

void LockService::session_owner(std::string session_id, Callback<std::string> done) {
  run<std::string>(std::move(done),
                   [this, session_id = std::move(session_id)] { return owner_of(session_id); });
}

void LockService::forget_session(const std::string& session_id) {
  if (sessions_.forget(session_id)) observer_.on_sessions(-1);
}

void LockService::keepalive(std::string session_id, Callback<SessionInfo> done) {
  // Without a worker where the backend can (docs/adr/0024): the answer comes on the backend's
  // thread; a failure is handled on a worker, as below.
  struct State {
    std::string session_id;
    Callback<SessionInfo> done;
  };
  auto state = std::make_shared<State>(State{std::move(session_id), std::move(done)});
  {
    std::lock_guard lock(async_mutex_);
    ++async_in_flight_;
  }
  const auto settled = [this] {
    std::lock_guard lock(async_mutex_);
    if (--async_in_flight_ == 0) async_idle_.notify_all();
  };
  SessionRegistry::HeartbeatDone answered =
      [this, state, settled](std::optional<SessionInfo> session, std::exception_ptr error) {
        if (session) {
          sessions_.renew(state->session_id, session->expires_at);
          Outcome<SessionInfo> outcome;
          outcome.value = std::move(session);
          state->done(std::move(outcome));
          return settled();
        }
        asio::post(workers_, [this, state, error, settled] {
          try {
            std::rethrow_exception(error);
          } catch (const SessionNotFoundError&) {
            forget_session(state->session_id);
            drop_waiters_of({state->session_id});
          } catch (...) {
          }
          report(error);
          Outcome<SessionInfo> outcome;
          outcome.error = error;
          state->done(std::move(outcome));
          settled();
        });
      };
  if (backend_.try_heartbeat_async(state->session_id, answered)) return;
  settled();
  run<SessionInfo>(std::move(state->done), [this, session_id = std::move(state->session_id)] {
    try {
      auto session = backend_.heartbeat(session_id);
      sessions_.renew(session_id, session.expires_at);
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
      note_release(info.key, info.fencing_token, info.owner_id, info.session_id);
      pump(info.key);
    }
    return released;
  });
}

// --- the other calls ------------------------------------------------------------------------

void LockService::extend(std::string key, std::string session_id, FencingToken token,
                         milliseconds ttl, Callback<LockHandle> done) {
  run<LockHandle>(std::move(done), [this, key = std::move(key), session_id = std::move(session_id),
                                    token, ttl] {
    return backend_.extend(GrantRef{key, owner_of(session_id), session_id, token}, ttl);
  });
}

void LockService::proclaim(std::string key, std::string session_id, FencingToken token,
                           std::string value, Callback<LockInfo> done) {
  run<LockInfo>(std::move(done), [this, key = std::move(key), session_id = std::move(session_id),
                                  token, value = std::move(value)] {
    return backend_.proclaim(GrantRef{key, owner_of(session_id), session_id, token}, value);
  });
}

void LockService::observe(std::string key,
                          std::function<bool(const std::optional<LockInfo>&)> satisfied,
                          milliseconds wait, Callback<std::optional<LockInfo>> done,
                          CancellationPtr cancellation) {
  if (wait.count() <= 0) {
    return run<std::optional<LockInfo>>(
        std::move(done), [this, key = std::move(key)] { return backend_.read(key); });
  }
  ObservationPtr observation;
  {
    std::lock_guard lock(mutex_);
    std::exception_ptr refused;
    if (stopping_) {
      refused = std::make_exception_ptr(UnavailableError("server is shutting down"));
    } else if (wait > options_.max_wait) {
      refused = std::make_exception_ptr(InvalidArgumentError(
          "wait_ms", "wait_ms must be at most " + std::to_string(options_.max_wait.count())));
    } else if (observations_.size() >= options_.max_waiters) {
      // Observers hold a subscription and a connection each, as waiters do: the same cap.
      refused = std::make_exception_ptr(ResourceExhaustedError(
          "too many observers (limit " + std::to_string(options_.max_waiters) + ")"));
    }
    if (refused) {
      asio::post(workers_, [done = std::move(done), refused] { done({std::nullopt, refused}); });
      return;
    }
    // An answered observation leaves the registry at once, so the cap above is O(1) (C6: a
    // rejection at a cap never scans under the service-wide lock).
    const auto id = next_observation_++;
    auto leave = [this, id, done = std::move(done)](Outcome<std::optional<LockInfo>> outcome) {
      {
        std::lock_guard lock(mutex_);
        observations_.erase(id);
      }
      done(std::move(outcome));
    };
    observation = std::make_shared<Observation>(backend_, workers_, time_, std::move(key),
                                                std::move(satisfied), std::move(leave));
    observations_.emplace(id, observation);
  }
  if (cancellation) {
    cancellation->arm_watched([weak = std::weak_ptr<Observation>(observation)] {
      if (auto alive = weak.lock()) alive->abandon();
    });
  }
  observation->start(wait);
}

void LockService::release(std::string key, std::string session_id, FencingToken token,
                          Callback<bool> done) {
  run<bool>(std::move(done), [this, key = std::move(key), session_id = std::move(session_id),
                              token] {
    const GrantRef from{key, owner_of(session_id), session_id, token};
    KeyStatePtr state;
    WaiterPtr head;
    {
      std::lock_guard lock(mutex_);
      const auto found = queues_.find(key);
      if (found != queues_.end()) {
        state = found->second;
        head = state->queue.begin_handover();
      }
    }
    const auto plain_release = [&] {
      if (!backend_.delete_if_owner(from)) {
        throw LockLostError("lock " + key + " token " + std::to_string(token) +
                            " is not held by this session");
      }
      note_release(key, token, from.owner_id, session_id);
      return true;
    };
    if (!head) return plain_release();
    // A waiter on this server: release and re-grant in one backend operation.
    std::optional<LockHandle> next;
    try {
      next = backend_.handover(from, head->owner_id, head->session_id, head->request.lease());
    } catch (const LockLostError&) {
      // Not the live exclusive grant: a shared holder or a permit (handover hands over only an
      // exclusive grant; the token names which), or a grant already gone. The head keeps its
      // place and the release notification pumps its queue.
      {
        std::lock_guard lock(mutex_);
        state->queue.end_attempt(head, Attempt::kUndecided, nullptr);
      }
      observer_.on_backend_attempt();
      try {
        plain_release();
      } catch (...) {
        pump(state);
        throw;
      }
      pump(state);
      return true;
    } catch (...) {
      WaiterQueue::AfterAttempt after;
      {
        std::lock_guard lock(mutex_);
        after = state->queue.end_attempt(head, Attempt::kFailed, std::current_exception());
        if (after.expired) count_answered(1);
      }
      observer_.on_backend_attempt();
      if (after.expired) head->done({std::optional<LockHandle>{}, after.failure});
      pump(state);
      throw;
    }
    // No grant: the waiter's session died while it waited; the lock was simply released.
    const auto refused =
        next ? nullptr
             : std::make_exception_ptr(SessionNotFoundError("session expired while waiting"));
    note_release(key, token, from.owner_id, session_id);
    WaiterQueue::AfterAttempt after;
    {
      std::lock_guard lock(mutex_);
      after = state->queue.end_attempt(head, next ? Attempt::kGranted : Attempt::kRefused, nullptr);
      if (after.deliver) count_answered(1);
      // Learnt as the hand-over ends: the store's report of it finds it known or in flight.
      if (next && after.deliver) learn_holder(*state, *next);
    }
    observer_.on_backend_attempt();
    deliver(state, head, after.deliver, std::move(next), refused);
    return true;
  });
}

void LockService::read(std::string key, Callback<std::optional<LockInfo>> done) {
  run<std::optional<LockInfo>>(std::move(done),
                               [this, key = std::move(key)] { return backend_.read(key); });
}

void LockService::read_holders(std::string key, Callback<std::vector<LockInfo>> done) {
  run<std::vector<LockInfo>>(std::move(done),
                             [this, key = std::move(key)] { return backend_.read_holders(key); });
}

void LockService::list(std::string prefix, ListAfter after, std::size_t limit,
                       Callback<std::vector<LockInfo>> done) {
  run<std::vector<LockInfo>>(std::move(done),
                             [this, prefix = std::move(prefix), after = std::move(after), limit] {
                               return backend_.list(prefix, after, limit);
                             });
}

void LockService::revoke(std::string key, Callback<LockOutcome> done) {
  run<LockOutcome>(std::move(done), [this, key = std::move(key)] {
    auto outcome = backend_.revoke(key);
    forget_holder(key);
    if (outcome.revoked) {
      note(WatchKind::kRevoke, key, outcome.fencing_token.value_or(0),
           outcome.owner_id.value_or(""), "");
    }
    pump(key);
    return outcome;
  });
}

void LockService::list_sessions(std::string owner_prefix, std::string after, std::size_t limit,
                                Callback<std::vector<SessionInfo>> done) {
  run<std::vector<SessionInfo>>(
      std::move(done), [this, owner_prefix = std::move(owner_prefix), after = std::move(after),
                        limit] { return backend_.list_sessions(owner_prefix, after, limit); });
}

void LockService::describe_session(std::string session_id, Callback<SessionView> done) {
  run<SessionView>(std::move(done), [this, session_id = std::move(session_id)] {
    auto session = backend_.get_session(session_id);
    if (!session) throw SessionNotFoundError("session not found or expired");
    return SessionView{std::move(*session), backend_.session_grants(session_id)};
  });
}

std::vector<LockService::SessionWait> LockService::waits_of(const std::string& session_id) {
  const auto now = time_.steady_now();
  std::vector<SessionWait> waits;
  std::lock_guard lock(mutex_);
  for (const auto& [key, state] : queues_) {
    std::size_t position = 0;
    for (const auto& waiter : state->queue.waiters()) {
      ++position;
      if (waiter->session_id != session_id) continue;
      waits.push_back(
          {key, waiter->request, position,
           std::chrono::duration_cast<std::chrono::milliseconds>(now - waiter->queued_at)});
    }
  }
  return waits;
}

std::vector<LockService::QueuedWaiter> LockService::waiters(const std::string& key) {
  const auto now = time_.steady_now();
  std::vector<QueuedWaiter> queued;
  std::lock_guard lock(mutex_);
  const auto found = queues_.find(key);
  if (found == queues_.end()) return queued;
  for (const auto& waiter : found->second->queue.waiters()) {
    queued.push_back(
        {waiter->session_id, waiter->owner_id, waiter->request,
         std::chrono::duration_cast<std::chrono::milliseconds>(now - waiter->queued_at)});
  }
  return queued;
}

std::vector<std::size_t> LockService::waiting_counts(const std::vector<std::string>& keys) {
  std::vector<std::size_t> counts;
  counts.reserve(keys.size());
  std::lock_guard lock(mutex_);
  for (const auto& key : keys) {
    const auto found = queues_.find(key);
    counts.push_back(found == queues_.end() ? 0 : found->second->queue.waiters().size());
  }
  return counts;
}

void LockService::list_delays(std::string prefix, std::string after, std::size_t limit,
                              Callback<std::vector<KeyDelay>> done) {
  run<std::vector<KeyDelay>>(std::move(done),
                             [this, prefix = std::move(prefix), after = std::move(after), limit] {
                               return backend_.list_delays(prefix, after, limit);
                             });
}

void LockService::clear_delay(std::string key, Callback<bool> done) {
  run<bool>(std::move(done), [this, key = std::move(key)] {
    const bool cleared = backend_.clear_delay(key);
    if (cleared) pump(key);
    return cleared;
  });
}

void LockService::reap() {
  reap_timer_->arm(options_.reap_interval, [this] {
    asio::post(workers_, [this] {
      try {
        const auto report_ = backend_.reap_expired();
        for (const auto& info : report_.expired_locks) {
          forget_holder(info.key);
          observer_.on_expiry(info);
          note(WatchKind::kExpire, info.key, info.fencing_token, info.owner_id, info.session_id,
               info.mode);
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
  std::map<std::string, KeyStatePtr, std::less<>> queues;  // destroyed after the lock
  std::vector<WaiterPtr> answered;
  std::unordered_map<std::uint64_t, std::weak_ptr<Observation>> observations;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    reap_timer_->cancel();
    for (auto& [key, state] : queues_) {
      if (state->wake_timer) state->wake_timer->cancel();
      auto taken = state->queue.take_all();
      answered.insert(answered.end(), taken.begin(), taken.end());
      state->dropped = true;
    }
    // A head whose own attempt is in flight is left to it (WaiterQueue::take_all) and counted
    // when that attempt answers it.
    count_answered(answered.size());
    queues.swap(queues_);
    observations.swap(observations_);
  }
  watch_.shutdown();
  for (auto& [id, weak] : observations) {
    if (auto alive = weak.lock()) {
      alive->fail(std::make_exception_ptr(UnavailableError("server is shutting down")));
    }
  }
  for (auto& waiter : answered) {
    waiter->done(
        {std::nullopt, std::make_exception_ptr(UnavailableError("server is shutting down"))});
  }
}

}  // namespace dlock::core
