// Fencing in another language (issue 42, docs/fencing.md "From Python"): scenario (a) of
// fencing_fault_test -- a holder stopped with SIGSTOP between its validity check and its write,
// past its TTL, while a second executor takes the batch over and pays, then SIGCONT -- with the
// Python payout executor (examples/payout-executor-python: the Python client and its guard
// helper dlock.fence over psycopg) against a real dlockd and PostgreSQL. The same fixture,
// history and checker as the C++ executor's scenarios: this binary is built with
// DLOCK_PAYOUT_EXECUTOR_PATH naming tests/safety/python-payout-executor, which runs the Python
// executor with the same flags and log lines.
//
// The checker must find no violation and the guard must refuse the stale write; the negative
// control (--no-fencing) must make the checker report the double payout.

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

TEST_P(PythonFencingFaults, A_PausedPythonHolderPastTtlIsFencedOff) {
  const auto report = run_pause_scenario(true, cycles(1, 15));
  print(std::cout, report);
  EXPECT_TRUE(report.ok());
  // The scenario really produced a stale write, and the guard refused it (once per cycle).
  EXPECT_EQ(report.rejected_writes, static_cast<std::size_t>(cycles(1, 15)));
}

// THE NEGATIVE CONTROL: the same pause with executors that skip the guard must be caught.
TEST_P(PythonFencingFaults, NegativeControl_WithoutFencingThePythonHolderPaysTwice) {
  const auto report = run_pause_scenario(false, 1);
  print(std::cout, report);
  EXPECT_FALSE(report.ok()) << "the checker missed the stale holder's write";
  EXPECT_TRUE(report.has("I3")) << "expected a double payout";
  EXPECT_TRUE(report.has("I2")) << "expected a stale token accepted";
  EXPECT_EQ(report.rejected_writes, 0u);
}

// Scenario (l) with Python leaders (--elect: Session.campaign, a session-bound leadership): the
// leader stopped past its session's end wakes after the next leader paid; its write is refused.
TEST_P(PythonFencingFaults, L_PausedPythonLeaderPastItsSessionIsFencedOff) {
  const auto report = run_pause_scenario(true, cycles(1, 10), /*elect=*/true);
  print(std::cout, report);
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.rejected_writes, static_cast<std::size_t>(cycles(1, 10)));
}

std::vector<std::string> safety_backends() {
  std::vector<std::string> backends = {"sqlite", "pg"};
#ifdef DLOCK_WITH_ETCD
  backends.push_back("etcd");
#endif
  return backends;
}

INSTANTIATE_TEST_SUITE_P(Backends, PythonFencingFaults, ::testing::ValuesIn(safety_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dlock::safety
