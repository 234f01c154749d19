// LockService's waiting half (ADR-0007): acquire, the per-key queues and their pump, waiters'
// deadlines and ended sessions. The rest of the class is in lock_service.cc; the queue decisions
// are WaiterQueue's (waiter_queue.h).

#include <algorithm>
#include <boost/asio/post.hpp>
#include <map>
#include <set>
#include <utility>

#include "core/lock_service.h"

namespace dlock::core {

namespace asio = boost::asio;
using std::chrono::milliseconds;

namespace {

const char* outcome_label(const AcquireOutcome& outcome) {
  if (outcome.error) return "error";
  return outcome.value && *outcome.value ? "granted" : "held";
}

}  // namespace

std::optional<LockHandle> LockService::try_grant(const std::string& key,
                                                 const std::string& owner_id,
                                                 const std::string& session_id,
                                                 const GrantRequest& request) {
  // Counted when the write has returned (C4): a count seen is of attempts no longer in flight.
  struct Counted {
    ServiceObserver& observer;
    ~Counted() { observer.on_backend_attempt(); }
  } counted{observer_};
  return backend_.try_grant(key, owner_id, session_id, request);
}

void LockService::acquire(std::string key, std::string session_id, GrantRequest request,
                          milliseconds wait, Callback<std::optional<LockHandle>> done,
                          CancellationPtr cancellation) {
  const auto started = time_.steady_now();
  auto measured = [this, started, cancellation,
                   done = std::move(done)](Outcome<std::optional<LockHandle>> outcome) {
    observer_.on_acquire(outcome_label(outcome), time_.steady_now() - started);
    if (outcome.value && *outcome.value) {
      observer_.on_grant(**outcome.value);
      const auto& handle = **outcome.value;
      note(WatchKind::kGrant, handle.key, handle.fencing_token, handle.owner_id, handle.session_id,
           handle.mode);
      // Armed before the answer leaves: a grant its client never receives is given back at
      // once, not held by nobody until its TTL (ADR-0007).
      if (cancellation) {
        cancellation->arm([this, orphan = **outcome.value] { give_back_undelivered(orphan); });
      }
    }
    done(std::move(outcome));
  };
  asio::post(workers_, [this, key = std::move(key), session_id = std::move(session_id),
                        request = std::move(request), wait, cancellation,
                        measured = std::move(measured)]() mutable {
    try {
      if (wait > options_.max_wait) {
        throw InvalidArgumentError(
            "wait_ms", "wait_ms must be at most " + std::to_string(options_.max_wait.count()));
      }
      const auto owner_id = owner_of(session_id);
      const bool exclusive = request.mode() == HoldMode::kExclusive;
      KeyStatePtr state;
      std::optional<bool> holds;
      std::uint64_t holder_version = 0;
      {
        std::lock_guard lock(mutex_);
        const auto found = queues_.find(key);
        if (found != queues_.end() && !found->second->queue.empty()) {
          state = found->second;
          // Only for an exclusive request: the known holder is exclusive, and a shared or permit
          // request of its own session is the store's to refuse.
          if (exclusive) holds = known_holder(*state, session_id);
          // Known not to hold: a waiter queues; but a hand-over elsewhere may not be reported
          // yet, and only a waiter is moved to the front when it is (check_holder).
          if (holds == false && wait.count() <= 0) holds.reset();
          holder_version = state->holder_version;
        }
      }
      if (state) {
        // First come, first served: nobody overtakes queued waiters, except a holder itself
        // re-acquiring (re-entrant: it would otherwise wait for its own lock).
        if (!holds) {
          const auto holders = backend_.read_holders(key);
          holds = std::any_of(holders.begin(), holders.end(), [&](const LockInfo& holder) {
            return holder.session_id == session_id;
          });
          std::lock_guard lock(mutex_);
          learn_holders(*state, holder_version, holders);
        }
        if (*holds) {
          auto granted = try_grant(key, owner_id, session_id, request);
          if (granted) {
            std::lock_guard lock(mutex_);
            learn_holder(*state, *granted);
          }
          // An exclusive request not granted: its grant ended meanwhile, so it waits its turn.
          if (granted || wait.count() <= 0 || !exclusive) {
            measured({std::move(granted), nullptr});
            return;
          }
        } else if (wait.count() <= 0) {
          measured({std::optional<LockHandle>{}, nullptr});
          return;
        }
      } else if (wait.count() <= 0) {
        measured({try_grant(key, owner_id, session_id, request), nullptr});
        return;
      }
      auto waiter = std::make_shared<Waiter>();
      waiter->queued_at = time_.steady_now();
      waiter->session_id = session_id;
      waiter->owner_id = owner_id;
      waiter->request = request;
      // A copy: if queueing refuses, `measured` still answers below. A queued waiter's answer
      // is its leaving the queue (C3 "Watch").
      waiter->done = [this, key, session_id, owner_id, mode = request.mode(),
                      measured](Outcome<std::optional<LockHandle>> outcome) {
        note(WatchKind::kWaiterLeft, key, 0, owner_id, session_id, mode,
             outcome.error                     ? "error"
             : outcome.value && *outcome.value ? "granted"
                                               : "gave_up");
        measured(std::move(outcome));
      };
      wait_in_queue(key, waiter, wait, cancellation);
    } catch (...) {
      report(std::current_exception());
      measured({std::nullopt, std::current_exception()});
    }
  });
}

void LockService::wait_in_queue(const std::string& key, const WaiterPtr& waiter, milliseconds wait,
                                const CancellationPtr& cancellation) {
  bool needs_subscription = false;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) throw UnavailableError("server is shutting down");
    if (waiters_ >= options_.max_waiters) {
      throw ResourceExhaustedError("too many waiters (limit " +
                                   std::to_string(options_.max_waiters) + ")");
    }
    const auto found = queues_.find(key);
    needs_subscription = found == queues_.end() || !found->second->subscription;
  }
  // Subscribed before the first attempt, so a release between attempt and wait is not missed.
  ReleaseSubscriptionPtr subscription;  // destroyed after the lock if not needed after all
  KeyStatePtr state;
  WaiterPtr head;
  for (;;) {
    if (needs_subscription && !subscription) {
      subscription = backend_.watch_releases(key, [this, key](FencingToken granted) {
        asio::post(workers_, [this, key, granted] { store_reported(key, granted); });
      });
    }
    std::lock_guard lock(mutex_);
    if (stopping_) throw UnavailableError("server is shutting down");
    // Under mutex_, as recheck_waiters: a waiter checked against the old table is queued before
    // the recheck looks, so none slips between a reload and its recheck.
    if (waiter_check_) {
      if (auto refused = waiter_check_(waiter->owner_id, key)) std::rethrow_exception(refused);
    }
    auto& slot = queues_[key];
    if (!slot) slot = std::make_shared<KeyState>(key);
    state = slot;
    if (!state->subscription) {
      // The queue seen with a subscription was dropped meanwhile (it fell idle): subscribe anew.
      needs_subscription = true;
      if (!subscription) continue;
      state->subscription = std::move(subscription);
    }
    // At the deadline a still-queued waiter is answered "held", or the backend's failure when
    // the last attempt for the key failed. Answered on the time source's thread (dlockd: the
    // io_context's), not a worker's: on time even while every worker is blocked in a store call.
    // Armed before the waiter is counted: a count seen includes its deadline.
    waiter->deadline = time_.make_timer();
    waiter->deadline->arm(
        wait, [this, weak_state = std::weak_ptr<KeyState>(state),
               weak = std::weak_ptr<Waiter>(waiter)] { give_up(weak_state, weak, false); });
    const bool is_head = state->queue.push(waiter);
    ++waiters_;
    observer_.on_waiters(+1);
    // Only a new head makes an attempt: later arrivals wait their turn without touching the
    // backend (64 waiters must not mean 64 failing writes).
    if (is_head) head = state->queue.begin_attempt();
    // Under mutex_: recorded before its deadline or an attempt can answer it (waiter_left).
    note(WatchKind::kWaiterJoined, key, 0, waiter->owner_id, waiter->session_id,
         waiter->request.mode());
    break;
  }
  // A waiter whose client has gone leaves at once: its place under max_waiters (and its
  // principal's) is freed and the next waiter moves up. Armed outside mutex_: a connection
  // already closed runs it here.
  if (cancellation) {
    cancellation->arm_watched(
        [this, weak_state = std::weak_ptr<KeyState>(state), weak = std::weak_ptr<Waiter>(waiter)] {
          give_up(weak_state, weak, true);
        });
  }
  if (head) attempt(state, head);
}

