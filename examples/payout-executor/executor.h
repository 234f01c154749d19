#pragma once

// The payout executor: competes for per-batch locks ("payouts/<batch>") through dlockd and
// pays each pending payout of a batch into `ledger` in one transaction with marking it done,
// behind the fencing guard (resource = the batch). Every step is one JSON line on stdout, with
// monotonic start/end times the safety tests read as a history.

#include <chrono>
#include <string>
#include <vector>

namespace payout {

struct Config {
  std::string server_url;
  std::string pg_url;
  std::vector<std::string> batches;
  std::string worker_id;
  std::chrono::milliseconds hold_extra{0};  // sleep after the validity check, before each write
  std::chrono::milliseconds ttl{std::chrono::seconds(30)};  // session and lock lease
  std::chrono::milliseconds wait{std::chrono::seconds(2)};  // acquire wait per attempt
  std::chrono::seconds give_up{120};  // exit 1 when the batches are not all paid by then
  bool fencing = true;                // false: --no-fencing, for the negative control only
  // --elect: each batch is led through an election (C3 "Elections": a session-bound leader whose
  // token fences its writes) instead of locked with a TTL lock.
  bool elect = false;
  // --read: a reader of each batch under a read-write lock (docs/fencing.md "Read-write locks"):
  // takes `payouts/<batch>` in shared mode, admits its token with admit_read and reads what the
  // batch has paid, once per batch; pays nothing. Excludes --elect.
  bool read = false;
  int seed_payouts = 0;  // --init: payouts created per batch
};

// --init: creates the schema (payout, ledger, fencing_resource) and seeds each batch once.
int init_database(const Config& config);

// Runs until every listed batch is paid (with `read`: read once) (exit 0) or give_up passes
// (exit 1).
int run_executor(const Config& config);

}  // namespace payout
