#include "server/telemetry.h"

#include <prometheus/text_serializer.h>

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <boost/json/serialize.hpp>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "auth/crypto.h"
#include "server/authorization.h"
#include "server/json_util.h"
#include "server/log_limiter.h"
#include "util/store_key.h"

namespace dlock::server {
namespace {

// The `mode` label of dlock_held_locks and dlock_lock_hold_seconds: HoldMode's names, and
// `leader` for an election's leader (an exclusive grant with a value).
constexpr std::array<const char*, 4> kHoldModes = {"exclusive", "shared", "permit", "leader"};
const prometheus::Histogram::BucketBoundaries kHoldBuckets = {
    0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600};

constexpr auto kHeldCountMaxAge = std::chrono::seconds(10);

std::string hold_mode(const LockInfo& grant) {
  return grant.value ? "leader" : to_string(grant.mode);
}

std::string remembered_key(std::string_view key, FencingToken token) {
  return std::string(key) + '\0' + std::to_string(token);
}

std::atomic<int> g_log_threshold{1};  // 0 debug, 1 info, 2 warn, 3 error

int level_rank(std::string_view level) {
  if (level == "debug") return 0;
  if (level == "warn") return 2;
  if (level == "error") return 3;
  return 1;
}

// Asynchronous logging (contract C4, "Logs"): log_event formats the line and queues it; one
// writer thread writes the queue to stdout. A stdout that blocks (a pipe nobody reads) or fails
// (a closed pipe: EPIPE, SIGPIPE being ignored by dlockd) therefore never stalls or kills a lock
// operation. Bounds, each counted in dlock_log_dropped_total:
// - the queue holds at most kQueueBytes; a line that does not fit is dropped (reason queue_full,
//   also counting lines a failing stdout did not take);
// - a line that names its client (a `remote` field: audit lines, denials; `peer`: the debug TLS
//   handshake lines) counts against that client address's budget (LogLimiter: 100 lines a
//   second, bursts of 200); over it, the line is counted (reason client_rate) and told in the
//   client's `client_log_limited` notices (start, then end with the counts per kind: audit actions
//   included, so no audit line goes silently). One client's flood therefore neither fills the log
//   nor takes another client's lines;
// - every other line (grant, release, expiry, backend_error...: the lock service that emits
//   them does not know the client) is bounded per event kind: kLinesPerSecond lines a second
//   (bursts of as many); the excess is dropped (reason rate_limit).
constexpr std::size_t kQueueBytes = 4 * 1024 * 1024;
constexpr double kLinesPerSecond = 1000;
constexpr auto kSweepInterval = std::chrono::seconds(1);

std::string format_line(std::string_view level, std::string_view event,
                        boost::json::object fields) {
  boost::json::object line;
  line["ts"] = format_time(WallClock::now());
  line["level"] = level;
  line["event"] = event;
  for (auto& field : fields) line[field.key()] = std::move(field.value());
  return boost::json::serialize(line) + "\n";
}

std::string notice_line(const LogLimiter::Notice& notice) {
  boost::json::object fields{{"client", notice.client},
                             {"state", notice.started ? "start" : "end"}};
  if (!notice.started) {
    fields["dropped"] = notice.dropped;
    boost::json::object by_kind;
    for (const auto& [kind, count] : notice.dropped_by_kind) by_kind[kind] = count;
    fields["dropped_by_kind"] = std::move(by_kind);
  }
  return format_line("warn", "client_log_limited", std::move(fields));
}

class AsyncLog {
 public:
  AsyncLog() {
    std::thread([this] { run(); }).detach();
  }  // lives as long as the process

  LogLimiter& limiter() { return limiter_; }

  // The end notices of client episodes that went quiet by `now`.
  void report_ended_episodes(LogLimiter::Clock::time_point now) {
    for (const auto& notice : limiter_.sweep(now)) push(notice_line(notice));
  }

  void push(std::string line) {
    {
      std::lock_guard lock(mutex_);
      if (queued_bytes_ + line.size() > kQueueBytes) {
        ++log_counters().dropped;
        return;
      }
      queued_bytes_ += line.size();
      queue_.push_back(std::move(line));
    }
    changed_.notify_all();
  }

