#pragma once

// A request's tie to its client's connection (ADR-0007 "A wait belongs to its connection"):
// the HTTP server cancels it when the connection closes while the request is pending, or when
// the answer cannot be written; the service arms it with what a cancel must undo — a queued
// waiter to take out of its queue, a grant to give back. Thread-safe.

#include <functional>
#include <memory>
#include <mutex>

namespace dlock::core {

class Cancellation {
 public:
  // `watch` is called once, on the first arm_watched(): the request is now worth watching (the
  // server then reads the connection to notice the peer closing). Called outside any lock.
  explicit Cancellation(std::function<void()> watch = {});
  Cancellation(const Cancellation&) = delete;
  Cancellation& operator=(const Cancellation&) = delete;

  // Sets what cancel() runs, replacing the previous action. Runs it at once, on the caller's
  // thread, when already cancelled; never after settle().
  void arm(std::function<void()> action);
  // The same, and asks the server to watch the connection (a waiting acquire).
  void arm_watched(std::function<void()> action);
  // Runs the armed action once (later arms run at once). No-op after settle() or a first cancel.
  void cancel();
  // The answer was delivered: nothing runs any more, and the action is dropped.
  void settle();
  bool cancelled() const;

 private:
  void arm(std::function<void()> action, bool watched);

  mutable std::mutex mutex_;
  std::function<void()> watch_;   // until called
  std::function<void()> action_;  // the armed action
  bool cancelled_ = false;
  bool settled_ = false;
};
using CancellationPtr = std::shared_ptr<Cancellation>;

}  // namespace dlock::core
