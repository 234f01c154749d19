#pragma once

// Tests wait for conditions, never for time: poll `condition` until it holds or `timeout`
// passes.

#include <chrono>
#include <thread>

namespace dlock::client::testing {

template <typename Condition>
bool wait_until(Condition condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the poll interval
  }
  return true;
}

}  // namespace dlock::client::testing