  // Whether `event` is within its rate; counts the excess.
  bool admit(std::string_view event) {
    std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    auto [bucket, added] = buckets_.try_emplace(std::string(event), Bucket{kLinesPerSecond, now});
    if (!added) {
      const double elapsed = std::chrono::duration<double>(now - bucket->second.refilled).count();
      bucket->second.tokens =
          std::min(kLinesPerSecond, bucket->second.tokens + elapsed * kLinesPerSecond);
      bucket->second.refilled = now;
    }
    if (bucket->second.tokens < 1) {
      ++log_counters().rate_limited;
      return false;
    }
    bucket->second.tokens -= 1;
    return true;
  }

  // Waits up to `timeout` for the queue to be written (at exit).
  void flush(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, timeout, [this] { return queue_.empty() && !writing_; });
  }

 private:
  struct Bucket {
    double tokens;
    std::chrono::steady_clock::time_point refilled;
  };

  void run() {
    std::string batch;
    auto last_sweep = std::chrono::steady_clock::now();
    for (;;) {
      if (const auto now = std::chrono::steady_clock::now(); now - last_sweep >= kSweepInterval) {
        report_ended_episodes(now);
        last_sweep = now;
      }
      std::size_t lines = 0;
      {
        std::unique_lock lock(mutex_);
        writing_ = false;
        changed_.notify_all();
        if (!changed_.wait_for(lock, kSweepInterval, [this] { return !queue_.empty(); })) continue;
        batch.clear();
        for (auto& line : queue_) batch += line;
        lines = queue_.size();
        queue_.clear();
        queued_bytes_ = 0;
        writing_ = true;
      }
      if (!write_all(batch)) log_counters().dropped += lines;
    }
  }

