#include "server/watch_query.h"

#include "dlock/errors.h"
#include "server/input_checks.h"

namespace dlock::server {

WatchQuery parse_watch_query(const std::optional<std::string>& ns,
                             const std::optional<std::string>& key,
                             const std::optional<std::string>& prefix,
                             const std::optional<std::string>& after,
                             const std::optional<std::string>& wait_ms,
                             const std::optional<std::string>& limit,
                             std::chrono::milliseconds max_wait) {
  WatchQuery query;
  query.ns = checked_namespace(ns.value_or("default"));
  if (key && prefix) throw InvalidArgumentError("prefix", "give key or prefix, not both");
  if (key) {
    query.target = checked_key(*key);
  } else if (prefix) {
    query.target = checked_prefix(*prefix);
    query.prefix = true;
  } else {
    throw InvalidArgumentError("key", "key or prefix is required");
  }
  if (after) {
    constexpr std::size_t kMaxPosition = 64;
    const bool shaped = after->size() <= kMaxPosition &&
                        after->find_first_not_of("0123456789abcdef.") == std::string::npos;
    if (!shaped) {
      throw InvalidArgumentError("after", "after must be the `next` of an earlier watch answer");
    }
    query.after = *after;
  }
  query.wait = parse_query_wait(wait_ms, max_wait);
  query.limit = parse_list_limit(limit);
  return query;
}

}  // namespace dlock::server
