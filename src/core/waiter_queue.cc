#include "core/waiter_queue.h"

#include <algorithm>
#include <utility>

#include "dlock/errors.h"

namespace dlock::core {

bool WaiterQueue::push(WaiterPtr waiter) {
  waiters_.push_back(std::move(waiter));
  return waiters_.size() == 1;
}

WaiterPtr WaiterQueue::begin_attempt() {
  if (busy_) {
    again_ = true;
    return nullptr;
  }
  if (waiters_.empty()) return nullptr;
  busy_ = true;
  again_ = false;
  attempting_ = waiters_.front();
  return attempting_;
}

WaiterPtr WaiterQueue::begin_handover() {
  if (busy_ || waiters_.empty() ||
      waiters_.front()->request.kind() != GrantRequest::Kind::kExclusive) {
    return nullptr;
  }
  busy_ = true;
  again_ = false;
  // An attempt for the head like any other: its wait_ms running out meanwhile leaves the
  // answer to the hand-over (give_up marks it expired), as C3 says of an attempt in flight.
  attempting_ = waiters_.front();
  return attempting_;
}

WaiterQueue::AfterAttempt WaiterQueue::end_attempt(const WaiterPtr& head, Attempt attempt,
                                                   std::exception_ptr failure) {
  AfterAttempt after;
  if (attempt == Attempt::kUndecided) {
    attempting_ = nullptr;  // an expired head stays for the next attempt to answer
    busy_ = false;
    after.again = std::exchange(again_, false);
    after.waiting = !waiters_.empty();
    return after;
  }
  if (attempt == Attempt::kFailed) {
    last_failure_ = std::move(failure);
  } else {
    last_failure_ = nullptr;  // the backend decided
    if (attempt != Attempt::kHeld) after.deliver = take(head);
  }
  if (attempting_ == head && head->expired &&
      (attempt == Attempt::kHeld || attempt == Attempt::kFailed) && take(head)) {
    after.expired = true;
    after.failure = last_failure_;
    if (!after.failure && head->shut_down) {
      after.failure = std::make_exception_ptr(UnavailableError("server is shutting down"));
    }
  }
  attempting_ = nullptr;
  busy_ = false;
  after.again = std::exchange(again_, false);
  after.waiting = !waiters_.empty();
  return after;
}

bool WaiterQueue::take(const WaiterPtr& waiter) {
  if (waiter->finished) return false;
  waiter->finished = true;
  if (waiter->deadline) waiter->deadline->cancel();
  std::erase(waiters_, waiter);
  return true;
}

std::optional<std::exception_ptr> WaiterQueue::give_up(const WaiterPtr& waiter) {
  if (waiter == attempting_ && !waiter->finished) {
    waiter->expired = true;
    return std::nullopt;
  }
  return cancel(waiter);
}

std::optional<std::exception_ptr> WaiterQueue::cancel(const WaiterPtr& waiter) {
  if (!take(waiter)) return std::nullopt;
  return last_failure_;
}

std::vector<WaiterPtr> WaiterQueue::take_sessions(
    const std::set<std::string, std::less<>>& session_ids) {
  return take_if([&](const Waiter& waiter) { return session_ids.contains(waiter.session_id); });
}

std::vector<WaiterPtr> WaiterQueue::take_if(const std::function<bool(const Waiter&)>& chosen) {
  std::vector<WaiterPtr> taken;
  for (const auto& waiter : waiters_) {
    if (chosen(*waiter)) taken.push_back(waiter);
  }
  std::erase_if(taken, [this](const WaiterPtr& waiter) { return !take(waiter); });
  return taken;
}

std::vector<WaiterPtr> WaiterQueue::take_all() {
  std::vector<WaiterPtr> taken;
  for (const auto& waiter : std::deque<WaiterPtr>(waiters_)) {
    if (waiter == attempting_ && !waiter->finished) {
      waiter->expired = true;  // its attempt answers it, as at its wait_ms (give_up)
      waiter->shut_down = true;
      continue;
    }
    if (take(waiter)) taken.push_back(waiter);
  }
  return taken;
}

bool WaiterQueue::promote(std::string_view session_id) {
  const auto first = waiters_.begin() + (busy_ && !waiters_.empty() ? 1 : 0);
  const auto found = std::find_if(first, waiters_.end(), [&](const WaiterPtr& waiter) {
    return waiter->session_id == session_id && !waiter->promoted &&
           waiter->request.mode() == HoldMode::kExclusive;
  });
  if (found == waiters_.end()) return false;
  (*found)->promoted = true;
  std::rotate(first, found, found + 1);
  return true;
}

std::vector<std::string> WaiterQueue::waiting_sessions() const {
  std::vector<std::string> sessions;
  sessions.reserve(waiters_.size());
  for (const auto& waiter : waiters_) sessions.push_back(waiter->session_id);
  return sessions;
}

}  // namespace dlock::core