  static bool write_all(std::string_view text) {
    while (!text.empty()) {
      const ssize_t written = ::write(STDOUT_FILENO, text.data(), text.size());
      if (written < 0 && errno == EINTR) continue;
      if (written <= 0) return false;
      text.remove_prefix(static_cast<std::size_t>(written));
    }
    return true;
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::string> queue_;
  std::size_t queued_bytes_ = 0;
  bool writing_ = false;
  std::map<std::string, Bucket, std::less<>> buckets_;
  LogLimiter limiter_;
};

AsyncLog& async_log() {
  static auto* log = new AsyncLog;  // never destroyed: its detached writer may outlive main
  return *log;
}

// At exit, give the writer a moment to drain (start-up errors, "stopped"), but never hang on a
// stdout that does not take it.
struct FlushAtExit {
  ~FlushAtExit() {
    async_log().report_ended_episodes(std::chrono::steady_clock::now() + std::chrono::hours(1));
    async_log().flush(std::chrono::seconds(2));
  }
} g_flush_at_exit;

// The client a line names (its `remote` field, or `peer` on the TLS handshake lines), or "".
std::string_view client_of(const boost::json::object& fields) {
  for (const char* name : {"remote", "peer"}) {
    const auto* value = fields.if_contains(name);
    if (value != nullptr && value->is_string()) return value->get_string();
  }
  return {};
}

}  // namespace

void set_log_level(std::string_view level) { g_log_threshold = level_rank(level); }

bool log_enabled(std::string_view level) {
  return level_rank(level) >= g_log_threshold.load(std::memory_order_relaxed);
}

void log_event(std::string_view level, std::string_view event, boost::json::object fields) {
  if (!log_enabled(level)) return;
  auto& log = async_log();
  if (const auto client = client_of(fields); !client.empty()) {
    std::string kind(event);
    if (const auto* action = fields.if_contains("action"); action && action->is_string()) {
      kind += ":" + std::string(action->get_string());
    }
    auto verdict = log.limiter().admit(client, kind, std::chrono::steady_clock::now());
    if (verdict.notice) log.push(notice_line(*verdict.notice));
    if (!verdict.admit) {
      ++log_counters().client_limited;
      return;
    }
  } else if (!log.admit(event)) {
    return;
  }
  log.push(format_line(level, event, std::move(fields)));
}

std::string session_fingerprint(std::string_view session_id) {
  return auth::to_hex(auth::sha256(session_id)).substr(0, 12);
}

namespace {

std::mutex g_build_mutex;
std::string g_build_version = "unknown";
std::string g_build_revision = "unknown";

}  // namespace

void set_build_info(std::string version, std::string revision) {
  std::lock_guard lock(g_build_mutex);
  g_build_version = std::move(version);
  g_build_revision = std::move(revision);
}

const std::string& build_version() {
  std::lock_guard lock(g_build_mutex);
  return g_build_version;
}

const std::string& build_revision() {
  std::lock_guard lock(g_build_mutex);
  return g_build_revision;
}

Telemetry::Telemetry(std::string backend, std::chrono::milliseconds max_wait)
    : backend_(std::move(backend)), registry_(std::make_shared<prometheus::Registry>()) {
  using prometheus::Histogram;
  prometheus::BuildGauge()
      .Name("dlock_build_info")
      .Help("1, labelled with the running dlockd's version, source revision and backend")
      .Register(*registry_)
      .Add({{"version", build_version()}, {"revision", build_revision()}, {"backend", backend_}})
      .Set(1);
  auto& acquire = prometheus::BuildHistogram()
                      .Name("dlock_lock_acquire_seconds")
                      .Help("Latency of lock acquire requests, by backend and outcome")
                      .Register(*registry_);
  // Up to lock.max.wait: a waiting acquire is answered at most that long after it came.
  Histogram::BucketBoundaries buckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                         0.5,    1,     2.5,    5,     10,   30,    60,   120, 300};
  const double top = std::chrono::duration<double>(max_wait).count();
  std::erase_if(buckets, [&](double bound) { return bound > 60 && bound >= top; });
  if (top > buckets.back()) buckets.push_back(top);
  acquire_granted_ = &acquire.Add({{"backend", backend_}, {"outcome", "granted"}}, buckets);
  acquire_held_ = &acquire.Add({{"backend", backend_}, {"outcome", "held"}}, buckets);
  acquire_error_ = &acquire.Add({{"backend", backend_}, {"outcome", "error"}}, buckets);
  http_requests_ = &prometheus::BuildCounter()
                        .Name("dlock_http_requests_total")
                        .Help("HTTP requests answered, by route and status code")
                        .Register(*registry_);
  set_routes({});
  backend_errors_ = &prometheus::BuildCounter()
                         .Name("dlock_backend_errors_total")
                         .Help("Backend calls that failed transiently, by error code")
                         .Register(*registry_);
  auth_denied_ = &prometheus::BuildCounter()
                      .Name("dlock_auth_denied_total")
                      .Help("Requests refused by authentication or authorization, by reason")
                      .Register(*registry_);
  // The known label values exist from start-up at 0, so that alerts and dashboards over them
  // have series before the first failure (rate() of a series that appears with its first
  // increment misses that increment).
  for (const auto code : {ErrorCode::kContention, ErrorCode::kUnavailable, ErrorCode::kNotLeader,
                          ErrorCode::kUnknownOutcome}) {
    backend_errors_->Add({{"backend", backend_}, {"code", to_string(code)}});
  }
  for (const char* reason :
       {"missing", "malformed", "unknown", "throttled", "permission_denied", kSessionOwnerReason}) {
    auth_denied_->Add({{"reason", reason}});
  }
  auth_reloads_ = &prometheus::BuildCounter()
                       .Name("dlock_auth_reloads_total")
                       .Help("Reloads of the tokens file (SIGHUP), by result")
                       .Register(*registry_);
  const prometheus::Labels labels = {{"backend", backend_}};
  grants_ = &prometheus::BuildCounter()
                 .Name("dlock_lock_grants_total")
                 .Help("Locks granted (including hand-overs to waiters)")
                 .Register(*registry_)
                 .Add(labels);
  releases_ = &prometheus::BuildCounter()
                   .Name("dlock_lock_releases_total")
                   .Help("Locks released by their holder or with their session")
                   .Register(*registry_)
                   .Add(labels);
  expiries_ = &prometheus::BuildCounter()
                   .Name("dlock_lock_expiries_total")
                   .Help("Expired locks removed by the reaper")
                   .Register(*registry_)
                   .Add(labels);
  sessions_lost_ = &prometheus::BuildCounter()
                        .Name("dlock_sessions_lost_total")
                        .Help("Sessions that expired without being closed")
                        .Register(*registry_)
                        .Add(labels);
  backend_attempts_ = &prometheus::BuildCounter()
                           .Name("dlock_backend_acquire_attempts_total")
                           .Help("Backend writes that may grant a lock (acquire or hand-over)")
                           .Register(*registry_)
                           .Add(labels);
  hold_seconds_ = &prometheus::BuildHistogram()
                       .Name("dlock_lock_hold_seconds")
                       .Help("How long grants were held, observed when they end, by mode")
                       .Register(*registry_);
  for (std::size_t i = 0; i < kHoldModes.size(); ++i) {
    hold_by_mode_[i] =
        &hold_seconds_->Add({{"backend", backend_}, {"mode", kHoldModes[i]}}, kHoldBuckets);
  }
  holds_unmeasured_ = &prometheus::BuildCounter()
                           .Name("dlock_lock_holds_unmeasured_total")
                           .Help("Grants ended here whose start this server does not know")
                           .Register(*registry_)
                           .Add(labels);
  waiters_ = &prometheus::BuildGauge()
                  .Name("dlock_waiters")
                  .Help("Acquire requests currently waiting on this server")
                  .Register(*registry_)
                  .Add(labels);
  sessions_ = &prometheus::BuildGauge()
                   .Name("dlock_sessions")
                   .Help("Sessions opened through this server and not yet closed or expired")
                   .Register(*registry_)
                   .Add(labels);
}

