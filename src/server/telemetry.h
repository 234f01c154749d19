#pragma once

// Metrics (Prometheus text via prometheus-cpp) and structured JSON log events for dlockd.
// Metric names follow C4: dlock_lock_acquire_seconds{backend, outcome} and dlock_* companions.

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <atomic>
#include <boost/json/object.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/lock_service.h"

namespace dlock::server {

// One JSON object per line on stdout: {"ts", "level", "event", ...fields}.
void log_event(std::string_view level, std::string_view event, boost::json::object fields = {});
// "debug" | "info" | "warn" | "error"; events below it are dropped.
void set_log_level(std::string_view level);
// Whether an event at `level` would be logged at all: callers test it before building the
// fields of a frequent event (a grant, a release), which log_event would only drop.
bool log_enabled(std::string_view level);

// What logs carry instead of a session ID, a credential (contract C6): the first 12 hex digits
// of its SHA-256.
std::string session_fingerprint(std::string_view session_id);

// The HTTP transport's counters (contract C4): owned by the Telemetry that exports them, kept by
// the HttpServer it is handed to (daemon.cc), which also reads `waiters` to tell a wedge from
// waiting acquires. No process-wide instance: a test builds its own.
struct ServerCounters {
  std::atomic<std::uint64_t> accept_errors{0};          // dlock_http_accept_errors_total
  std::atomic<std::uint64_t> connections_rejected{0};   // dlock_http_connections_rejected_total
  std::atomic<std::uint64_t> connections_timed_out{0};  // dlock_http_connection_timeouts_total
  std::atomic<std::int64_t> connections_open{0};        // dlock_http_connections_open
  std::atomic<std::int64_t> unsent_bytes{0};   // dlock_http_unsent_bytes (server.max.unsent.bytes)
  std::atomic<std::uint64_t> answers_shed{0};  // dlock_http_answers_shed_total
  std::atomic<std::int64_t> waiters{0};        // mirrors dlock_waiters
  std::atomic<bool> wedged{false};             // dlock_wedged, set by the server at each scrape
};

// The logger's counters (dlock_log_dropped_total{reason}): process-wide like the logger itself
// (log_event writes the one stdout).
struct LogCounters {
  std::atomic<std::uint64_t> dropped{0};  // queue full
  std::atomic<std::uint64_t> rate_limited{0};
  std::atomic<std::uint64_t> client_limited{0};  // over one client's budget (LogLimiter)
};
LogCounters& log_counters();

// The build this process runs, set once by main() before the server starts: dlockd's version
// and the source revision it was built from (dlock_build_info, /healthz). "unknown" until set.
void set_build_info(std::string version, std::string revision);
const std::string& build_version();
const std::string& build_revision();

class Telemetry final : public core::ServiceObserver {
 public:
  // `max_wait`: lock.max.wait, the top of the acquire histogram's buckets.
  explicit Telemetry(std::string backend,
                     std::chrono::milliseconds max_wait = std::chrono::minutes(5));
  // The transport's counters this Telemetry exports; the HttpServer keeps them current.
  ServerCounters& counters() { return counters_; }

  // The Prometheus text exposition of every metric, with the process metrics of the Prometheus
  // client conventions (process_cpu_seconds_total, process_resident_memory_bytes, ...).
  std::string scrape() const;

  // dlock_limit{limit}: the configured caps an alert compares a gauge with (C4): set once, at
  // start-up, as (C5 option name, value).
  void set_limits(const std::vector<std::pair<std::string, double>>& limits);

  // The routes of the route table, in its order, as labels ("GET /v1/locks/{}"); set once,
  // before the first request. on_http_request's `route` is an index into them; any other index
  // (a request no route matched) is counted as route "other".
  void set_routes(const std::vector<std::string>& labels);
  void on_http_request(std::size_t route, int status);
  // dlock_auth_denied_total{reason} (contract C6) and dlock_auth_reloads_total{result}.
  void on_auth_denied(std::string_view reason);
  void on_tokens_reload(bool ok);