void LockService::give_up(const std::weak_ptr<KeyState>& weak_state,
                          const std::weak_ptr<Waiter>& weak, bool cancelled) {
  const auto waiter = weak.lock();
  const auto state = weak_state.lock();
  if (!waiter || !state) return;
  std::optional<std::exception_ptr> failure;
  {
    std::lock_guard lock(mutex_);
    failure = cancelled ? state->queue.cancel(waiter) : state->queue.give_up(waiter);
    if (!failure) return;
    count_answered(1);
  }
  waiter->done({std::optional<LockHandle>{}, *failure});
}

void LockService::count_answered(std::size_t count) {
  waiters_ -= count;
  observer_.on_waiters(-static_cast<std::int64_t>(count));
}

void LockService::pump(const std::string& key) {
  KeyStatePtr state;
  {
    std::lock_guard lock(mutex_);
    const auto found = queues_.find(key);
    if (found == queues_.end()) return;
    state = found->second;
  }
  pump(state);
}

void LockService::pump(const KeyStatePtr& state) {
  WaiterPtr head;
  {
    Dropped dropped;  // destroyed after the lock is released
    std::lock_guard lock(mutex_);
    if (state->dropped) return;
    head = state->queue.begin_attempt();
    if (!head) {
      drop_locked(*state, dropped);
      return;
    }
  }
  attempt(state, head);
}