namespace {

prometheus::MetricFamily family(const char* name, const char* help, prometheus::MetricType type,
                                double value, prometheus::Labels labels = {}) {
  prometheus::ClientMetric metric;
  for (const auto& [label, label_value] : labels) metric.label.push_back({label, label_value});
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return {name, help, type, {metric}};
}

// The process metrics of the Prometheus client conventions, read from /proc at each scrape.
// A figure that cannot be read is left out rather than reported as 0.
void add_process_metrics(std::vector<prometheus::MetricFamily>& families) {
  using prometheus::MetricType;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  // Fields after the command name, which is in parentheses and may hold spaces: the first here
  // is field 3 (state); utime is field 14, stime 15, starttime 22, vsize 23, rss 24.
  if (const auto close = stat.rfind(')'); close != std::string::npos && ticks > 0) {
    std::istringstream rest(stat.substr(close + 2));
    std::vector<std::string> fields{std::istream_iterator<std::string>(rest),
                                    std::istream_iterator<std::string>()};
    const auto field = [&](std::size_t number) { return std::stod(fields.at(number - 3)); };
    try {
      families.push_back(family("process_cpu_seconds_total",
                                "Total user and system CPU time spent in seconds",
                                MetricType::Counter, (field(14) + field(15)) / ticks));
      families.push_back(family("process_virtual_memory_bytes", "Virtual memory size in bytes",
                                MetricType::Gauge, field(23)));
      families.push_back(family("process_resident_memory_bytes", "Resident memory size in bytes",
                                MetricType::Gauge, field(24) * page));
      std::ifstream uptime_file("/proc/uptime");
      double uptime = 0;
      if (uptime_file >> uptime) {
        const double now =
            std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                .count();
        families.push_back(family("process_start_time_seconds",
                                  "Start time of the process since unix epoch in seconds",
                                  MetricType::Gauge, now - uptime + field(22) / ticks));
      }
    } catch (const std::exception&) {  // a kernel with another layout: leave them out
    }
  }
  std::error_code error;
  std::size_t open_fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", error), end; !error && it != end;
       it.increment(error)) {
    ++open_fds;
  }
  if (!error) {
    families.push_back(family("process_open_fds", "Number of open file descriptors",
                              MetricType::Gauge, static_cast<double>(open_fds)));
  }
  if (rlimit limit{}; getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    families.push_back(family("process_max_fds", "Maximum number of open file descriptors",
                              MetricType::Gauge, static_cast<double>(limit.rlim_cur)));
  }
}

}  // namespace

LogCounters& log_counters() {
  static LogCounters counters;
  return counters;
}

