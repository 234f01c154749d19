#include "server/input_checks.h"

#include <cctype>
#include <charconv>

#include "dlock/errors.h"
#include "util/limits.h"

namespace dlock::server {

using std::chrono::milliseconds;

namespace {

// The length of the well-formed UTF-8 sequence at `text[at]`, 0 when there is none (RFC 3629
// table: no overlong forms, no surrogates U+D800..U+DFFF, nothing above U+10FFFF).
std::size_t utf8_sequence(std::string_view text, std::size_t at) {
  const auto byte = static_cast<unsigned char>(text[at]);
  if (byte < 0x80) return 1;
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the range of the second byte
  if (byte >= 0xC2 && byte <= 0xDF) {
    length = 2;
  } else if (byte >= 0xE0 && byte <= 0xEF) {
    length = 3;
    if (byte == 0xE0) low = 0xA0;
    if (byte == 0xED) high = 0x9F;
  } else if (byte >= 0xF0 && byte <= 0xF4) {
    length = 4;
    if (byte == 0xF0) low = 0x90;
    if (byte == 0xF4) high = 0x8F;
  } else {
    return 0;  // a continuation byte first, C0/C1 (overlong) or F5..FF
  }
  if (text.size() - at < length) return 0;
  const auto second = static_cast<unsigned char>(text[at + 1]);
  if (second < low || second > high) return 0;
  for (std::size_t k = 2; k < length; ++k) {
    const auto next = static_cast<unsigned char>(text[at + k]);
    if (next < 0x80 || next > 0xBF) return 0;
  }
  return length;
}

}  // namespace

bool is_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto length = utf8_sequence(text, i);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

std::string to_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto length = utf8_sequence(text, i);
    if (length == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER, for one byte
      ++i;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

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
  // Keys, owners and namespaces are echoed in JSON answers and log lines: bytes that are not
  // UTF-8 would make those invalid JSON for every reader (contract C3).
  if (!is_utf8(value)) {
    throw InvalidArgumentError(field, std::string(field) + " must be valid UTF-8");
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
  if (!is_utf8(prefix)) throw InvalidArgumentError("prefix", "prefix must be valid UTF-8");
  return std::string(prefix);
}

milliseconds checked_ttl(std::optional<std::int64_t> ttl_ms, milliseconds fallback,
                         const TtlLimits& limits) {
  const milliseconds ttl = ttl_ms ? milliseconds(*ttl_ms) : fallback;
  check_ttl(ttl, limits, "ttl_ms");
  return ttl;
}

milliseconds checked_lock_delay(std::optional<std::int64_t> lock_delay_ms,
                                const TtlLimits& limits) {
  const milliseconds delay(lock_delay_ms.value_or(0));
  check_lock_delay(delay, limits);
  return delay;
}

LockLease checked_lease(const std::optional<std::string>& lease, std::optional<std::int64_t> ttl_ms,
                        milliseconds fallback, const TtlLimits& limits) {
  if (!lease || *lease == "ttl") return checked_ttl(ttl_ms, fallback, limits);
  if (*lease != "session") {
    throw InvalidArgumentError("lease", "lease must be \"ttl\" or \"session\"");
  }
  if (ttl_ms) {
    throw InvalidArgumentError("ttl_ms",
                               "ttl_ms must be absent with \"lease\": \"session\": the lock "
                               "lives as long as its session");
  }
  return LockLease::session();
}

HoldMode checked_lock_mode(const std::optional<std::string>& mode) {
  if (!mode || *mode == "exclusive") return HoldMode::kExclusive;
  if (*mode == "shared") return HoldMode::kShared;
  throw InvalidArgumentError("mode", "mode must be \"exclusive\" or \"shared\"");
}

std::uint32_t checked_permits(std::optional<std::int64_t> limit) {
  if (!limit) throw InvalidArgumentError("limit", "limit is required");
  if (*limit < 1 || *limit > static_cast<std::int64_t>(limits::kMaxSemaphoreLimit)) {
    throw InvalidArgumentError(
        "limit", "limit must be between 1 and " + std::to_string(limits::kMaxSemaphoreLimit));
  }
  return static_cast<std::uint32_t>(*limit);
}

milliseconds checked_wait(std::optional<std::int64_t> wait_ms, milliseconds max_wait) {
  const auto wait = milliseconds(wait_ms.value_or(0));
  if (wait.count() < 0 || wait > max_wait) {
    throw InvalidArgumentError("wait_ms",
                               "wait_ms must be between 0 and " + std::to_string(max_wait.count()));
  }
  return wait;
}

std::uint64_t parse_token(std::string_view text, const char* field) {
  std::uint64_t token = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), token);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    throw InvalidArgumentError(field, std::string(field) + " must be a non-negative integer");
  }
  return token;
}

milliseconds parse_query_wait(const std::optional<std::string>& text, milliseconds max_wait) {
  if (!text) return milliseconds(0);
  std::int64_t wait_ms = 0;
  const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), wait_ms);
  if (text->empty() || error != std::errc() || end != text->data() + text->size()) {
    throw InvalidArgumentError("wait_ms", "wait_ms must be an integer");
  }
  return checked_wait(wait_ms, max_wait);
}

std::string checked_leader_value(const std::optional<std::string>& value, const char* field) {
  if (!value) throw InvalidArgumentError(field, std::string(field) + " is required");
  if (value->empty()) throw InvalidArgumentError(field, std::string(field) + " must not be empty");
  if (value->size() > limits::kMaxLeaderValueBytes) {
    throw InvalidArgumentError(field, std::string(field) + " must be at most " +
                                          std::to_string(limits::kMaxLeaderValueBytes) + " bytes");
  }
  if (value->find('\0') != std::string::npos || !is_utf8(*value)) {
    throw InvalidArgumentError(field, std::string(field) + " must be UTF-8 text without NUL");
  }
  return *value;
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

bool parse_bool_query(const std::optional<std::string>& text, const char* field) {
  if (!text || *text == "false") return false;
  if (*text == "true") return true;
  throw InvalidArgumentError(field, std::string(field) + " must be true or false");
}

bool constant_time_equal(std::string_view given, std::string_view expected) {
  unsigned char difference = given.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < given.size(); ++i) {
    difference |= static_cast<unsigned char>(given[i] ^ expected[i % expected.size()]);
  }
  return difference == 0;
}

}  // namespace dlock::server
