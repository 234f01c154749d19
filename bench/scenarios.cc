#include "scenarios.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "sessions_scale.h"

namespace dlock::bench {

using std::chrono::milliseconds;

void log(const std::string& line) { std::cerr << "[dlock-bench] " << line << std::endl; }

std::string dlockd_cpus(const Options& options, const std::string& backend) {
  std::string fallback;
  for (const auto& entry : options.dlockd_cpus) {
    const auto equals = entry.find('=');
    if (equals == std::string::npos) {
      fallback = entry;
    } else if (entry.compare(0, equals, backend) == 0 && equals == backend.size()) {
      return entry.substr(equals + 1);
    }
  }
  return fallback;
}

testing::DlockdOptions dlockd_options(const Options& options, const std::string& backend,
                                      const std::string& sqlite_path, const std::string& url) {
  testing::DlockdOptions result;
  result.binary = options.dlockd;
  result.backend = backend;
  result.log_level = "warn";
  // The blocked-waiters row holds up to --waiters connections (10 000 in --full) while it reads
  // dlockd's /metrics on one more: above server.max.connections' default (10 000, C5) the read
  // would be refused.
  result.extra_args = {"--server-max-connections",
                       std::to_string(std::max(10000, options.waiters) + 1000)};
  if (!options.auth_tokens_file.empty()) {
    // The bench is one principal: the per-principal caps (10 000 each by default) would cap
    // the fill, waiters and sessions-scale rows below the global limits they already raise.
    result.extra_args.insert(
        result.extra_args.end(),
        {"--auth-tokens-file", options.auth_tokens_file, "--auth-max-sessions-per-principal",
         "100000000", "--auth-max-waiters-per-principal", "100000000"});
  }
  if (const auto cpus = dlockd_cpus(options, backend); !cpus.empty()) {
    result.wrapper = {"/usr/bin/taskset", "-c", cpus};
  }
  if (backend == "sqlite") result.sqlite_path = sqlite_path;
  if (backend == "pg") result.pg_url = url;
  if (backend == "etcd") result.etcd_endpoints = url;
  return result;
}

void require_authentication(const std::string& address) {
  const int status = testing::http_call(address, "GET", "/v1/locks").status;
  if (status != 401) {
    throw std::runtime_error("--auth: dlockd at " + address + " answered " +
                             std::to_string(status) + " to a request without a token, not 401");
  }
}

double etcd_proposals(const std::string& endpoints) {
  std::string first = endpoints.substr(0, endpoints.find(','));
  if (first.rfind("http://", 0) == 0) first = first.substr(7);
  const auto colon = first.rfind(':');
  // No bearer token: it is dlockd's credential, never sent to etcd.
  HttpTarget target{first.substr(0, colon),
                    static_cast<unsigned short>(std::stoi(first.substr(colon + 1))), "", nullptr};
  const std::string text = http_get_text(target, "/metrics");
  const std::string name = "\netcd_server_proposals_committed_total ";
  const auto at = text.find(name);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size()));
}

std::optional<double> metric_value(const std::string& text, const std::string& name) {
  std::size_t at = 0;
  while ((at = text.find("\n" + name, at)) != std::string::npos) {
    const auto start = at + 1 + name.size();
    if (start < text.size() && (text[start] == ' ' || text[start] == '{')) {
      const auto line_end = text.find('\n', start);
      const auto line = text.substr(start, line_end - start);
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
    at = start;
  }
  return std::nullopt;
}

double rss_mib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1;
}

Measurement spi_pairs(Backend& backend, const std::string& name,
                      const std::vector<RawSession>& sessions, int clients, milliseconds duration) {
  std::vector<ClientStats> stats;
  const double seconds = drive_threads(
      clients, duration,
      [&](int i) {
        const auto s = sessions[static_cast<std::size_t>(i) % sessions.size()];
        const std::string key = "default/bench-spi-" + std::to_string(i);
        return [&backend, s, key](ClientStats& out) {
          try {
            const auto t0 = Clock::now();
            const auto handle = backend.try_grant(key, s.owner_id, s.session_id,
                                                  GrantRequest::exclusive(milliseconds(30000)));
            const auto t1 = Clock::now();
            if (!handle) {
              ++out.errors;
              return;
            }
            if (!backend.delete_if_owner(
                    GrantRef{key, s.owner_id, s.session_id, handle->fencing_token})) {
              ++out.errors;
            }
            ++out.ops;
            out.acquire_ms.push_back(ms_between(t0, t1));
            out.op_ms.push_back(ms_between(t0, Clock::now()));
          } catch (const std::exception&) {
            ++out.errors;
          }
        };
      },
      stats);
  return summarize(name, "spi", "pairs", clients, seconds, stats);
}

