#include "core/cancellation.h"

#include <utility>

namespace dlock::core {

Cancellation::Cancellation(std::function<void()> watch) : watch_(std::move(watch)) {}

void Cancellation::arm(std::function<void()> action) { arm(std::move(action), false); }

void Cancellation::arm_watched(std::function<void()> action) { arm(std::move(action), true); }

void Cancellation::arm(std::function<void()> action, bool watched) {
  std::function<void()> watch;
  {
    std::lock_guard lock(mutex_);
    if (settled_) return;
    if (!cancelled_) {
      action_ = std::move(action);
      if (watched) watch = std::exchange(watch_, nullptr);
      action = nullptr;
    }
  }
  if (watch) watch();
  if (action) action();  // already cancelled: undo at once
}

void Cancellation::cancel() {
  std::function<void()> action;
  {
    std::lock_guard lock(mutex_);
    if (settled_ || cancelled_) return;
    cancelled_ = true;
    action = std::exchange(action_, nullptr);
    watch_ = nullptr;
  }
  if (action) action();
}

void Cancellation::settle() {
  std::function<void()> dropped;  // destroyed outside the lock
  std::lock_guard lock(mutex_);
  settled_ = true;
  dropped = std::exchange(action_, nullptr);
  watch_ = nullptr;
}

bool Cancellation::cancelled() const {
  std::lock_guard lock(mutex_);
  return cancelled_;
}

}  // namespace dlock::core
