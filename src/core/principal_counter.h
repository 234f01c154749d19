#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace dlock::core {

// Per-principal counts of something held for a while (waiting acquires, contract C6): O(1),
// thread-safe, no entry kept for a count of zero. A limit of 0 means no limit.
class PrincipalCounter {
 public:
  // `noun` names what is counted for in the refusal: "principal alice", "address 10.0.0.7".
  PrincipalCounter(std::size_t limit, std::string what, std::string noun = "principal")
      : limit_(limit), what_(std::move(what)), noun_(std::move(noun)) {}

  // Counts one more for `principal`; when that would pass the limit, counts nothing and
  // returns why, naming the principal and the limit (else "").
  std::string try_add(const std::string& principal);
  void remove(const std::string& principal);
  std::size_t count_of(const std::string& principal) const;

 private:
  const std::size_t limit_;
  const std::string what_;
  const std::string noun_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::size_t> counts_;  // no zeros
};

}  // namespace dlock::core