std::string Telemetry::scrape() const {
  using prometheus::MetricType;
  auto families = registry_->Collect();
  const auto& c = counters_;
  const auto& logged = log_counters();
  const auto number = [](const auto& atomic) { return static_cast<double>(atomic.load()); };
  families.push_back(family("dlock_http_accept_errors_total",
                            "accept() failures (e.g. out of file descriptors)", MetricType::Counter,
                            number(c.accept_errors)));
  families.push_back(family("dlock_http_connections_rejected_total",
                            "Connections answered 503 and closed over server.max.connections",
                            MetricType::Counter, number(c.connections_rejected)));
  families.push_back(family("dlock_http_connection_timeouts_total",
                            "Connections closed by the header, idle or write timeout",
                            MetricType::Counter, number(c.connections_timed_out)));
  families.push_back(family("dlock_http_connections_open", "Client connections open now",
                            MetricType::Gauge, number(c.connections_open)));
  families.push_back(family("dlock_http_unsent_bytes",
                            "Bytes of answers written and not yet taken by their clients",
                            MetricType::Gauge, number(c.unsent_bytes)));
  families.push_back(family("dlock_http_answers_shed_total",
                            "Large answers replaced by 503 over server.max.unsent.bytes",
                            MetricType::Counter, number(c.answers_shed)));
  families.push_back(family("dlock_wedged",
                            "1 while requests are in flight and none was answered for the stall "
                            "timeout (/readyz answers 503)",
                            MetricType::Gauge, c.wedged.load() ? 1 : 0));
  auto dropped = family("dlock_log_dropped_total", "Log lines dropped, by reason",
                        MetricType::Counter, number(logged.dropped), {{"reason", "queue_full"}});
  dropped.metric.push_back(
      family("", "", MetricType::Counter, number(logged.rate_limited), {{"reason", "rate_limit"}})
          .metric.front());
  dropped.metric.push_back(family("", "", MetricType::Counter, number(logged.client_limited),
                                  {{"reason", "client_rate"}})
                               .metric.front());
  families.push_back(std::move(dropped));
  {
    std::lock_guard lock(held_mutex_);
    if (held_counts_ && std::chrono::steady_clock::now() - held_counted_ <= kHeldCountMaxAge) {
      prometheus::MetricFamily held{"dlock_held_locks",
                                    "Live grants in the store, by mode (the whole store, counted "
                                    "at most once a second)",
                                    MetricType::Gauge,
                                    {}};
      for (std::size_t i = 0; i < kHoldModes.size(); ++i) {
        held.metric.push_back(family("", "", MetricType::Gauge,
                                     static_cast<double>((*held_counts_)[i]),
                                     {{"backend", backend_}, {"mode", kHoldModes[i]}})
                                  .metric.front());
      }
      families.push_back(std::move(held));
    }
  }
  add_process_metrics(families);
  return prometheus::TextSerializer().Serialize(families);
}

bool Telemetry::held_count_due() {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(held_mutex_);
  if (held_counting_ || now - held_counted_ < std::chrono::seconds(1)) return false;
  held_counted_ = now;
  held_counting_ = true;
  return true;
}

void Telemetry::set_held_locks(const std::vector<LockInfo>* grants) {
  std::optional<std::array<std::uint64_t, 4>> counts;
  if (grants != nullptr) {
    counts.emplace();
    counts->fill(0);
    for (const auto& grant : *grants) {
      const auto mode = hold_mode(grant);
      for (std::size_t i = 0; i < kHoldModes.size(); ++i) {
        if (mode == kHoldModes[i]) ++(*counts)[i];
      }
    }
  }
  std::lock_guard lock(held_mutex_);
  held_counts_ = counts;
  held_counting_ = false;
}

void Telemetry::remember(std::string_view key, FencingToken token, std::string mode) {
  std::lock_guard lock(held_mutex_);
  auto name = remembered_key(key, token);
  if (!remembered_.insert_or_assign(name, Held{std::chrono::steady_clock::now(), std::move(mode)})
           .second) {
    return;  // already remembered (on_leader after on_grant): only the mode changed
  }
  remembered_order_.push_back(std::move(name));
  while (remembered_.size() > kMaxRemembered && !remembered_order_.empty()) {
    remembered_.erase(remembered_order_.front());
    remembered_order_.pop_front();
  }
  // Names whose grant ended stay in the order until they reach its front: keep it bounded too.
  while (remembered_order_.size() > 2 * kMaxRemembered) {
    const auto& oldest = remembered_order_.front();
    const auto found = remembered_.find(oldest);
    if (found != remembered_.end()) remembered_.erase(found);
    remembered_order_.pop_front();
  }
}

void Telemetry::observe_hold(const std::string& mode, double seconds) {
  for (std::size_t i = 0; i < kHoldModes.size(); ++i) {
    if (mode == kHoldModes[i]) return hold_by_mode_[i]->Observe(std::max(0.0, seconds));
  }
  hold_seconds_->Add({{"backend", backend_}, {"mode", mode}}, kHoldBuckets)
      .Observe(std::max(0.0, seconds));
}

void Telemetry::observe_hold(std::string_view key, FencingToken token) {
  std::optional<Held> held;
  {
    std::lock_guard lock(held_mutex_);
    const auto found = remembered_.find(remembered_key(key, token));
    if (found != remembered_.end()) {
      held = std::move(found->second);
      remembered_.erase(found);
    }
  }
  if (!held) {
    holds_unmeasured_->Increment();
    return;
  }
  observe_hold(
      held->mode,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - held->since).count());
}

void Telemetry::on_leader(std::string_view key, FencingToken token) {
  remember(key, token, "leader");
}

