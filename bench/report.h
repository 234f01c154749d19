#pragma once

// report.md, summary.json and the gnuplot data files of one run.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench.h"

namespace dlock::bench {

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
  std::optional<double> waiters_seen;        // dlockd's dlock_waiters gauge at that moment
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
