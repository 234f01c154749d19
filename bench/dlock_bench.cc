// dlock-bench: measures dlock against the raw backend operation (path 1), the store SPI
// in-process (path 2), dlockd over HTTP keep-alive (path 3) and PostgreSQL advisory locks
// (anchor), in one run, and writes report.md + summary.json + gnuplot data (bench/README.md).

#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

#include "http_load.h"
#include "raw_paths.h"
#include "report.h"
#include "store/factory.h"
#include "support/dlockd_process.h"
#include "support/subprocess.h"
#include "tls_cost.h"
#ifdef DLOCK_WITH_PG
#include "support/postgres_server.h"
#endif
#ifdef DLOCK_WITH_ETCD
#include "etcd_paths.h"
#include "support/etcd_server.h"
#endif

namespace dlock::bench {
namespace {

using std::chrono::milliseconds;

struct Options {
  std::string mode = "quick";
  std::vector<std::string> backends{"sqlite", "pg", "etcd"};
  std::vector<int> clients{1, 16, 64};
  int duration_ms = 2000;
  std::uint64_t fill_sessions = 1000;
  std::uint64_t fill_locks = 10000;
  std::string out;
  std::string dlockd = DLOCK_DLOCKD_PATH;
  int idle_ms = 2000;
  // Backends whose scale figure uses 10k sessions and 100k locks whatever --fill-* say.
  std::vector<std::string> big_fill_backends;
  int waiters = 0;
  bool tls = false;       // also measure the TLS cost (tls_cost.h)
  bool tls_only = false;  // measure the TLS cost only
};

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buffer;
}

void log(const std::string& line) { std::cerr << "[dlock-bench] " << line << std::endl; }

void log_measurement(const Measurement& m) {
  std::ostringstream s;
  s << m.backend << " " << m.path << " " << m.workload << " c=" << m.clients << ": "
    << static_cast<long long>(m.per_second()) << "/s p50=" << m.p50_ms << "ms p99=" << m.p99_ms
    << "ms attempts=" << m.attempts << " errors=" << m.errors;
  log(s.str());
}

testing::DlockdOptions dlockd_options(const Options& options, const std::string& backend,
                                      const std::string& sqlite_path, const std::string& url) {
  testing::DlockdOptions result;
  result.binary = options.dlockd;
  result.backend = backend;
  result.log_level = "warn";
  if (backend == "sqlite") result.sqlite_path = sqlite_path;
  if (backend == "pg") result.pg_url = url;
  if (backend == "etcd") result.etcd_endpoints = url;
  return result;
}

// Path 3's dlockd (tests/support/dlockd_process.h) and its HTTP target.
class Dlockd {
 public:
  Dlockd(const Options& options, const std::string& backend, const std::string& sqlite_path,
         const std::string& url)
      : process_(dlockd_options(options, backend, sqlite_path, url)) {
    const std::string& address = process_.address();
    const auto colon = address.rfind(':');
    target_.host = address.substr(0, colon);
    target_.port = static_cast<unsigned short>(std::stoi(address.substr(colon + 1)));
  }
  const HttpTarget& target() const { return target_; }
  pid_t pid() const { return process_.pid(); }

