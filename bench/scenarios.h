#pragma once

// What dlock-bench's main loop (dlock_bench.cc) runs besides the HTTP load generator: its
// options, the dlockd it starts, the in-process SPI paths, /proc and /metrics readings, and the
// sessions-scale row (bench/README.md).

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench.h"
#include "dlock/lock_store.h"
#include "http_load.h"
#include "raw_paths.h"
#include "report.h"
#include "support/dlockd_process.h"
#include "support/subprocess.h"

namespace dlock::bench {

struct Options {
  std::string mode = "quick";
  std::vector<std::string> backends{"sqlite", "pg", "etcd"};
  std::vector<int> clients{1, 16, 64};
  int duration_ms = 2000;
  std::uint64_t fill_sessions = 1000;
  std::uint64_t fill_locks = 10000;
  std::string out;
  std::string dlockd = DLOCK_DLOCKD_PATH;
  // --dlockd-cpus: each "[BACKEND=]LIST" pins that backend's dlockd (no BACKEND: every other
  // one) to the CPUs in LIST with `taskset -c`, as a deployment pins it (systemd's
  // CPUAffinity=, docs/deploy.md "CPU placement"); none: not pinned.
  std::vector<std::string> dlockd_cpus;
  int idle_ms = 2000;
  // Backends whose scale figure uses 10k sessions and 100k locks whatever --fill-* say.
  std::vector<std::string> big_fill_backends;
  int waiters = 0;
  bool tls = false;       // also measure the TLS cost (tls_cost.h)
  bool tls_only = false;  // measure the TLS cost only
  // The sessions-scale row (sessions_scale.h): sessions kept alive at scale_ttl_ms, renewed
  // every scale_keepalive_ms, for scale_window_ms once all are open, while scale_clients run
  // uncontended pairs. 0 sessions: not measured.
  std::uint64_t scale_sessions = 0;
  int scale_ttl_ms = 30000;
  int scale_keepalive_ms = 10000;
  int scale_window_ms = 12000;
  int scale_clients = 16;
  // The bound on the row's open phase (0: 2.4 ms per session, at least 20 s: 240 s at 100 000);
  // the whole row is bounded by it + scale_window_ms + kScaleRowMargin.
  int scale_open_limit_ms = 0;
  // Election failover (elections.h): rounds (0: not measured) and the leader session's TTL.
  int election_rounds = 5;
  int election_ttl_ms = 1000;
  bool election_only = false;
  // The holder-set row only (holder_sets.h), with its exclusive references.
  bool holders_only = false;
  // The cost per grant only (cost.h): CPU over cost_cycles serial grants, instructions under
  // callgrind over cost_instruction_cycles (0: not counted).
  bool cost_only = false;
  int cost_cycles = 5000;
  int cost_instruction_cycles = 1000;
  // --auth: every dlockd of the run gets this tokens file (contract C6), written by the bench
  // for its own principal; empty: no authentication.
  std::string auth_tokens_file;
  // --etcd-flag: the bench's etcd's extra flags; by default the history compaction the
  // deployment runs (deploy/k8s/base/etcd-statefulset.yaml, docs/adr/0026).
  std::vector<std::string> etcd_flags{"--auto-compaction-mode=periodic",
                                      "--auto-compaction-retention=5m"};
};

void log(const std::string& line);

// The CPU list --dlockd-cpus gives `backend`'s dlockd; empty: not pinned.
std::string dlockd_cpus(const Options& options, const std::string& backend);

testing::DlockdOptions dlockd_options(const Options& options, const std::string& backend,
                                      const std::string& sqlite_path, const std::string& url);

// With --auth: throws std::runtime_error unless the dlockd at `address` answers a request
// without a token 401 -- its tokens file is in force, so the run measures authenticated paths.
void require_authentication(const std::string& address);

// Path 3's dlockd (tests/support/dlockd_process.h) and its HTTP target.
class Dlockd {
 public:
  Dlockd(const Options& options, const std::string& backend, const std::string& sqlite_path,
         const std::string& url, const std::vector<std::string>& extra_args = {})
      : process_(with_args(dlockd_options(options, backend, sqlite_path, url), extra_args)) {
    const std::string& address = process_.address();
    const auto colon = address.rfind(':');
    target_.host = address.substr(0, colon);
    target_.port = static_cast<unsigned short>(std::stoi(address.substr(colon + 1)));
    if (!options.auth_tokens_file.empty()) require_authentication(address);
  }
  const HttpTarget& target() const { return target_; }
  pid_t pid() const { return process_.pid(); }
  // SIGKILL: every request in flight to it fails at once (a bench row that must end).
  void kill9() { process_.kill9(); }

 private:
  static testing::DlockdOptions with_args(testing::DlockdOptions options,
                                          const std::vector<std::string>& args) {
    options.extra_args.insert(options.extra_args.end(), args.begin(), args.end());
    return options;
  }

 public:
 private:
  testing::DlockdProcess process_;
  HttpTarget target_;
};

// etcd_server_proposals_committed_total from etcd's /metrics (every Txn, granted or not, and
// every lease grant/revoke is a committed raft proposal: a durable write); -1 if unavailable.
double etcd_proposals(const std::string& endpoints);

// The value of the first sample of `name` (any labels) in Prometheus text, or nullopt.
std::optional<double> metric_value(const std::string& text, const std::string& name);

// VmRSS of `pid` in MiB, -1 when unreadable.
double rss_mib(pid_t pid);

// utime + stime of `pid`, in seconds.
using testing::cpu_seconds;  // support/subprocess.h

Measurement spi_pairs(Backend& backend, const std::string& name,
                      const std::vector<RawSession>& sessions, int clients,
                      std::chrono::milliseconds duration);

// The SPI on one hot key: every client retries try_grant in a loop and releases when granted
// (the SPI has no queue; waiting is dlockd's). The herd against the store, in process.
Measurement spi_hot(Backend& backend, const std::string& name,
                    const std::vector<RawSession>& sessions, int clients,
                    std::chrono::milliseconds duration);

// dlockd's dlock_backend_acquire_attempts_total (every try_grant and hand-over it sent).
std::optional<double> dlockd_attempts(const HttpTarget& target);

// The open phase's bound of the sessions-scale row (Options::scale_open_limit_ms, resolved).
std::chrono::milliseconds scale_open_limit(const Options& options);
// What the row may take beyond its open bound and window (the drain: the driver's 2 s, the lock
// workload's requests in flight) before dlockd is killed and the row reports what it has.
inline constexpr std::chrono::seconds kScaleRowMargin{30};

// The sessions-scale row on a dlockd of its own (sqlite: on a file of its own): first closes
// `fill_sessions` (the fill row's, on `fill_target`: their locks go with them), then fills
// extras.sessions_scale and records the lock workload run meanwhile (path "http", workload
// "pairs-scale"). `url`: the pg URL or the etcd endpoints.
void run_sessions_scale(const Options& options, const std::string& name, const std::string& url,
                        const std::string& work_dir, const HttpTarget& fill_target,
                        const std::vector<std::string>& fill_sessions, BackendExtras& extras,
                        const std::function<void(Measurement)>& record);

}  // namespace dlock::bench
