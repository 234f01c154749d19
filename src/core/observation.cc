#include "core/observation.h"

#include <boost/asio/post.hpp>
#include <utility>

namespace dlock::core {

namespace asio = boost::asio;

Observation::Observation(LockStore& store, asio::thread_pool& workers, TimeSource& time,
                         std::string key, Satisfied satisfied, Done done)
    : store_(store),
      workers_(workers),
      key_(std::move(key)),
      satisfied_(std::move(satisfied)),
      done_(std::move(done)),
      deadline_(time.make_timer()) {}

void Observation::start(std::chrono::milliseconds wait) {
  {
    std::lock_guard lock(mutex_);
    reading_ = true;  // the first read below
    // Counted from the request, not from when a worker is free. The pending deadline keeps the
    // observation alive (nothing else holds it strongly) until it fires or an answer cancels it.
    deadline_->arm(wait, [self = shared_from_this()] { self->at_deadline(); });
  }
  asio::post(workers_, [self = shared_from_this()] {
    std::exception_ptr failed;
    try {
      // Subscribed before the first read: a change after the read is always reported.
      auto subscription =
          self->store_.watch_releases(self->key_, [weak = self->weak_from_this()](FencingToken) {
            if (auto alive = weak.lock()) alive->wake();
          });
      std::lock_guard lock(self->mutex_);
      if (self->finished_) return;
      self->subscription_ = std::move(subscription);
    } catch (...) {
      failed = std::current_exception();
    }
    if (failed) return self->fail(failed);
    self->read();
  });
}

void Observation::wake() {
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    if (reading_) {
      again_ = true;
      return;
    }
    reading_ = true;
  }
  asio::post(workers_, [self = shared_from_this()] { self->read(); });
}

void Observation::read() {
  while (true) {
    Outcome<std::optional<LockInfo>> outcome;
    try {
      outcome.value.emplace(store_.read(key_));
    } catch (...) {
      outcome.error = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      if (finished_) return;
      const bool done =
          outcome.error || satisfied_(*outcome.value) || (deadline_passed_ && !again_);
      if (!done) {
        last_ = *outcome.value;
        have_last_ = true;
        if (std::exchange(again_, false)) continue;  // a change came during the read
        reading_ = false;
        return;
      }
      reading_ = false;
      finish_locked();
    }
    answer(std::move(outcome));
    return;
  }
}

void Observation::at_deadline() {
  Outcome<std::optional<LockInfo>> outcome;
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    deadline_passed_ = true;
    // A read is queued or in flight: it answers, with the state it finds.
    if (reading_ || !have_last_) return;
    // Nothing changed since the last read (no notification since): it is the state now.
    outcome.value.emplace(last_);
    finish_locked();
  }
  answer(std::move(outcome));
}

void Observation::fail(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    if (!finish_locked()) return;
  }
  answer({std::nullopt, std::move(error)});
}

void Observation::abandon() {
  // Answered (nobody reads it) so that whatever the answer releases — a place under a quota,
  // the subscription — is released now.
  fail(std::make_exception_ptr(UnavailableError("the observer's connection closed")));
}

bool Observation::finish_locked() {
  if (finished_) return false;
  finished_ = true;
  deadline_->cancel();
  return true;
}

void Observation::answer(Outcome<std::optional<LockInfo>> outcome) {
  ReleaseSubscriptionPtr subscription;
  Done done;
  {
    std::lock_guard lock(mutex_);
    subscription = std::move(subscription_);
    done = std::move(done_);
  }
  subscription.reset();  // no notification after this
  if (done) done(std::move(outcome));
}

}  // namespace dlock::core
