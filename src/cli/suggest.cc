#include "cli/suggest.h"

#include <algorithm>

namespace dlock::cli {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Rows i-2, i-1 and i of the dynamic-programming table.
  std::vector<std::size_t> before(b.size() + 1), previous(b.size() + 1), current(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    before = previous;
    previous = current;
  }
  return previous[b.size()];
}

std::optional<std::string> nearest(std::string_view word,
                                   const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  for (const std::string& candidate : candidates) {
    const std::size_t distance = edit_distance(word, candidate);
    const std::size_t longer = std::max(word.size(), candidate.size());
    if (distance > 2 || 2 * distance >= longer) continue;
    if (!best || distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  if (best || word.size() < 2) return best;
  // A unique abbreviation ("sess" for "session").
  for (const std::string& candidate : candidates) {
    if (candidate.size() > word.size() && candidate.compare(0, word.size(), word) == 0) {
      if (best) return std::nullopt;
      best = candidate;
    }
  }
  return best;
}

}  // namespace dlock::cli
