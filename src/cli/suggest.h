#pragma once

// "Did you mean …?" for a mistyped subcommand or flag.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::cli {

// The candidate closest to `word` by edit distance (insertions, deletions, substitutions and
// swaps of two neighbours, each 1), if it is close enough to be what was meant: at most 2
// edits, and fewer than half of the longer word's length; else the only candidate `word` is
// the start of (2 characters at least). Ties go to the earlier candidate.
std::optional<std::string> nearest(std::string_view word,
                                   const std::vector<std::string>& candidates);

// Optimal-string-alignment distance between `a` and `b` (the measure nearest() uses).
std::size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace dlock::cli