// One backend attempt for the head waiter only: one write per wake-up, however many wait.
void LockService::attempt(const KeyStatePtr& state, const WaiterPtr& head) {
  std::optional<LockHandle> granted;
  std::exception_ptr failure;
  Attempt result = Attempt::kHeld;
  bool session_ended = false;
  try {
    granted = backend_.try_grant(state->key, head->owner_id, head->session_id, head->request);
    if (granted) result = Attempt::kGranted;
  } catch (const SessionNotFoundError&) {
    failure = std::current_exception();
    result = Attempt::kRefused;
    session_ended = true;
  } catch (const Error& decided) {
    // A decision about this request (a semaphore's limit in conflict, bad input): answered, not
    // retried; the other waiters of the key move up.
    if (decided.retryable() || decided.code() == ErrorCode::kInternal) {
      report(std::current_exception());
      failure = std::current_exception();
      result = Attempt::kFailed;
    } else {
      failure = std::current_exception();
      result = Attempt::kRefused;
    }
  } catch (...) {
    report(std::current_exception());
    failure = std::current_exception();
    result = Attempt::kFailed;
  }
  WaiterQueue::AfterAttempt after;
  {
    std::lock_guard lock(mutex_);
    after = state->queue.end_attempt(head, result, failure);
    if (after.deliver || after.expired) count_answered(1);
    // Learnt as the attempt ends: a report of this grant finds it known or the attempt in flight.
    if (granted && after.deliver) learn_holder(*state, *granted);
  }
  // Counted once the queue has ended the attempt and before any answer (C4).
  observer_.on_backend_attempt();
  // Its wait_ms ended during this attempt, which did not grant it: answered now.
  if (after.expired) head->done({std::optional<LockHandle>{}, after.failure});
  switch (result) {
    case Attempt::kFailed:
      schedule_pump(state, options_.retry_backoff);  // transient: the head keeps its place
      return;
    case Attempt::kUndecided:  // only a hand-over ends so (LockService::release)
    case Attempt::kHeld:
      if (after.again) {
        pump(state);
      } else {
        arm_expiry_timer(state, after.waiting);
      }
      return;
    case Attempt::kGranted:
    case Attempt::kRefused:
      deliver(state, head, after.deliver, std::move(granted), failure, session_ended);
      return;
  }
}

void LockService::deliver(const KeyStatePtr& state, const WaiterPtr& head, bool delivered,
                          std::optional<LockHandle> granted, std::exception_ptr refused,
                          bool session_ended) {
  if (granted) {
    if (delivered) {
      const auto expiry = granted->server_expiry;
      const bool exclusive = granted->mode == HoldMode::kExclusive;
      head->done({std::move(granted), nullptr});
      if (exclusive) {
        wake_at_expiry(state, expiry);  // the next waiter waits for this grant to end
      } else {
        pump(state);  // a shared hold or a permit: the next waiter may hold beside it
      }
    } else {
      give_back(*granted);  // the waiter gave up while its grant was in flight
      pump(state);
    }
    return;
  }
  if (delivered) head->done({std::nullopt, refused});
  if (session_ended) drop_waiters_of({head->session_id});  // its other waits are just as dead
  pump(state);
}

