// Fencing in another language (issue 42, docs/fencing.md "From Python"): scenario (a) of
// fencing_fault_test -- a holder stopped with SIGSTOP between its validity check and its write,
// past its TTL, while a second executor takes the batch over and pays, then SIGCONT -- and (l),
// the same for an election's leader, with the Python payout executor
// (examples/payout-executor-python: the Python client and its guard helper dlock.fence over
// psycopg) against a real dlockd and PostgreSQL. The same fixture, history and checker as the
// C++ executor's scenarios: this binary is built with DLOCK_PAYOUT_EXECUTOR_PATH naming
// tests/safety/python-payout-executor, which runs the Python executor (same flags, log lines,
// tables).

#include <gtest/gtest.h>
#include <stdlib.h>

#include "safety/fencing_faults.h"

namespace dlock::safety {
namespace {

class PythonFencingFaults : public FencingFaults {
 protected:
  void SetUp() override {
    // The executors' python (the test tools' virtual environment, which has psycopg), also when
    // the binary runs outside CTest (scripts/mutation-check).
    ::setenv("DLOCK_TEST_PYTHON", DLOCK_TEST_PYTHON_PATH, /*overwrite=*/0);
    FencingFaults::SetUp();
  }
};

// The guard refused the paused holder's stale write once per cycle, and the checker found nothing.
void expect_fenced_off(const Report& report, int cycle_count) {
  print(std::cout, report);
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.rejected_writes, static_cast<std::size_t>(cycle_count))
      << "the scenario did not produce the stale write it exists for";
}

TEST_P(PythonFencingFaults, A_PausedPythonHolderPastTtlIsFencedOff) {
  const int cycle_count = cycles(1, 15);
  expect_fenced_off(run_pause_scenario(true, cycle_count), cycle_count);
}

// Scenario (l) with Python leaders (--elect: Session.campaign, a session-bound leadership): the
// leader stopped past its session's end wakes after the next leader paid; its write is refused.
TEST_P(PythonFencingFaults, L_PausedPythonLeaderPastItsSessionIsFencedOff) {
  const int cycle_count = cycles(1, 10);
  expect_fenced_off(run_pause_scenario(true, cycle_count, /*elect=*/true), cycle_count);
}

// THE NEGATIVE CONTROL: the same pause with executors that skip the guard (--no-fencing): the
// stale holder pays a payout the new holder paid already, and the checker must say so.
TEST_P(PythonFencingFaults, NegativeControl_WithoutFencingThePythonHolderPaysTwice) {
  const auto report = run_pause_scenario(false, 1);
  print(std::cout, report);
  EXPECT_TRUE(report.has("I3")) << "the checker missed the double payout";
  EXPECT_TRUE(report.has("I2")) << "the checker missed the stale token accepted";
  EXPECT_EQ(report.rejected_writes, 0u) << "a guard ran although --no-fencing was given";
}

#ifdef DLOCK_WITH_ETCD
const std::string kBackends[] = {"sqlite", "pg", "etcd"};
#else
const std::string kBackends[] = {"sqlite", "pg"};
#endif
INSTANTIATE_TEST_SUITE_P(Backends, PythonFencingFaults, ::testing::ValuesIn(kBackends),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dlock::safety
