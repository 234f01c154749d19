#pragma once

// What one grant costs dlockd, in figures that do not drift with the machine's load (issue 39,
// bench/README.md "Cost per grant"): one client, one keep-alive connection, acquire + release
// of one key, one after the other.
//
// - CPU per grant: dlockd's utime + stime (/proc) over `cpu_cycles` cycles, divided by them.
// - Instructions per grant: the same cycles under callgrind (valgrind, when installed), counted
//   between a zeroing and a dump (callgrind_control) so that start-up and shutdown are left out;
//   every thread of dlockd is counted, its idle timers included (a few thousand instructions a
//   second against millions per second of work).

#include <string>

#include "support/dlockd_process.h"

namespace dlock::bench {

struct GrantCost {
  double cpu_us_per_grant = 0;
  double wall_us_per_grant = 0;
  int cpu_cycles = 0;
  // Empty when callgrind is not installed.
  std::optional<double> instructions_per_grant;
  int instruction_cycles = 0;
};

// `options`: how to start the dlockd to measure (a second one is started under callgrind with
// the same options). `work_dir` keeps callgrind's dump.
GrantCost grant_cost(const testing::DlockdOptions& options, const std::string& work_dir,
                     int cpu_cycles, int instruction_cycles);

}  // namespace dlock::bench