void Telemetry::on_revoke(std::string_view key, FencingToken token) { observe_hold(key, token); }

void Telemetry::set_limits(const std::vector<std::pair<std::string, double>>& limits) {
  auto& family = prometheus::BuildGauge()
                     .Name("dlock_limit")
                     .Help("Configured caps of this dlockd, by option name (C5)")
                     .Register(*registry_);
  for (const auto& [name, value] : limits) family.Add({{"limit", name}}).Set(value);
}

void Telemetry::set_routes(const std::vector<std::string>& labels) {
  routes_.clear();
  for (const auto& label : labels) {
    routes_.push_back(std::make_unique<RouteCounters>());
    routes_.back()->label = label;
  }
  routes_.push_back(std::make_unique<RouteCounters>());
  routes_.back()->label = "other";
}

void Telemetry::on_http_request(std::size_t route, int status) {
  auto& counters = *routes_[std::min(route, routes_.size() - 1)];
  const auto labels = [&]() -> prometheus::Labels {
    return {{"route", counters.label}, {"code", std::to_string(status)}};
  };
  if (status < 100 || status > 599) {
    http_requests_->Add(labels()).Increment();
    return;
  }
  auto& slot = counters.by_code[static_cast<std::size_t>(status - 100)];
  auto* counter = slot.load(std::memory_order_acquire);
  if (counter == nullptr) {
    // Family::Add returns the one counter of these labels, so a racing first use stores the same.
    counter = &http_requests_->Add(labels());
    slot.store(counter, std::memory_order_release);
  }
  counter->Increment();
}

void Telemetry::on_auth_denied(std::string_view reason) {
  auth_denied_->Add({{"reason", std::string(reason)}}).Increment();
}

void Telemetry::on_tokens_reload(bool ok) {
  auth_reloads_->Add({{"result", ok ? "ok" : "error"}}).Increment();
}

void Telemetry::on_sessions(std::int64_t delta) {
  sessions_->Increment(static_cast<double>(delta));
}

void Telemetry::on_acquire(std::string_view outcome, std::chrono::nanoseconds latency) {
  const double seconds = std::chrono::duration<double>(latency).count();
  if (outcome == "granted") {
    acquire_granted_->Observe(seconds);
  } else if (outcome == "held") {
    acquire_held_->Observe(seconds);
  } else {
    acquire_error_->Observe(seconds);
  }
}

// Grants, releases and expiries are logged once each, as audit lines (C4): a grant and a
// release by the API that answered them (who asked, from where), an expiry here.
void Telemetry::on_grant(const LockHandle& handle) {
  grants_->Increment();
  remember(handle.key, handle.fencing_token, to_string(handle.mode));
}

void Telemetry::on_release(std::string_view key, FencingToken token) {
  releases_->Increment();
  observe_hold(key, token);
}

void Telemetry::on_expiry(const LockInfo& info) {
  expiries_->Increment();
  // The store's own times: the grant ended at its expiry (or its session's), whichever server
  // granted it.
  {
    std::lock_guard lock(held_mutex_);
    remembered_.erase(remembered_key(info.key, info.fencing_token));
  }
  if (info.acquired_at != WallClock::time_point{}) {
    observe_hold(hold_mode(info),
                 std::chrono::duration<double>(info.expires_at - info.acquired_at).count());
  } else {
    holds_unmeasured_->Increment();
  }
  if (!log_enabled("info")) return;  // the fields cost a SHA-256 and a time format
  auto fields = holder_fields(info);
  fields["expired_at"] = format_time(info.expires_at);
  const auto parts = store_key::split(info.key);
  audit("expire", principal_of_owner(info.owner_id), parts ? parts->ns : "",
        parts ? parts->key : std::string_view(info.key), info.fencing_token, "", {},
        std::move(fields));
}

void Telemetry::on_session_lost(std::string_view session_id) {
  sessions_lost_->Increment();
  log_event("warn", "session_lost", {{"session", session_fingerprint(session_id)}});
}

void Telemetry::on_backend_error(const Error& error) {
  backend_errors_->Add({{"backend", backend_}, {"code", to_string(error.code())}}).Increment();
  log_event("warn", "backend_error",
            {{"code", to_string(error.code())}, {"message", error.what()}});
}

void Telemetry::on_backend_attempt() { backend_attempts_->Increment(); }

void Telemetry::on_waiters(std::int64_t delta) {
  waiters_->Increment(static_cast<double>(delta));
  counters_.waiters += delta;
}

}  // namespace dlock::server