Measurement spi_hot(Backend& backend, const std::string& name,
                    const std::vector<RawSession>& sessions, int clients, milliseconds duration) {
  std::vector<ClientStats> stats;
  const double seconds = drive_threads(
      clients, duration,
      [&](int i) {
        const auto s = sessions[static_cast<std::size_t>(i) % sessions.size()];
        auto started = std::make_shared<std::optional<Clock::time_point>>();
        return [&backend, s, started](ClientStats& out) {
          static const std::string key = "default/bench-spi-hot";
          if (!*started) *started = Clock::now();
          try {
            ++out.attempts;
            const auto handle = backend.try_grant(key, s.owner_id, s.session_id,
                                                  GrantRequest::exclusive(milliseconds(30000)));
            if (!handle) return;
            ++out.ops;
            out.op_ms.push_back(ms_between(**started, Clock::now()));
            if (!backend.delete_if_owner(
                    GrantRef{key, s.owner_id, s.session_id, handle->fencing_token})) {
              ++out.errors;
            }
          } catch (const std::exception&) {
            ++out.errors;
          }
          *started = Clock::now();
        };
      },
      stats);
  return summarize(name, "spi", "hot", clients, seconds, stats);
}

std::optional<double> dlockd_attempts(const HttpTarget& target) {
  return metric_value(http_get_text(target, "/metrics"), "dlock_backend_acquire_attempts_total");
}

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// CPU seconds of a backend server: the processes named `comm` whose command line contains
// `marker` (the server, found by its port) and their children (PostgreSQL's backends), by pid.
std::map<pid_t, double> server_cpu(const std::string& comm, const std::string& marker) {
  struct Process {
    pid_t pid, ppid;
    bool root;
  };
  std::vector<Process> named;
  if (DIR* proc = ::opendir("/proc")) {
    while (const dirent* entry = ::readdir(proc)) {
      const std::string name = entry->d_name;
      if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::string own = read_text("/proc/" + name + "/comm");
      if (!own.empty() && own.back() == '\n') own.pop_back();
      if (own != comm) continue;
      std::string cmdline = read_text("/proc/" + name + "/cmdline");
      std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
      const std::string stat = read_text("/proc/" + name + "/stat");
      const auto close = stat.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream fields(stat.substr(close + 2));
      std::string state;
      pid_t ppid = 0;
      fields >> state >> ppid;
      named.push_back(
          {static_cast<pid_t>(std::stol(name)), ppid, cmdline.find(marker) != std::string::npos});
    }
    ::closedir(proc);
  }
  std::map<pid_t, double> cpu;
  for (const auto& p : named) {
    if (p.root) cpu[p.pid] = cpu_seconds(p.pid);
  }
  for (const auto& p : named) {
    if (!p.root && cpu.count(p.ppid) != 0) cpu[p.pid] = cpu_seconds(p.pid);
  }
  return cpu;
}

// The backend server's processes for `name` at `url`; empty for sqlite (inside dlockd).
std::map<pid_t, double> backend_cpu(const std::string& name, const std::string& url) {
  const auto port_after = [](const std::string& text, const std::string& host) {
    const auto at = text.find(host);
    if (at == std::string::npos) return std::string();
    const auto start = at + host.size();
    return text.substr(start, text.find_first_not_of("0123456789", start) - start);
  };
  if (name == "pg") return server_cpu("postgres", " -p " + port_after(url, "127.0.0.1:") + " ");
  if (name == "etcd") return server_cpu("etcd", "127.0.0.1:" + port_after(url, "127.0.0.1:"));
  return {};
}

// CPU seconds spent between two readings of the same server (processes that appeared in
// between count from zero).
double cpu_between(const std::map<pid_t, double>& before, const std::map<pid_t, double>& after) {
  double total = 0;
  for (const auto& [pid, seconds] : after) {
    const auto it = before.find(pid);
    total += seconds - (it == before.end() ? 0 : it->second);
  }
  return total;
}

}  // namespace

milliseconds scale_open_limit(const Options& options) {
  if (options.scale_open_limit_ms > 0) return milliseconds(options.scale_open_limit_ms);
  const auto proportional = static_cast<milliseconds::rep>(options.scale_sessions * 12 / 5);
  return std::max(milliseconds(20000), milliseconds(proportional));
}