void LockService::arm_expiry_timer(const KeyStatePtr& state, bool waiting) {
  if (!waiting) {
    drop_if_idle(state);
    return;
  }
  std::uint64_t holder_version = 0;
  {
    std::lock_guard lock(mutex_);
    holder_version = state->holder_version;
  }
  std::optional<LockInfo> holder;
  try {
    holder = backend_.read(state->key);
  } catch (...) {
    report(std::current_exception());
    schedule_pump(state, options_.retry_backoff);
    return;
  }
  if (!holder) {
    schedule_pump(state, milliseconds(10));  // freed in between: try again shortly
    return;
  }
  bool promoted = false;
  {
    std::lock_guard lock(mutex_);
    promoted = learn_read_holder(*state, holder_version, holder);
  }
  if (promoted) {
    pump(state);
    return;
  }
  wake_at_expiry(state, holder->expires_at);
}

std::optional<bool> LockService::known_holder(const KeyState& state,
                                              const std::string& session_id) const {
  // Trusted a little short of its expiry: past it, the next waiter's attempt takes the key.
  constexpr milliseconds kMargin(20);
  if (!state.holder || time_.wall_now() + kMargin >= state.holder->expires_at) return std::nullopt;
  return state.holder->session_id == session_id;
}

void LockService::learn_holders(KeyState& state, std::uint64_t version,
                                const std::vector<LockInfo>& holders) {
  if (state.holder_version != version) return;
  ++state.holder_version;
  state.holder.reset();
  // Only an exclusive holder is the whole story: beside shared holders or permits others may join.
  if (holders.size() == 1 && holders.front().mode == HoldMode::kExclusive) {
    const auto& holder = holders.front();
    state.holder =
        KeyState::KnownHolder{holder.session_id, holder.fencing_token, holder.expires_at};
  }
}

void LockService::learn_holder(KeyState& state, const LockHandle& granted) {
  ++state.holder_version;
  state.holder.reset();
  if (granted.mode == HoldMode::kExclusive) {
    state.holder =
        KeyState::KnownHolder{granted.session_id, granted.fencing_token, granted.server_expiry};
  }
}

bool LockService::learn_read_holder(KeyState& state, std::uint64_t version,
                                    const std::optional<LockInfo>& holder) {
  if (!holder) {
    learn_holders(state, version, {});
    return false;
  }
  learn_holders(state, version, {*holder});
  return state.queue.promote(holder->session_id);
}

void LockService::store_reported(const std::string& key, FencingToken granted) {
  KeyStatePtr state;
  {
    std::lock_guard lock(mutex_);
    const auto found = queues_.find(key);
    if (found == queues_.end()) return;
    state = found->second;
    if (granted != 0 &&
        (state->queue.attempting() || (state->holder && state->holder->token == granted))) {
      return;  // this service's own grant, or one its attempt in flight will find
    }
    ++state->holder_version;
    state->holder.reset();
  }
  if (granted == 0) {
    pump(state);
  } else {
    check_holder(state);
  }
}

void LockService::check_holder(const KeyStatePtr& state) {
  std::uint64_t version = 0;
  {
    std::lock_guard lock(mutex_);
    if (state->dropped) return;
    version = state->holder_version;
  }
  std::optional<LockInfo> holder;
  try {
    holder = backend_.read(state->key);
  } catch (...) {
    report(std::current_exception());  // unknown until the next read: acquires read for now
    return;
  }
  bool promoted = false;
  {
    std::lock_guard lock(mutex_);
    promoted = learn_read_holder(*state, version, holder);
  }
  if (promoted) pump(state);
}

void LockService::forget_holder(const std::string& key) {
  std::lock_guard lock(mutex_);
  const auto found = queues_.find(key);
  if (found == queues_.end()) return;
  ++found->second->holder_version;
  found->second->holder.reset();
}

void LockService::wake_at_expiry(const KeyStatePtr& state, WallClock::time_point expires_at) {
  // The holder's expiry by the backend's clock, mapped onto the local monotonic clock. Only a
  // wake-up time: the attempt it triggers is what decides.
  const auto remaining = std::chrono::duration_cast<milliseconds>(expires_at - time_.wall_now());
  schedule_pump(state, std::clamp(remaining + milliseconds(5), milliseconds(10),
                                  milliseconds(std::chrono::hours(1))));
}

