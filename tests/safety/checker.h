#pragma once

// Checks a safety history against the invariants of docs/fencing.md:
//   I1  tokens of successful grants of a key are unique and increase in real-time order
//       (a grant acknowledged before another was requested has the smaller token);
//   I2  the resource never accepts a token lower than one it already accepted (an accepted
//       write that started after another accepted write ended carries a token >= that one's);
//   I3  every payout is paid exactly once (ledger rows per payout);
//   I4  every acknowledged write is present at the end (its ledger row, with its token);
//   I5  no grant of a key starts inside another grant's promised lifetime (from its grant to the
//       latest deadline its holder was told, by the acquire or an extend), unless that holder
//       released first (its release was sent before the later grant was acknowledged). Shared
//       grants (readers of a read-write lock) may overlap each other, not an exclusive one;
//   I6  the resource never accepts a write with a token lower than a read it already admitted
//       (a read that ended before the write started): a reader's token orders it after every
//       writer before it, so such a writer's grant was over when the reader read, and the
//       write changed state the reader was promised (docs/fencing.md "Read-write locks").

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "safety/history.h"

namespace dlock::safety {

// The resource database at the end of the run: ledger tokens per payout id.
struct LedgerSnapshot {
  std::vector<std::string> payouts;                                    // every payout id
  std::map<std::string, std::vector<std::uint64_t>> tokens_by_payout;  // ledger rows
};

struct Report {
  std::string name;
  std::size_t operations = 0;
  std::size_t faults = 0;
  std::size_t failed = 0;               // operations with outcome fail (held, refused, errors)
  std::size_t unknown = 0;              // operations with outcome unknown
  std::size_t rejected_writes = 0;      // stale writes the guard refused
  std::size_t reads = 0;                // admitted reads (I6)
  std::size_t promises = 0;             // grants with a recorded promised deadline (I5)
  std::vector<std::string> violations;  // each starts with its invariant, e.g. "I3 ..."
  bool ok() const { return violations.empty(); }
  bool has(const std::string& invariant) const;
};

Report check(const std::string& name, const History& history, const LedgerSnapshot* ledger);

// One summary line plus one line per violation.
void print(std::ostream& out, const Report& report);

}  // namespace dlock::safety