namespace {

// Before the row: the fill row's sessions, closed through the dlockd that opened them, take its
// locks (and the waiters row's holder) with them, so the row's backend does not carry them
// (on etcd, a lease per lock and index entries every dlockd's reaper scans each second).
void close_fill_sessions(const std::string& name, const HttpTarget& target,
                         const std::vector<std::string>& ids, milliseconds limit,
                         std::uint64_t locks, SessionsScaleFigures& figures,
                         std::map<std::string, std::string>& notes) {
  figures.fill_sessions = ids.size();
  if (ids.empty()) return;
  const auto closed = http_close_sessions(target, ids, 32, limit);
  figures.fill_closed = closed.closed;
  figures.fill_close_seconds = closed.seconds;
  const std::string what = std::to_string(closed.closed) + " of the fill row's " +
                           std::to_string(ids.size()) + " sessions (holding " +
                           std::to_string(locks) + " locks) closed in " +
                           std::to_string(static_cast<int>(closed.seconds + 0.5)) + " s, " +
                           std::to_string(closed.errors) + " errors";
  log(name + " sessions-scale: " + what);
  notes["sessions_scale_fill_closed"] =
      what + (closed.stopped ? "; stopped at the open bound: the rest stayed in the backend"
                             : "; the row ran without them");
}

// The driver's result into the row's figures, run.log and the notes that explain a shortfall.
void report_sessions_scale(const Options& options, const std::string& name,
                           const SessionsScaleOptions& scale, const SessionsScaleResult& result,
                           SessionsScaleFigures& figures, BackendExtras& extras) {
  figures.sessions = scale.sessions;
  figures.opened = result.opened;
  figures.opened_at_window = result.opened_at_window;
  figures.open_limit_hit = result.open_limit_hit;
  figures.open_errors = result.open_errors;
  figures.lost = result.lost;
  figures.keepalives = result.keepalives;
  figures.keepalive_errors = result.keepalive_errors;
  figures.reconnects = result.reconnects;
  figures.ttl_s = options.scale_ttl_ms / 1000.0;
  figures.keepalive_every_s = options.scale_keepalive_ms / 1000.0;
  figures.open_seconds = result.open_seconds;
  figures.window_seconds = result.window_seconds;
  figures.max_behind_ms = result.max_behind_ms;
  if (!result.keepalive_ms.empty()) {
    figures.keepalive_p50_ms = percentile(result.keepalive_ms, 0.5);
    figures.keepalive_p99_ms = percentile(result.keepalive_ms, 0.99);
    if (result.window_seconds > 0) {
      figures.keepalives_per_s =
          static_cast<double>(result.keepalive_ms.size()) / result.window_seconds;
    }
  }
  log(name + " sessions-scale: " + std::to_string(result.opened) + " of " +
      std::to_string(scale.sessions) + " opened in " + std::to_string(result.open_seconds) + " s" +
      (result.open_limit_hit ? " (open phase stopped at its bound)" : "") + ", " +
      std::to_string(result.lost) + " lost, " + std::to_string(result.keepalives) +
      " keepalives (" + std::to_string(result.keepalive_errors) + " errors, " +
      std::to_string(result.reconnects) + " reconnects), p99 " +
      std::to_string(figures.keepalive_p99_ms.value_or(-1)) + " ms, most behind schedule " +
      std::to_string(result.max_behind_ms) + " ms, dlockd CPU " +
      std::to_string(figures.dlockd_cpu_percent.value_or(-1)) + " %, backend CPU " +
      std::to_string(figures.backend_cpu_percent.value_or(-1)) + " %, RSS " +
      std::to_string(figures.rss_mib.value_or(-1)) + " MiB");
  if (result.open_limit_hit) {
    extras.notes["sessions_scale_opened"] =
        "open phase stopped after " + std::to_string(static_cast<int>(result.open_seconds)) +
        " s (--scale-open-limit-ms) with " + std::to_string(result.opened_at_window) + " of " +
        std::to_string(scale.sessions) + " sessions open (" + std::to_string(result.opened) +
        " once the opens in flight had answered); the window ran with those, and "
        "sessions_scale_lost counts only sessions that were opened: the row did not reach its "
        "target";
  } else if (result.opened < scale.sessions) {
    extras.notes["sessions_scale_opened"] =
        std::to_string(scale.sessions - result.opened) + " of " + std::to_string(scale.sessions) +
        " sessions were never opened (" + std::to_string(result.open_errors) +
        " open errors): the row did not reach its target";
  }
  if (result.keepalive_ms.empty()) {
    extras.notes["sessions_scale_keepalive_p99_ms"] =
        "no keepalive was answered during the window (none fell due in it, or none was answered)";
  }
  if (figures.row_stopped) {
    extras.notes["sessions_scale_row_stopped"] =
        "the row did not end within the open bound + the window + " +
        std::to_string(kScaleRowMargin.count()) +
        " s: its dlockd was killed, and the figures are what the bench had by then (no CPU "
        "figures; lost counts the 404s received before)";
  }
  if (name == "sqlite") {
    extras.notes["sessions_scale_backend_cpu_percent"] =
        "sqlite runs inside dlockd: its CPU is in sessions_scale_dlockd_cpu_percent";
  }
  extras.sessions_scale = figures;
}

}  // namespace