  // dlock_held_locks{backend, mode}: the live grants of the whole store by mode, counted from
  // LockService::list (at most kHeldCountLimit) by Api::metrics in the background: at most one
  // count a second and one at a time. held_count_due() says whether to start one (and claims
  // it); set_held_locks stores its result (nullptr: the list failed). Scrapes show the last
  // count while it is at most 10 s old, and leave the family out otherwise.
  static constexpr std::size_t kHeldCountLimit = 10000;
  bool held_count_due();
  void set_held_locks(const std::vector<LockInfo>* grants);

  // dlock_lock_hold_seconds{backend, mode}: how long a grant was held, observed when it ends.
  // A grant made through this server is remembered (key, token, when, mode) until it ends here;
  // a leader is marked by the API that granted it. A revoke through this server ends one too.
  void on_leader(std::string_view key, FencingToken token);
  void on_revoke(std::string_view key, FencingToken token);

  void on_acquire(std::string_view outcome, std::chrono::nanoseconds latency) override;
  void on_grant(const LockHandle& handle) override;
  void on_release(std::string_view key, FencingToken token) override;
  void on_expiry(const LockInfo& info) override;
  void on_session_lost(std::string_view session_id) override;
  void on_backend_error(const Error& error) override;
  void on_waiters(std::int64_t delta) override;
  void on_sessions(std::int64_t delta) override;
  void on_backend_attempt() override;

 private:
  std::string backend_;
  ServerCounters counters_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Histogram* acquire_granted_;
  prometheus::Histogram* acquire_held_;
  prometheus::Histogram* acquire_error_;
  prometheus::Family<prometheus::Counter>* http_requests_;
  // dlock_http_requests_total{route, code}: per route, a counter per status code (100..599),
  // added on first use: the per-request count is then an array read, not Family::Add's label
  // hash under its mutex. The last entry is route "other".
  struct RouteCounters {
    std::string label;
    std::array<std::atomic<prometheus::Counter*>, 500> by_code{};
  };
  std::vector<std::unique_ptr<RouteCounters>> routes_;
  prometheus::Family<prometheus::Counter>* backend_errors_;
  prometheus::Family<prometheus::Counter>* auth_denied_;
  prometheus::Family<prometheus::Counter>* auth_reloads_;
  prometheus::Counter* grants_;
  prometheus::Counter* releases_;
  prometheus::Counter* expiries_;
  prometheus::Counter* sessions_lost_;
  prometheus::Counter* backend_attempts_;
  // Hold durations (see on_leader): grants made here and not yet ended, oldest first for the
  // bound kMaxRemembered (a grant that ends elsewhere is forgotten when the bound is reached).
  static constexpr std::size_t kMaxRemembered = 65536;
  struct Held {
    std::chrono::steady_clock::time_point since;
    std::string mode;
  };
  void remember(std::string_view key, FencingToken token, std::string mode);
  void observe_hold(std::string_view key, FencingToken token);
  void observe_hold(const std::string& mode, double seconds);
  mutable std::mutex held_mutex_;
  std::unordered_map<std::string, Held> remembered_;
  std::deque<std::string> remembered_order_;
  prometheus::Family<prometheus::Histogram>* hold_seconds_;
  // dlock_lock_hold_seconds of each mode, in kHoldModes' order (telemetry.cc): a release's
  // observation is then an array read, not Family::Add's label hash under its mutex.
  std::array<prometheus::Histogram*, 4> hold_by_mode_{};
  prometheus::Counter* holds_unmeasured_;
  std::chrono::steady_clock::time_point held_counted_{};  // when the last count started
  bool held_counting_ = false;
  std::optional<std::array<std::uint64_t, 4>> held_counts_;  // by kHoldModes
  prometheus::Gauge* waiters_;
  prometheus::Gauge* sessions_;
};

}  // namespace dlock::server
