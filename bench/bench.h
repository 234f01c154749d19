#pragma once

// Shared types of dlock-bench (bench/README.md): one Measurement per (backend, path, workload,
// clients), the thread driver used by the in-process paths, and percentiles.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <latch>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace dlock::bench {

using Clock = std::chrono::steady_clock;

inline double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// p in [0, 1]; 0 for an empty sample (callers only print measured values).
inline double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  const auto index = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(index),
                   values.end());
  return values[index];
}

// What one client of one run recorded.
struct ClientStats {
  std::vector<double> op_ms;       // one acquire+release pair (or, hot key, one grant's wait)
  std::vector<double> acquire_ms;  // the acquire part of each pair
  std::uint64_t ops = 0;           // pairs completed, or grants on the hot key
  std::uint64_t attempts = 0;      // hot key: acquire attempts (granted or not)
  std::uint64_t errors = 0;
};

struct Measurement {
  std::string backend;
  std::string path;      // raw | anchor | spi | http
  std::string workload;  // pairs | hot
  int clients = 0;
  double seconds = 0;
  std::uint64_t ops = 0;
  std::uint64_t attempts = 0;
  std::uint64_t errors = 0;
  double p50_ms = 0, p99_ms = 0;
  double acquire_p50_ms = 0;
  double per_second() const { return seconds > 0 ? static_cast<double>(ops) / seconds : 0; }
};

inline Measurement summarize(std::string backend, std::string path, std::string workload,
                             int clients, double seconds, const std::vector<ClientStats>& stats) {
  Measurement m{std::move(backend), std::move(path), std::move(workload), clients, seconds};
  std::vector<double> ops, acquires;
  for (const auto& s : stats) {
    m.ops += s.ops;
    m.attempts += s.attempts;
    m.errors += s.errors;
    ops.insert(ops.end(), s.op_ms.begin(), s.op_ms.end());
    acquires.insert(acquires.end(), s.acquire_ms.begin(), s.acquire_ms.end());
  }
  m.p50_ms = percentile(ops, 0.5);
  m.p99_ms = percentile(ops, 0.99);
  m.acquire_p50_ms = percentile(std::move(acquires), 0.5);
  return m;
}

// Runs `clients` threads; each builds its client with make(i) (connections opened before the
// clock starts), then calls it repeatedly until `duration` has passed. Returns elapsed seconds.
template <typename Make>
double drive_threads(int clients, std::chrono::milliseconds duration, Make make,
                     std::vector<ClientStats>& stats) {
  stats.assign(static_cast<std::size_t>(clients), ClientStats{});
  std::latch ready(clients + 1);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      auto client = make(i);
      ready.arrive_and_wait();
      auto& mine = stats[static_cast<std::size_t>(i)];
      while (!stop.load(std::memory_order_relaxed)) client(mine);
    });
  }
  ready.arrive_and_wait();
  const auto start = Clock::now();
  std::this_thread::sleep_for(duration);
  stop = true;
  for (auto& t : threads) t.join();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace dlock::bench