 private:
  testing::DlockdProcess process_;
  HttpTarget target_;
};

// etcd_server_proposals_committed_total from etcd's /metrics (every Txn, granted or not, and
// every lease grant/revoke is a committed raft proposal: a durable write); -1 if unavailable.
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

// The value of the first sample of `name` (any labels) in Prometheus text, or nullopt.
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

// utime + stime of `pid`, in seconds.
double cpu_seconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
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
            const auto handle =
                backend.try_insert(key, s.owner_id, s.session_id, milliseconds(30000));
            const auto t1 = Clock::now();
            if (!handle) {
              ++out.errors;
              return;
            }
            if (!backend.delete_if_owner(key, s.owner_id, s.session_id, handle->fencing_token)) {
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

// The SPI on one hot key: every client retries try_insert in a loop and releases when granted
// (the SPI has no queue; waiting is dlockd's). The herd against the store, in process.
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
            const auto handle =
                backend.try_insert(key, s.owner_id, s.session_id, milliseconds(30000));
            if (!handle) return;
            ++out.ops;
            out.op_ms.push_back(ms_between(**started, Clock::now()));
            if (!backend.delete_if_owner(key, s.owner_id, s.session_id, handle->fencing_token)) {
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

// dlockd's dlock_backend_acquire_attempts_total (every try_insert and hand-over it sent).
std::optional<double> dlockd_attempts(const HttpTarget& target) {
  return metric_value(http_get_text(target, "/metrics"), "dlock_backend_acquire_attempts_total");
}

// The TLS cost (tls_cost.h): a plain and a TLS dlockd of their own (for sqlite, each on its own
// file: one dlockd per file), at every client count.
void run_tls_cost(const Options& options, const std::string& name, const std::string& url,
                  const std::string& work_dir, const std::function<void(Measurement)>& record) {
  std::vector<Measurement> measured;
  tls_cost(dlockd_options(options, name, work_dir + "/" + name + "-plain.db", url),
           dlockd_options(options, name, work_dir + "/" + name + "-tls.db", url), work_dir, name,
           options.clients, milliseconds(options.duration_ms), measured);
  for (auto& m : measured) record(std::move(m));
}

// `url`: the pg URL or the etcd endpoints.
void run_backend(const Options& options, const std::string& name, const std::string& url,
                 const std::string& work_dir, std::vector<Measurement>& all,
                 BackendExtras& extras) {
  const milliseconds duration(options.duration_ms);
  const int cmax = options.clients.back();
  const std::string sqlite_path = work_dir + "/" + name + ".db";
  [[maybe_unused]] const std::string& pg_url = url;
  auto record = [&](Measurement m) {
    log_measurement(m);
    all.push_back(std::move(m));
#ifdef DLOCK_WITH_PG
    if (name == "pg") pg_vacuum(url);  // the next path starts on tables without dead rows
#endif
  };
  if (options.tls_only) return run_tls_cost(options, name, url, work_dir, record);

  std::vector<RawSession> sessions;
  {
    store::StoreConfig config;
    config.backend = name;
    config.sqlite_path = sqlite_path;
    if (name == "pg") config.pg_url = url;
    if (name == "etcd") config.etcd_endpoints = url;
    auto backend = store::make_backend(config);  // also creates the schema
    if (name == "sqlite") sqlite_presize_wal(sqlite_path);
    for (int i = 0; i < cmax; ++i) {
      const auto s = backend->open_session("bench-" + std::to_string(i), milliseconds(3600000));
      sessions.push_back({s.owner_id, s.session_id});
    }
    // Path 1: raw statements, and the anchor.
    for (int c : options.clients) {
#ifdef DLOCK_WITH_PG
      if (name == "pg") record(pg_raw_pairs(pg_url, sessions, c, duration));
#endif
      if (name == "sqlite") record(sqlite_raw_pairs(sqlite_path, sessions, c, duration));
    }
#ifdef DLOCK_WITH_PG
    if (name == "pg") {
      for (int c : options.clients) record(pg_advisory_pairs(pg_url, c, duration));
      for (int c : options.clients) record(pg_advisory_hot(pg_url, c, duration));
      for (int c : options.clients) {
        const long long before = pg_token_sequence(pg_url);
        auto hot = pg_raw_hot(pg_url, sessions, c, duration);
        const long long after = pg_token_sequence(pg_url);
        if (hot.ops > 0 && c == cmax) {
          extras.notes["raw_hot_sequence_per_grant"] =
              std::to_string(static_cast<double>(after - before) / static_cast<double>(hot.ops)) +
              " nextval per grant for the raw retry-loop herd (for comparison)";
        }
        record(std::move(hot));
      }
    }
#endif
    if (name == "sqlite") {
      for (int c : options.clients) record(sqlite_raw_hot(sqlite_path, sessions, c, duration));
    }
    if (name == "sqlite") {
      extras.notes["http_over_raw_throughput_c64"] =
          "raw sqlite at N clients is N threads taking turns on one connection under a mutex "
          "(as the store does): on 2 cores that convoy falls below the serial rate, so the "
          "physical limit is the 1-client rate (raw_p50_ms_c1), not the raw row at 64";
    }
#ifdef DLOCK_WITH_ETCD
    if (name == "etcd") {
      for (int c : options.clients) record(etcd_raw_pairs(url, c, duration));
      for (int c : options.clients) record(etcd_lock_service_pairs(url, c, duration));
      for (int c : options.clients) {
        const double before = etcd_proposals(url);
        auto hot = etcd_raw_hot(url, c, duration);
        const double after = etcd_proposals(url);
        if (hot.ops > 0 && before >= 0 && after >= 0 && c == cmax) {
          extras.notes["raw_hot_proposals_per_grant"] =
              std::to_string((after - before) / static_cast<double>(hot.ops)) +
              " committed raft proposals per grant for the raw retry-loop herd (for comparison)";
        }
        record(std::move(hot));
      }
      for (int c : options.clients) record(etcd_lock_service_hot(url, c, duration));
    }
#endif
    // Path 2: the store SPI in-process, a thread per client.
    for (int c : options.clients) record(spi_pairs(*backend, name, sessions, c, duration));
    for (int c : options.clients) record(spi_hot(*backend, name, sessions, c, duration));
  }

  // Path 3: dlockd over HTTP.
  Dlockd dlockd(options, name, sqlite_path, url);
  for (int c : options.clients) record(http_pairs(dlockd.target(), name, c, duration));
  // The hot key below the largest client count (the largest one follows, with its extras).
  for (int c : options.clients) {
    if (c == cmax) continue;
    std::vector<double> ignored, ignored_sent;
    record(http_hot({dlockd.target()}, name, c, duration, ignored, ignored_sent));
  }
  const auto attempts_before = dlockd_attempts(dlockd.target());
#ifdef DLOCK_WITH_PG
  const long long before = name == "pg" ? pg_token_sequence(pg_url) : 0;
#endif
  const double etcd_before = name == "etcd" ? etcd_proposals(url) : -1;
  auto hot = http_hot({dlockd.target()}, name, cmax, duration, extras.handoff_hot_ms,
                      extras.handoff_hot_sent_ms);
#ifdef DLOCK_WITH_PG
  if (name == "pg" && hot.ops > 0) {
    const long long after = pg_token_sequence(pg_url);
    extras.writes_per_grant_hot =
        static_cast<double>(after - before) / static_cast<double>(hot.ops);
    extras.notes["backend_writes_per_grant_hot"] =
        "nextval('fencing_token_seq') calls per grant: every pg acquire attempt, granted or "
        "not, takes one and is a durable write";
  }
#endif
  if (name == "etcd") {
    const double after = etcd_proposals(url);
    if (hot.ops > 0 && etcd_before >= 0 && after >= 0) {
      extras.writes_per_grant_hot = (after - etcd_before) / static_cast<double>(hot.ops);
      extras.notes["backend_writes_per_grant_hot"] =
          "etcd_server_proposals_committed_total delta per grant: every Txn (granted or not), "
          "lease grant and revoke is a committed raft proposal, i.e. a durable write";
    } else {
      extras.notes["backend_writes_per_grant_hot"] = "etcd /metrics could not be read";
    }
  }
  const auto attempts_after = dlockd_attempts(dlockd.target());
  if (attempts_before && attempts_after && hot.ops > 0) {
    extras.attempts_per_grant_hot =
        (*attempts_after - *attempts_before) / static_cast<double>(hot.ops);
  }
  if (name == "sqlite") {
    // SQLite has no counter of its own that sees attempts (a held attempt rolls back its
    // token); dlockd's attempt counter does, and each attempt is one write transaction.
    extras.writes_per_grant_hot = extras.attempts_per_grant_hot;
    extras.notes["backend_writes_per_grant_hot"] =
        "dlockd's dlock_backend_acquire_attempts_total delta per grant: each attempt (try_insert "
        "or hand-over) is one BEGIN IMMEDIATE write transaction; one that finds the key held "
        "rolls back instead of committing";
  }
  record(std::move(hot));
  // Handoff as defined: a holder, N waiters queued (N = the largest client count - 1), release.
  const int handoff_waiters = std::max(1, cmax - 1);
  const int handoff_rounds = std::max(3, options.duration_ms / 100);
  const auto queued_on = [](const HttpTarget& target) {
    return [target] {
      return metric_value(http_get_text(target, "/metrics"), "dlock_waiters").value_or(0);
    };
  };
  http_handoff(dlockd.target(), dlockd.target(), handoff_waiters, handoff_rounds,
               queued_on(dlockd.target()), extras.handoff_ms, extras.handoff_sent_ms);
  log(name + " handoff: " + std::to_string(extras.handoff_ms.size()) + " rounds, " +
      std::to_string(handoff_waiters) + " waiters queued each time");
  extras.notes["handoff_p50_ms"] =
      "a holder and N waiters queued on one key (N = largest client count - 1, dlockd's "
      "dlock_waiters gauge confirms them), one sample per round: holder's release 204 received "
      "-> first waiter's 200 received; negative when the grant reaches its client before the "
      "release's 204 reaches the holder (dlockd hands over inside the release). "
      "handoff_from_release_sent_* count from the release being sent; handoff_two_servers_*: "
      "holder on one dlockd, waiters on another sharing the backend; handoff_hot_*: every "
      "grant after the first in the hot-key run";

  // Handoff across two dlockd sharing the backend (waiters on one woken by releases on the
  // other: LISTEN/NOTIFY for pg, watches for etcd). Not for sqlite (one process per file).
  if (name != "sqlite") {
    Dlockd second(options, name, sqlite_path, url);
    std::vector<double> ignored, ignored_sent, ignored_sent_two;
    record(
        http_hot({dlockd.target(), second.target()}, name, cmax, duration, ignored, ignored_sent));
    // Holder on the first dlockd, waiters on the second: woken through the backend.
    http_handoff(dlockd.target(), second.target(), handoff_waiters, handoff_rounds,
                 queued_on(second.target()), extras.handoff_ms_two_servers, ignored_sent_two);
  } else {
    extras.notes["handoff_two_servers_p50_ms"] = "sqlite: one dlockd per database file";
  }

  // Drift check: path 1 at the smallest client count again, now that everything else ran.
  // Absolute times on a shared machine drift (fsync latency above all); a ratio between the
  // two raw runs far from 1 says how far to trust this backend's ratios.
  {
    const int c = options.clients.front();
    Measurement again;
#ifdef DLOCK_WITH_PG
    if (name == "pg") again = pg_raw_pairs(pg_url, sessions, c, duration);
#endif
#ifdef DLOCK_WITH_ETCD
    if (name == "etcd") again = etcd_raw_pairs(url, c, duration);
#endif
    if (name == "sqlite") again = sqlite_raw_pairs(sqlite_path, sessions, c, duration);
    again.path = "raw-again";
    record(std::move(again));
  }

  if (options.tls) run_tls_cost(options, name, url, work_dir, record);

  // Scale: sessions and held locks in one dlockd.
  const bool big = std::find(options.big_fill_backends.begin(), options.big_fill_backends.end(),
                             name) != options.big_fill_backends.end();
  const auto fill = http_fill(dlockd.target(), cmax, big ? 10000 : options.fill_sessions,
                              big ? 100000 : options.fill_locks);
  std::this_thread::sleep_for(milliseconds(options.idle_ms / 4));
  extras.rss_locks = fill.locks;
  extras.rss_sessions = fill.sessions;
  extras.rss_mib = rss_mib(dlockd.pid());
  const double cpu0 = cpu_seconds(dlockd.pid());
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(milliseconds(options.idle_ms));
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  extras.idle_cpu_percent = 100.0 * (cpu_seconds(dlockd.pid()) - cpu0) / elapsed;
  log(name + " fill: " + std::to_string(fill.sessions) + " sessions, " +
      std::to_string(fill.locks) + " locks in " + std::to_string(fill.seconds) + " s, " +
      std::to_string(fill.errors) + " errors, RSS " + std::to_string(*extras.rss_mib) + " MiB");
  record(http_keepalives(dlockd.target(), name, cmax, fill.session_ids, duration));
  const int waiters = big ? std::max(10000, options.waiters) : options.waiters;
  if (waiters > 0) {
    const auto written =
        http_blocked_waiters(dlockd.target(), fill.session_ids, waiters, milliseconds(2000), [&] {
          extras.rss_mib_waiters = rss_mib(dlockd.pid());
          extras.waiters_seen =
              metric_value(http_get_text(dlockd.target(), "/metrics"), "dlock_waiters");
        });
    extras.blocked_waiters = written;
    log(name + " waiters: " + std::to_string(written) + " sent, dlock_waiters " +
        std::to_string(extras.waiters_seen.value_or(-1)) + ", RSS " +
        std::to_string(extras.rss_mib_waiters.value_or(-1)) + " MiB");
  } else {
    extras.notes["rss_mib_with_blocked_waiters"] = "not measured in this mode (--waiters 0)";
  }
  extras.notes["idle_cpu_percent"] =
      "dlockd CPU over --idle-ms idle-holding the filled sessions and locks, measured before "
      "the keepalive run (keepalives_per_s: the filled sessions renewed round robin over "
      "clients_max connections)";
}

int run(int argc, char** argv) {
  Options options;
  CLI::App app{"dlock-bench: dlock against the raw backend and the anchors (bench/README.md)"};
  app.add_option("--mode", options.mode, "Label written into the report (smoke, quick, full)");
  app.add_option("--backends", options.backends, "Backends to measure")->delimiter(',');
  app.add_option("--clients", options.clients, "Client counts, ascending")->delimiter(',');
  app.add_option("--duration-ms", options.duration_ms, "Duration of each measured point");
  app.add_option("--fill-sessions", options.fill_sessions, "Sessions opened for the RSS figure");
  app.add_option("--fill-locks", options.fill_locks, "Locks held for the RSS figure");
  app.add_option("--dlockd", options.dlockd, "dlockd binary");
  app.add_option("--idle-ms", options.idle_ms, "Idle time over which dlockd's CPU is measured");
  app.add_option("--waiters", options.waiters, "Blocked waiters for the scale figure (0: none)");
  app.add_option("--big-fill-backends", options.big_fill_backends,
                 "Backends filled with 10k sessions, 100k locks and 10k waiters for the RSS figure")
      ->delimiter(',');
  app.add_flag("--tls", options.tls,
               "Also measure the TLS cost: uncontended pairs through an HTTPS dlockd against a "
               "plain one, alternately, at every client count");
  app.add_flag("--tls-only", options.tls_only, "Measure the TLS cost only");
  app.add_option("--out", options.out, "Directory for report.md and summary.json")->required();
  CLI11_PARSE(app, argc, argv);
  std::sort(options.clients.begin(), options.clients.end());
  std::filesystem::create_directories(options.out);
  signal(SIGPIPE, SIG_IGN);

  RunInfo info;
  info.mode = options.mode;
  info.clients = options.clients;
  info.duration_ms = options.duration_ms;
  info.started_at = now_utc();
  for (int i = 0; i < argc; ++i) info.command += (i ? " " : "") + std::string(argv[i]);

  const std::string work_dir = testing::make_temp_dir("dlock-bench");
  std::vector<Measurement> all;
  std::map<std::string, BackendExtras> extras;
  std::vector<std::string> measured;
  int status = 0;
  for (const auto& name : options.backends) {
    try {
      std::string backend_url;
#ifdef DLOCK_WITH_ETCD
      std::unique_ptr<testing::EtcdCluster> etcd;
      if (name == "etcd") {
        log("starting etcd");
        etcd = std::make_unique<testing::EtcdCluster>(1);
        backend_url = etcd->endpoints();
      }
#endif
#ifdef DLOCK_WITH_PG
      std::unique_ptr<testing::PostgresServer> pg;
      if (name == "pg") {
        log("starting PostgreSQL");
        pg = std::make_unique<testing::PostgresServer>();
        pg->ensure_database("dlock_bench");
        backend_url = pg->url("dlock_bench");
      }
#endif
      if (backend_url.empty() && name != "sqlite") {
        log(name + ": not built into this dlock-bench, skipped");
        extras[name].notes["all"] = "backend not built into this dlock-bench (or unknown)";
        measured.push_back(name);
        continue;
      }
      run_backend(options, name, backend_url, work_dir, all, extras[name]);
      measured.push_back(name);
    } catch (const std::exception& e) {
      log(name + " failed: " + e.what());
      status = 1;
    }
  }
  write_report(options.out, info, all, extras, measured);
  std::error_code ignored;
  std::filesystem::remove_all(work_dir, ignored);
  log("wrote " + options.out + "/report.md and summary.json");
  return status;
}

}  // namespace
}  // namespace dlock::bench

int main(int argc, char** argv) { return dlock::bench::run(argc, argv); }
