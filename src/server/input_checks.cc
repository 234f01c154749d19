#include "server/input_checks.h"

#include <cctype>
#include <charconv>

#include "util/limits.h"
#include "dlock/errors.h"

namespace dlock::server {

using std::chrono::milliseconds;

void check_text(std::string_view value, const char* field, std::size_t max_bytes) {
  if (value.empty()) throw InvalidArgumentError(field, std::string(field) + " must not be empty");
  if (value.size() > max_bytes) {
    throw InvalidArgumentError(
        field, std::string(field) + " must be at most " + std::to_string(max_bytes) + " bytes");
  }
  for (const unsigned char c : value) {
    if (c < 0x20 || c == 0x7F) {
      throw InvalidArgumentError(field,
                                 std::string(field) + " must not contain control characters");
    }
  }
}

std::string checked_key(std::string_view key) {
  check_text(key, "key", limits::kMaxKeyBytes);
  return std::string(key);
}

std::string checked_namespace(std::string_view ns) {
  check_text(ns, "ns", limits::kMaxNamespaceBytes);
  for (const char c : ns) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      throw InvalidArgumentError("ns", "ns may contain only letters, digits, '-', '_' and '.'");
    }
  }
  return std::string(ns);
}

std::string checked_owner(std::string_view owner) {
  check_text(owner, "owner", limits::kMaxOwnerBytes);
  return std::string(owner);
}

std::string checked_session_id(std::string_view session_id) {
  check_text(session_id, "session_id", limits::kMaxSessionIdBytes);
  for (const char c : session_id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') {
      throw InvalidArgumentError("session_id", "session_id is malformed");
    }
  }
  return std::string(session_id);
}

std::string checked_prefix(std::string_view prefix) {
  if (prefix.size() > limits::kMaxKeyBytes) throw InvalidArgumentError("prefix", "prefix too long");
  return std::string(prefix);
}

milliseconds checked_ttl(std::optional<std::int64_t> ttl_ms, milliseconds fallback,
                         const TtlLimits& limits) {
  const milliseconds ttl = ttl_ms ? milliseconds(*ttl_ms) : fallback;
  check_ttl(ttl, limits, "ttl_ms");
  return ttl;
}

milliseconds checked_wait(std::optional<std::int64_t> wait_ms, milliseconds max_wait) {
  const auto wait = milliseconds(wait_ms.value_or(0));
  if (wait.count() < 0 || wait > max_wait) {
    throw InvalidArgumentError("wait_ms",
                               "wait_ms must be between 0 and " + std::to_string(max_wait.count()));
  }
  return wait;
}

std::uint64_t parse_token(std::string_view text) {
  std::uint64_t token = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), token);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    throw InvalidArgumentError("fencing_token", "fencing_token must be a non-negative integer");
  }
  return token;
}

std::size_t parse_list_limit(const std::optional<std::string>& text) {
  std::size_t limit = limits::kDefaultListLimit;
  if (!text) return limit;
  const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), limit);
  if (error != std::errc() || end != text->data() + text->size() || limit == 0 ||
      limit > limits::kMaxListLimit) {
    throw InvalidArgumentError(
        "limit", "limit must be an integer from 1 to " + std::to_string(limits::kMaxListLimit));
  }
  return limit;
}

bool constant_time_equal(std::string_view given, std::string_view expected) {
  unsigned char difference = given.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < given.size(); ++i) {
    difference |= static_cast<unsigned char>(given[i] ^ expected[i % expected.size()]);
  }
  return difference == 0;
}

}  // namespace dlock::server
