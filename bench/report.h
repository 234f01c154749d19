#pragma once

// report.md, summary.json and the gnuplot data files of one run.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench.h"

namespace dlock::bench {

// The sessions-scale row (sessions_scale.h): N sessions kept alive while a lock workload runs.
struct SessionsScaleFigures {
  std::uint64_t sessions = 0, opened = 0, open_errors = 0, lost = 0;
  std::uint64_t keepalives = 0, keepalive_errors = 0, reconnects = 0;
  double ttl_s = 0, keepalive_every_s = 0;
  double open_seconds = 0, window_seconds = 0, max_behind_ms = 0;
  std::optional<double> keepalive_p50_ms, keepalive_p99_ms, keepalives_per_s;
  std::optional<double> dlockd_cpu_percent, backend_cpu_percent, rss_mib;
  std::optional<double> pairs_per_s;  // the lock workload during the window
  int pairs_clients = 0;
  // The open phase's bound (--scale-open-limit-ms): hit = the window ran with fewer sessions
  // than asked for (`opened_at_window` of `sessions`, `opened` once the opens in flight had
  // answered). row_stopped: the row overran its whole bound and dlockd was killed.
  double open_limit_s = 0;
  bool open_limit_hit = false, row_stopped = false;
  std::uint64_t opened_at_window = 0;
  // The fill row's sessions (and their locks) closed before the row (http_close_sessions).
  std::uint64_t fill_sessions = 0, fill_closed = 0;
  double fill_close_seconds = 0;
};

// Figures that are not one Measurement (per backend).
struct BackendExtras {
  std::vector<double> handoff_ms;                // release 204 received -> next grant received
  std::vector<double> handoff_sent_ms;           // release sent -> next grant received
  std::vector<double> handoff_ms_two_servers;    // as handoff_ms, holder and waiters on two dlockd
  std::vector<double> handoff_hot_ms;            // as handoff_ms, every grant of the hot-key run
  std::vector<double> handoff_hot_sent_ms;       // as handoff_sent_ms, idem
  std::optional<double> writes_per_grant_hot;    // backend writes per hot-key grant (see notes)
  std::optional<double> attempts_per_grant_hot;  // dlockd's backend attempts per hot-key grant
  std::optional<double> rss_mib;                 // dlockd VmRSS after the fill
  std::uint64_t rss_locks = 0, rss_sessions = 0;
  std::optional<double> idle_cpu_percent;  // dlockd CPU while idle-holding them
  std::optional<double> rss_mib_waiters;   // VmRSS with `blocked_waiters` acquires waiting
  std::uint64_t blocked_waiters = 0;
  std::optional<double> waiters_seen;  // dlockd's dlock_waiters gauge at that moment
  std::optional<SessionsScaleFigures> sessions_scale;
  std::optional<double> election_ttl_ms;     // the failing leader's session TTL (elections.h)
  std::map<std::string, std::string> notes;  // summary key -> why it is null
};

struct RunInfo {
  std::string mode;
  std::vector<int> clients;
  int duration_ms = 0;
  std::string started_at;
  std::string command;
};

void write_report(const std::string& dir, const RunInfo& info,
                  const std::vector<Measurement>& measurements,
                  const std::map<std::string, BackendExtras>& extras,
                  const std::vector<std::string>& backends);

}  // namespace dlock::bench
