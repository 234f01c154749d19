#pragma once

// The checked query of GET /v1/watch (C3 "Watch"): pure, so that fuzz/watch_query_fuzz.cc can
// call it without a server.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

namespace dlock::server {

struct WatchQuery {
  std::string ns;
  std::string target;  // the key, or the prefix (may be empty: the whole namespace)
  bool prefix = false;
  std::string after;  // a position from an earlier answer's `next`, or "" (from now)
  std::chrono::milliseconds wait{0};
  std::size_t limit = 0;
};

// Exactly one of `key` and `prefix`; `after`: at most 64 bytes of [0-9a-f.] (field "after");
// wait_ms as parse_query_wait, limit as parse_list_limit. A 400 naming the field otherwise.
WatchQuery parse_watch_query(const std::optional<std::string>& ns,
                             const std::optional<std::string>& key,
                             const std::optional<std::string>& prefix,
                             const std::optional<std::string>& after,
                             const std::optional<std::string>& wait_ms,
                             const std::optional<std::string>& limit,
                             std::chrono::milliseconds max_wait);

}  // namespace dlock::server
