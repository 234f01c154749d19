#include "core/principal_counter.h"

namespace dlock::core {

std::string PrincipalCounter::try_add(const std::string& principal) {
  std::lock_guard lock(mutex_);
  auto& count = counts_[principal];
  if (limit_ > 0 && count >= limit_) {
    if (count == 0) counts_.erase(principal);
    return "too many " + what_ + " for " + noun_ + " " + principal + " (limit " +
           std::to_string(limit_) + ")";
  }
  ++count;
  return {};
}

void PrincipalCounter::remove(const std::string& principal) {
  std::lock_guard lock(mutex_);
  const auto found = counts_.find(principal);
  if (found != counts_.end() && --found->second == 0) counts_.erase(found);
}

std::size_t PrincipalCounter::count_of(const std::string& principal) const {
  std::lock_guard lock(mutex_);
  const auto found = counts_.find(principal);
  return found == counts_.end() ? 0 : found->second;
}

}  // namespace dlock::core