void run_sessions_scale(const Options& options, const std::string& name, const std::string& url,
                        const std::string& work_dir, const HttpTarget& fill_target,
                        const std::vector<std::string>& fill_sessions, BackendExtras& extras,
                        const std::function<void(Measurement)>& record) {
  if (options.scale_sessions == 0) {
    extras.notes["sessions_scale_lost"] = "not measured in this run (--scale-sessions 0)";
    return;
  }
  const milliseconds open_limit = scale_open_limit(options);
  const milliseconds window(options.scale_window_ms);
  SessionsScaleFigures figures;
  figures.open_limit_s = static_cast<double>(open_limit.count()) / 1000.0;
  close_fill_sessions(name, fill_target, fill_sessions, open_limit, extras.rss_locks, figures,
                      extras.notes);
  // server.max.sessions (100 000 by default) must leave room for the lock workload's sessions.
  Dlockd dlockd(options, name, work_dir + "/" + name + "-scale.db", url,
                {"--server-max-sessions", std::to_string(options.scale_sessions + 1000)});
  SessionsScaleOptions scale;
  scale.sessions = options.scale_sessions;
  scale.ttl = milliseconds(options.scale_ttl_ms);
  scale.keepalive_every = milliseconds(options.scale_keepalive_ms);
  scale.open_limit = open_limit;
  scale.progress = [name](const std::string& line) { log(name + " " + line); };
  std::atomic<bool> all_open{false}, driver_done{false}, stop{false};
  scale.all_open = [&all_open] { all_open = true; };
  log(name + " sessions-scale: opening " + std::to_string(scale.sessions) + " sessions (TTL " +
      std::to_string(options.scale_ttl_ms) + " ms, keepalive every " +
      std::to_string(options.scale_keepalive_ms) + " ms) over " +
      std::to_string(scale.connections) + " connections, for " +
      std::to_string(open_limit.count() / 1000) + " s at most");
  SessionsScaleResult result;
  const auto row_start = Clock::now();
  // The whole row's bound: past it, dlockd is killed, which fails every request in flight.
  const auto row_deadline = row_start + open_limit + window + kScaleRowMargin;
  std::thread driver([&] {
    try {
      result = http_sessions_scale(dlockd.target(), scale, stop);
    } catch (const std::exception& e) {
      log(name + " sessions-scale driver failed: " + e.what());
    }
    driver_done = true;
  });
  // The driver ends the open phase at open_limit by itself; this wait is bounded all the same.
  while (!all_open && !driver_done && Clock::now() < row_start + open_limit + kScaleRowMargin) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  std::exception_ptr failure;
  if (all_open) {
    try {
      const auto backend_before = backend_cpu(name, url);
      const double dlockd_before = cpu_seconds(dlockd.pid());
      const auto t0 = Clock::now();
      auto pairs_run = std::async(std::launch::async, [&] {
        return http_pairs(dlockd.target(), name, options.scale_clients, window);
      });
      if (pairs_run.wait_until(row_deadline) == std::future_status::ready) {
        Measurement pairs = pairs_run.get();
        const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
        figures.dlockd_cpu_percent = 100.0 * (cpu_seconds(dlockd.pid()) - dlockd_before) / elapsed;
        if (name != "sqlite") {
          figures.backend_cpu_percent =
              100.0 * cpu_between(backend_before, backend_cpu(name, url)) / elapsed;
        }
        figures.rss_mib = rss_mib(dlockd.pid());
        figures.pairs_per_s = pairs.per_second();
        figures.pairs_clients = options.scale_clients;
        pairs.workload = "pairs-scale";
        record(std::move(pairs));
      } else {
        log(name +
            " sessions-scale: the lock workload had not ended at the row's bound: "
            "killing its dlockd");
        figures.rss_mib = rss_mib(dlockd.pid());
        figures.row_stopped = true;
        dlockd.kill9();
        try {
          pairs_run.get();  // its requests failed with dlockd
        } catch (const std::exception&) {
        }
      }
    } catch (...) {
      failure = std::current_exception();  // the driver is stopped and joined first
    }
  }
  stop = true;
  // The driver drains for 2 s; one held longer (a renewer reconnecting to a dlockd that does
  // not accept) is released by killing dlockd.
  const auto drain_deadline = std::max(row_deadline, Clock::now() + std::chrono::seconds(5));
  while (!driver_done && Clock::now() < drain_deadline) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  if (!driver_done) {
    log(name + " sessions-scale: the driver had not ended at the row's bound: killing its dlockd");
    figures.row_stopped = true;
    dlockd.kill9();
  }
  driver.join();
  report_sessions_scale(options, name, scale, result, figures, extras);
  if (failure) std::rethrow_exception(failure);
}

}  // namespace dlock::bench
