#include "safety/checker.h"

#include <algorithm>
#include <set>
#include <utility>

namespace dlock::safety {
namespace {

std::string describe(const Operation& op) {
  return op.process + " " + op.kind + " " + op.key +
         (op.payout.empty() ? "" : " payout " + op.payout) + " token " + std::to_string(op.token) +
         " [" + std::to_string(op.start_ns) + ", " + std::to_string(op.end_ns) + "]";
}

std::map<std::string, std::vector<const Operation*>> ok_by_key(const History& history,
                                                               const std::string& kind) {
  std::map<std::string, std::vector<const Operation*>> result;
  for (const auto& op : history.operations()) {
    if (op.kind == kind && op.outcome == Outcome::kOk) result[op.key].push_back(&op);
  }
  return result;
}

void check_grants(const History& history, Report& report) {
  for (const auto& [key, grants] : ok_by_key(history, "acquire")) {
    std::set<std::uint64_t> seen;
    for (const auto* grant : grants) {
      if (!seen.insert(grant->token).second) {
        report.violations.push_back("I1 token issued twice for " + key + ": " + describe(*grant));
      }
    }
    for (const auto* earlier : grants) {
      for (const auto* later : grants) {
        if (earlier->end_ns < later->start_ns && earlier->token >= later->token) {
          report.violations.push_back("I1 token did not increase: " + describe(*earlier) +
                                      " then " + describe(*later));
        }
      }
    }
  }
}

// Grants of one key are ordered by their tokens (I1), so a grant with a greater token started
// after the earlier grant; if it was acknowledged before the earlier holder's promised deadline,
// it certainly started inside that promise. A holder's own later grant (re-entrant acquire)
// replaces its earlier one and is no violation; nor is any grant after the holder sent a release.
void check_lifetimes(const History& history, Report& report) {
  struct Promise {
    const Operation* grant = nullptr;
    std::int64_t until_ns = 0;
  };
  std::map<std::pair<std::string, std::uint64_t>, Promise> promises;  // by (key, token)
  for (const auto& op : history.operations()) {
    if (op.kind == "acquire" && op.outcome == Outcome::kOk && op.promised_until_ns > 0) {
      promises[{op.key, op.token}] = Promise{&op, op.promised_until_ns};
    }
  }
  for (const auto& op : history.operations()) {
    const auto found = promises.find({op.key, op.token});
    if (found == promises.end()) continue;
    auto& until = found->second.until_ns;
    if (op.kind == "extend" && op.outcome == Outcome::kOk) {
      until = std::max(until, op.promised_until_ns);
    } else if (op.kind == "release") {  // any attempt: the holder gave the lock up
      until = std::min(until, op.start_ns);
    }
  }
  report.promises = promises.size();
  const auto grants = ok_by_key(history, "acquire");
  for (const auto& [id, promise] : promises) {
    const auto found = grants.find(id.first);
    if (found == grants.end()) continue;
    for (const auto* later : found->second) {
      if (later->token > promise.grant->token && later->session != promise.grant->session &&
          !(later->shared && promise.grant->shared) && later->end_ns < promise.until_ns) {
        report.violations.push_back(
            "I5 granted " + std::to_string((promise.until_ns - later->end_ns) / 1000000) +
            " ms or more inside another holder's promised lifetime (until " +
            std::to_string(promise.until_ns) + "): " + describe(*later) + " while " +
            describe(*promise.grant));
      }
    }
  }
}

void check_resource(const History& history, Report& report) {
  for (const auto& [resource, accepts] : ok_by_key(history, "write")) {
    for (const auto* earlier : accepts) {
      for (const auto* later : accepts) {
        if (earlier->end_ns < later->start_ns && later->token < earlier->token) {
          report.violations.push_back("I2 stale token accepted: " + describe(*later) + " after " +
                                      describe(*earlier));
        }
      }
    }
  }
}

// I6: a write started after an admitted read ended, with a smaller token than the reader's.
void check_reads(const History& history, Report& report) {
  const auto writes = ok_by_key(history, "write");
  for (const auto& [resource, reads] : ok_by_key(history, "read")) {
    report.reads += reads.size();
    const auto found = writes.find(resource);
    if (found == writes.end()) continue;
    for (const auto* read : reads) {
      for (const auto* write : found->second) {
        if (read->end_ns < write->start_ns && write->token < read->token) {
          report.violations.push_back("I6 write accepted below an admitted reader's token: " +
                                      describe(*write) + " after " + describe(*read));
        }
      }
    }
  }
}

void check_ledger(const History& history, const LedgerSnapshot& ledger, Report& report) {
  for (const auto& payout : ledger.payouts) {
    const auto found = ledger.tokens_by_payout.find(payout);
    const std::size_t paid = found == ledger.tokens_by_payout.end() ? 0 : found->second.size();
    if (paid != 1) {
      std::string tokens;
      if (paid > 0) {
        for (auto token : found->second) tokens += " " + std::to_string(token);
      }
      report.violations.push_back("I3 payout " + payout + " paid " + std::to_string(paid) +
                                  " times (tokens:" + tokens + ")");
    }
  }
  for (const auto& op : history.operations()) {
    if (op.kind != "write" || op.outcome != Outcome::kOk) continue;
    const auto found = ledger.tokens_by_payout.find(op.payout);
    bool present = false;
    if (found != ledger.tokens_by_payout.end()) {
      for (auto token : found->second) present = present || token == op.token;
    }
    if (!present) report.violations.push_back("I4 acknowledged write missing: " + describe(op));
  }
}

}  // namespace

bool Report::has(const std::string& invariant) const {
  for (const auto& violation : violations) {
    if (violation.rfind(invariant + " ", 0) == 0) return true;
  }
  return false;
}

Report check(const std::string& name, const History& history, const LedgerSnapshot* ledger) {
  Report report;
  report.name = name;
  report.operations = history.operations().size();
  report.faults = history.faults().size();
  for (const auto& op : history.operations()) {
    report.rejected_writes += op.rejected && op.kind == "write" ? 1 : 0;
    report.failed += op.outcome == Outcome::kFail ? 1 : 0;
    report.unknown += op.outcome == Outcome::kUnknown ? 1 : 0;
  }
  check_grants(history, report);
  check_resource(history, report);
  check_lifetimes(history, report);
  check_reads(history, report);
  if (ledger != nullptr) check_ledger(history, *ledger, report);
  return report;
}

void print(std::ostream& out, const Report& report) {
  out << "SAFETY " << report.name << ": operations=" << report.operations
      << " faults=" << report.faults << " failed_ops=" << report.failed
      << " unknown_ops=" << report.unknown << " rejected_stale_writes=" << report.rejected_writes
      << " promised_grants=" << report.promises << " reads=" << report.reads
      << " violations=" << report.violations.size() << "\n";
  for (const auto& violation : report.violations) out << "  VIOLATION " << violation << "\n";
}

}  // namespace dlock::safety
