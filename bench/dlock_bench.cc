// dlock-bench: measures dlock against the raw backend operation (path 1), the store SPI
// in-process (path 2), dlockd over HTTP keep-alive (path 3) and PostgreSQL advisory locks
// (anchor), in one run, and writes report.md + summary.json + gnuplot data (bench/README.md).

#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

#include "auth/crypto.h"
#include "auth/permissions.h"
#include "auth/tokens_file.h"
#include "cost.h"
#include "elections.h"
#include "holder_sets.h"
#include "http_load.h"
#include "raw_paths.h"
#include "report.h"
#include "scenarios.h"
#include "store/factory.h"
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

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buffer;
}

void log_measurement(const Measurement& m) {
  std::ostringstream s;
  s << m.backend << " " << m.path << " " << m.workload << " c=" << m.clients << ": "
    << static_cast<long long>(m.per_second()) << "/s p50=" << m.p50_ms << "ms p99=" << m.p99_ms
    << "ms attempts=" << m.attempts << " errors=" << m.errors;
  log(s.str());
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

// Election failover (elections.h): the next campaigner's grant and an observer's answer after
// the leader's session expires. A backend without elections yet answers the campaign 503: noted.
void run_election_failover(const Options& options, const std::string& name,
                           const HttpTarget& target, BackendExtras& extras,
                           const std::function<void(Measurement)>& record) {
  if (options.election_rounds <= 0) {
    extras.notes["failover_grant_p50_ms"] = "not measured in this mode (--election-rounds 0)";
    return;
  }
  try {
    auto failover =
        http_election_failover(target, name, options.election_rounds, options.election_ttl_ms);
    for (auto& m : failover.measurements) record(std::move(m));
    if (!failover.note.empty()) extras.notes["failover_grant_p50_ms"] = failover.note;
    if (failover.ttl_ms > 0) extras.election_ttl_ms = failover.ttl_ms;
  } catch (const std::exception& e) {
    log(name + " election failover failed: " + e.what());
    extras.notes["failover_grant_p50_ms"] = std::string("failed: ") + e.what();
  }
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
  if (options.election_only) {
    const Dlockd dlockd(options, name, sqlite_path, url);
    return run_election_failover(options, name, dlockd.target(), extras, record);
  }
  if (options.cost_only) {
    const GrantCost cost = grant_cost(dlockd_options(options, name, sqlite_path, url), work_dir,
                                      options.cost_cycles, options.cost_instruction_cycles);
    char line[256];
    std::snprintf(line, sizeof line, "%.1f us CPU, %.1f us wall per grant over %d serial cycles",
                  cost.cpu_us_per_grant, cost.wall_us_per_grant, cost.cpu_cycles);
    extras.notes["cost_cpu_per_grant"] = line;
    log(name + " cost: " + line);
    if (cost.instructions_per_grant) {
      std::snprintf(line, sizeof line, "%.0f instructions per grant over %d cycles (callgrind)",
                    *cost.instructions_per_grant, cost.instruction_cycles);
      extras.notes["cost_instructions_per_grant"] = line;
      log(name + " cost: " + line);
    }
    return;
  }
  if (options.holders_only) {
    const Dlockd dlockd(options, name, sqlite_path, url);
    for (int c : options.clients) holder_sets(dlockd.target(), name, c, duration, true, record);
    return;
  }

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

  // Path 3: dlockd over HTTP, TTL locks (http) and session-bound ones (http-sb, ADR-0018)
  // alternately at each client count, so that drift hits both alike.
  Dlockd dlockd(options, name, sqlite_path, url);
  for (int c : options.clients) {
    record(http_pairs(dlockd.target(), name, c, duration));
    record(http_pairs(dlockd.target(), name, c, duration, /*session_bound=*/true));
    // Holder sets (ADR-0020) beside the exclusive pairs: shared grants, permits.
    holder_sets(dlockd.target(), name, c, duration, /*standalone=*/false, record);
  }
  // The hot key (http below the largest client count: that one follows, with its extras).
  for (int c : options.clients) {
    std::vector<double> ignored, ignored_sent;
    if (c != cmax) record(http_hot({dlockd.target()}, name, c, duration, ignored, ignored_sent));
    record(http_hot({dlockd.target()}, name, c, duration, ignored, ignored_sent,
                    /*session_bound=*/true));
  }
  // What one HTTP request costs without a write, at the smallest client count, measured next to
  // the hot key whose grant interval it explains (http_load.h, ProbeShape).
  const int cmin = options.clients.front();
  record(http_probe(dlockd.target(), name, cmin, duration, ProbeShape::kFloor));
  record(http_probe(dlockd.target(), name, cmin, duration, ProbeShape::kRead));
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
        "dlockd's dlock_backend_acquire_attempts_total delta per grant: each attempt (try_grant "
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

  run_election_failover(options, name, dlockd.target(), extras, record);

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
  run_sessions_scale(options, name, url, work_dir, dlockd.target(), fill.session_ids, extras,
                     record);
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
  app.add_option("--dlockd-cpus", options.dlockd_cpus,
                 "[BACKEND=]LIST: run that backend's dlockd (no BACKEND: every other one) pinned "
                 "to the CPUs in LIST (taskset -c; e.g. 0, sqlite=1), as docs/deploy.md \"CPU "
                 "placement\" describes; repeatable; default: not pinned")
      ->allow_extra_args(false)
      ->check([](const std::string& entry) {
        const auto list =
            entry.substr(entry.find('=') == std::string::npos ? 0 : entry.find('=') + 1);
        const bool ok = !list.empty() &&
                        list.find_first_not_of("0123456789,-") == std::string::npos &&
                        std::isdigit(static_cast<unsigned char>(list.front())) &&
                        std::isdigit(static_cast<unsigned char>(list.back()));
        return ok ? std::string() : "'" + entry + "' is not [BACKEND=]LIST, e.g. 0 or sqlite=1";
      });
  app.add_option("--idle-ms", options.idle_ms, "Idle time over which dlockd's CPU is measured");
  app.add_option("--waiters", options.waiters, "Blocked waiters for the scale figure (0: none)");
  app.add_option("--big-fill-backends", options.big_fill_backends,
                 "Backends filled with 10k sessions, 100k locks and 10k waiters for the RSS figure")
      ->delimiter(',');
  app.add_flag("--tls", options.tls,
               "Also measure the TLS cost: uncontended pairs through an HTTPS dlockd against a "
               "plain one, alternately, at every client count");
  app.add_flag("--tls-only", options.tls_only, "Measure the TLS cost only");
  app.add_option("--scale-sessions", options.scale_sessions,
                 "Sessions kept alive in the sessions-scale row (0: not measured)");
  app.add_option("--scale-ttl-ms", options.scale_ttl_ms, "Their TTL");
  app.add_option("--scale-keepalive-ms", options.scale_keepalive_ms, "Their keepalive interval");
  app.add_option("--scale-window-ms", options.scale_window_ms,
                 "How long the lock workload runs once the open phase is over");
  app.add_option("--scale-clients", options.scale_clients,
                 "Clients of that lock workload (uncontended pairs)");
  app.add_option("--scale-open-limit-ms", options.scale_open_limit_ms,
                 "Bound on the open phase: past it no session is opened, and the window runs "
                 "with those that are (0: 2.4 ms per session, at least 20 s); the whole row is "
                 "bounded by it + --scale-window-ms + 30 s");
  app.add_option("--etcd-flag", options.etcd_flags,
                 "A flag for the bench's etcd, e.g. --etcd-flag=--auto-compaction-retention=1m "
                 "(repeatable; replaces the default, the deployment's compaction)")
      ->allow_extra_args(false);
  app.add_option("--election-rounds", options.election_rounds,
                 "Election failover rounds (0: not measured); each costs at least the TTL");
  app.add_option("--election-ttl-ms", options.election_ttl_ms,
                 "The failing leader's session TTL (dlockd's smallest is 1000)");
  app.add_flag("--election-only", options.election_only, "Measure the election failover only");
  app.add_flag("--cost-only", options.cost_only,
               "Measure dlockd's cost per grant only: CPU (/proc) and instructions (callgrind)");
  app.add_option("--cost-cycles", options.cost_cycles,
                 "Serial acquire + release cycles for the CPU per grant");
  app.add_option("--cost-instruction-cycles", options.cost_instruction_cycles,
                 "Cycles counted under callgrind (0: no instruction count)");
  app.add_flag("--holders-only", options.holders_only,
               "Measure the holder-set row only (shared grants and permits against exclusive "
               "pairs and the exclusive hot key)");
  std::string token_file;
  bool auth = false;
  app.add_option("--token-file", token_file,
                 "File whose first line is the bearer token sent to dlockd (else DLOCK_TOKEN, "
                 "else the file DLOCK_TOKEN_FILE names)");
  app.add_flag("--auth", auth,
               "Start every dlockd with a tokens file naming the bench (lock:*) and its token "
               "(the one given, else a fresh one): the HTTP paths pay for authentication (C6)");
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

  std::string token;
  try {
    token = resolve_bearer_token(token_file);
  } catch (const std::exception& e) {
    log(e.what());
    return 2;
  }
  const std::string work_dir = testing::make_temp_dir("dlock-bench");
  if (auth) {
    if (token.empty()) token = auth::random_token();
    options.auth_tokens_file = work_dir + "/tokens";
    std::ofstream(options.auth_tokens_file)
        << auth::tokens_file_line("bench", token, auth::parse_permissions("lock:*")) << "\n";
    log("authentication on: every dlockd has the tokens file " + options.auth_tokens_file);
  }
  set_bearer_token(token);
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
        etcd = std::make_unique<testing::EtcdCluster>(1, false, options.etcd_flags);
        backend_url = etcd->endpoints();
        std::string flags;
        for (const auto& flag : options.etcd_flags) flags += (flags.empty() ? "" : " ") + flag;
        extras[name].notes["etcd_flags"] = "the bench's etcd ran with: " + flags;
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
      if (const auto cpus = dlockd_cpus(options, name); !cpus.empty()) {
        extras[name].notes["dlockd_cpus"] =
            "every dlockd of this backend ran pinned to CPUs " + cpus + " (taskset -c)";
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
