// Scenario (n) of docs/fencing.md, read-write locks: a paused writer under readers. Real dlockd
// and payout-executor processes (writers, and readers with --read), a real PostgreSQL resource,
// the fixture of fencing_faults.h; the checker's I6 is the invariant at stake.
//
// What the guard does (src/fencing/fencing_guard.cc): admit_read(resource, token) admits a reader
// unless a write with a greater token was accepted (highest_token <= token), and raises the
// resource's highest_read_token to the reader's token (never lowers it: readers come in any
// order). admit() then admits a writer only if its token is >= both the highest write token and
// highest_read_token. Tokens of one key come from one source across modes (ADR-0020): a shared
// grant made after a writer's lease ended carries a greater token than the writer's, so once such
// a reader has read, the stale writer's write is refused.

#include <signal.h>

#include "safety/fencing_faults.h"

namespace dlock::safety {

// The writer holds its batch exclusively and is stopped with SIGSTOP between its validity check
// and its second payment, past its 2 s lease. Two readers then take the batch in shared mode
// (their tokens greater than the writer's), admit their tokens with admit_read and read what the
// batch has paid, and exit. On SIGCONT the writer makes its write with its old token: the guard
// must refuse it (kStale: a reader with a greater token read after the writer's grant ended);
// the writer then takes the batch again, with a token above the readers', and pays the rest.
Report FencingFaults::run_paused_writer_scenario(bool fencing, int cycle_count) {
  History history;
  for (int cycle = 0; cycle < cycle_count; ++cycle) {
    const std::string suffix = std::to_string(cycle);
    const std::string batch = "rw" + suffix;
    seed_payouts(resource_url_, batch, 3);
    auto writer = executor("writer" + suffix, batch, 1200, fencing);
    // The second pay_begin comes after one committed write: the writer is now in its pause.
    EXPECT_TRUE(testing::wait_for([&] { return writer->events("pay_begin") >= 2; }, seconds(30)))
        << "the writer never started its second payment";
    writer->process().signal(SIGSTOP);
    history.note_fault("SIGSTOP " + writer->name());
    std::this_thread::sleep_for(milliseconds(3000));  // past the 2 s lease: the point
    std::vector<std::unique_ptr<ExecutorProcess>> readers;
    for (const char* name : {"reader-a", "reader-b"}) {
      readers.push_back(reader(name + suffix, batch, fencing));
    }
    for (auto& r : readers) EXPECT_EQ(r->process().wait(seconds(60)), 0) << r->name();
    writer->process().signal(SIGCONT);
    EXPECT_EQ(writer->process().wait(seconds(60)), 0) << "the writer did not finish";
    history.load_executor_log(writer->log_path(), writer->name());
    for (auto& r : readers) history.load_executor_log(r->log_path(), r->name());
  }
  const auto ledger = read_ledger(resource_url_);
  return check(name_ + "/readers" + (fencing ? "" : "/no-fencing"), history, &ledger);
}

namespace {

TEST_P(FencingFaults, N_PausedWriterUnderReadersIsFencedOff) {
  const int cycle_count = cycles(1, 10);
  const auto report = run_paused_writer_scenario(true, cycle_count);
  print(std::cout, report);
  EXPECT_TRUE(report.ok());
  // Both readers read in every cycle, and the paused writer's write was refused once per cycle:
  // no other writer wrote, so only the readers' tokens can have refused it.
  EXPECT_EQ(report.reads, static_cast<std::size_t>(2 * cycle_count));
  EXPECT_EQ(report.rejected_writes, static_cast<std::size_t>(cycle_count));
}

// Its negative control: without the guard the woken writer's write is accepted with a token below
// the readers' -- the state they read changed under a grant that was over. Nothing is paid twice
// (I3) and no greater write token came first (I2): only I6 sees it.
TEST_P(FencingFaults, NegativeControl_WithoutFencingAPausedWriterOverwritesWhatReadersSaw) {
  const auto report = run_paused_writer_scenario(false, 1);
  print(std::cout, report);
  EXPECT_FALSE(report.ok()) << "the checker missed the stale writer's write";
  EXPECT_TRUE(report.has("I6")) << "expected a write below an admitted reader's token";
  EXPECT_FALSE(report.has("I3"));
  EXPECT_EQ(report.reads, 2u);
  EXPECT_EQ(report.rejected_writes, 0u);
}

}  // namespace
}  // namespace dlock::safety