void LockService::schedule_pump(const KeyStatePtr& state, milliseconds delay) {
  Dropped dropped;  // destroyed after the lock is released
  std::lock_guard lock(mutex_);
  if (state->dropped || stopping_) return;
  if (state->queue.empty()) {
    drop_locked(*state, dropped);
    return;
  }
  auto& timer = state->wake_timer;
  if (!timer) timer = time_.make_timer();
  timer->arm(delay, [this, weak = std::weak_ptr<KeyState>(state)] {
    asio::post(workers_, [this, weak] {
      if (const auto state = weak.lock()) pump(state);
    });
  });
}

void LockService::drop_if_idle(const KeyStatePtr& state) {
  Dropped dropped;  // destroyed after the lock is released
  std::lock_guard lock(mutex_);
  drop_locked(*state, dropped);
}

void LockService::drop_locked(KeyState& state, Dropped& dropped) {
  if (state.dropped || !state.queue.idle()) return;
  state.dropped = true;
  dropped.subscription = std::move(state.subscription);
  dropped.timer = std::move(state.wake_timer);
  if (dropped.timer) dropped.timer->cancel();
  queues_.erase(state.key);
}

void LockService::give_back(const LockHandle& orphan) {
  try {
    backend_.delete_if_owner(orphan.ref());
    note_release(orphan.key, orphan.fencing_token, orphan.owner_id, orphan.session_id);
  } catch (...) {
    // The grant then simply expires with its TTL; nobody holds a handle to it.
    report(std::current_exception());
  }
}

void LockService::give_back_undelivered(const LockHandle& orphan) {
  asio::post(workers_, [this, orphan] {
    give_back(orphan);
    pump(orphan.key);  // the next waiter, if any, is handed the key now
  });
}

void LockService::drop_waiters_of(const std::vector<std::string>& session_ids) {
  if (session_ids.empty()) return;
  const std::set<std::string, std::less<>> ended(session_ids.begin(), session_ids.end());
  std::vector<std::pair<KeyStatePtr, WaiterPtr>> dropped;
  {
    std::lock_guard lock(mutex_);
    if (waiters_ == 0) return;
    for (const auto& [key, state] : queues_) {
      for (auto& waiter : state->queue.take_sessions(ended)) {
        dropped.emplace_back(state, std::move(waiter));
      }
    }
    count_answered(dropped.size());
  }
  std::set<KeyStatePtr> states;
  for (const auto& [state, waiter] : dropped) {
    waiter->done({std::nullopt, std::make_exception_ptr(SessionNotFoundError(
                                    "session " + waiter->session_id +
                                    " ended while waiting (closed or expired)"))});
    states.insert(state);
  }
  // The next waiter may now be the head (or the queue empty, its subscription no longer needed).
  for (const auto& state : states) pump(state);
}

void LockService::recheck_waiters(WaiterCheck check, Callback<std::vector<std::string>> done) {
  // On a worker: pumping the queues it changed makes store calls. (run() lives in
  // lock_service.cc.)
  asio::post(workers_, [this, check = std::move(check), done = std::move(done)] {
    struct Refused {
      KeyStatePtr state;
      WaiterPtr waiter;
      std::exception_ptr error;
    };
    std::vector<Refused> refused;
    {
      std::lock_guard lock(mutex_);
      waiter_check_ = check;
      for (const auto& [key, state] : queues_) {
        std::map<const Waiter*, std::exception_ptr> errors;
        const auto taken = state->queue.take_if([&](const Waiter& waiter) {
          auto error = check(waiter.owner_id, key);
          if (error) errors.emplace(&waiter, std::move(error));
          return errors.contains(&waiter);
        });
        for (const auto& waiter : taken) refused.push_back({state, waiter, errors[waiter.get()]});
      }
      count_answered(refused.size());
    }
    std::vector<std::string> owners;
    std::set<KeyStatePtr> states;
    for (const auto& [state, waiter, error] : refused) {
      waiter->done({std::nullopt, error});
      owners.push_back(waiter->owner_id);
      states.insert(state);
    }
    for (const auto& state : states) pump(state);  // the next waiter may now be the head
    done({std::move(owners), nullptr});
  });
}

std::vector<std::string> LockService::dead_waiting_sessions() {
  std::vector<std::string> waiting;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [key, state] : queues_) {
      for (auto& session_id : state->queue.waiting_sessions()) {
        waiting.push_back(std::move(session_id));
      }
    }
  }
  const auto unsure_list = sessions_.unsure(waiting, time_.wall_now());
  const std::set<std::string> unsure(unsure_list.begin(), unsure_list.end());
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

}  // namespace dlock::core
