#pragma once

// The history of a safety run: every operation a process attempted against dlockd or the
// fenced resource, with start and end on the machine-wide monotonic clock, and every fault the
// test injected. The checker (checker.h) reads it; nothing here judges.

#include <cstdint>
#include <string>
#include <vector>

namespace dlock::safety {

enum class Outcome {
  kOk,       // acknowledged: a grant, a release, a committed write
  kFail,     // definitely not applied (held, refused, rejected by the guard)
  kUnknown,  // may or may not have been applied (connection lost after sending)
};

const char* to_string(Outcome outcome);

struct Operation {
  std::string process;  // e.g. "executor-A" or "client-B"
  std::string session;
  std::string key;   // the lock key; for a write or a read, the fenced resource (the batch)
  std::string kind;  // acquire | extend | release | write | read
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  Outcome outcome = Outcome::kFail;
  std::uint64_t token = 0;
  // acquire and extend with outcome ok: the deadline the holder was told, on the same clock as
  // start_ns (its send time plus the answered ttl_ms); 0 when not recorded. Checked by I5.
  std::int64_t promised_until_ns = 0;
  // acquire: a shared grant (the read side of a read-write lock); shared grants of a key may
  // overlap (I5 does not order them among themselves).
  bool shared = false;
  // write only: the payout written. write or read: whether the guard refused it (then outcome
  // kFail).
  std::string payout;
  bool rejected = false;
  std::string detail;  // error message or server error code
};

// The machine-wide monotonic clock in nanoseconds (the executors log the same clock).
std::int64_t monotonic_ns();

class History {
 public:
  void add(Operation operation) { operations_.push_back(std::move(operation)); }
  // Reads the JSON lines an executor (examples/payout-executor) wrote; other lines are skipped.
  void load_executor_log(const std::string& path, const std::string& process);
  void note_fault(const std::string& description) { faults_.push_back(description); }

  const std::vector<Operation>& operations() const { return operations_; }
  const std::vector<std::string>& faults() const { return faults_; }

 private:
  std::vector<Operation> operations_;
  std::vector<std::string> faults_;
};

// The successful acquires of `operations` whose token an earlier successful acquire already
// had, one line each: always when both are grants of one key; for grants of different keys
// unless `batched_revisions` and the two calls overlapped in time. etcd applies concurrent writes
// of different keys in one batched Txn at one revision, which is then both grants' token
// (docs/adr/0023-etcd-batched-txns.md); a token given to calls that did not overlap is a token
// handed out twice (a rewound revision or counter). pg and sqlite draw every token from one
// counter: there, no token repeats at all.
std::vector<std::string> reissued_tokens(const std::vector<Operation>& operations,
                                         bool batched_revisions);

// Counts JSON lines of an executor log whose "event" is `event` (and, if given, "outcome").
int count_events(const std::string& path, const std::string& event,
                 const std::string& outcome = "");

}  // namespace dlock::safety
