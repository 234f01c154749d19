#pragma once

// The checks of every API input (contract C3): pure functions of their arguments, no backend,
// no I/O, so a fuzz target can call them directly. Each throws InvalidArgumentError naming the
// field (a 400 on the wire) and returns the value it checked.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/lock_store.h"

namespace dlock::server {

// Whether `text` is well-formed UTF-8 (RFC 3629): no overlong forms (e.g. C0 AF), no
// surrogates, nothing above U+10FFFF, no truncated sequence.
bool is_utf8(std::string_view text);
// `text` with each byte that does not start a well-formed sequence replaced by U+FFFD: for text
// echoed into a JSON answer or a log line (a path, a header) that no check has vetted.
std::string to_utf8(std::string_view text);

// Non-empty, at most `max_bytes`, no control characters, valid UTF-8.
void check_text(std::string_view value, const char* field, std::size_t max_bytes);

// A lock key as the API shows it (field "key").
std::string checked_key(std::string_view key);
// A namespace: letters, digits, '-', '_', '.' (field "ns"); never holds the store key's '/'.
std::string checked_namespace(std::string_view ns);
std::string checked_owner(std::string_view owner);
// Letters, digits, '-', '_' (field "session_id").
std::string checked_session_id(std::string_view session_id);
// A list prefix may be empty; at most a key's length, valid UTF-8 (field "prefix").
std::string checked_prefix(std::string_view prefix);

// The TTL asked (or `fallback` when none was), within `limits` (field "ttl_ms").
std::chrono::milliseconds checked_ttl(std::optional<std::int64_t> ttl_ms,
                                      std::chrono::milliseconds fallback, const TtlLimits& limits);
// A session's lock-delay (C2 "Lock-delay"): 0 when none was asked, else within
// limits.max_lock_delay (field "lock_delay_ms").
std::chrono::milliseconds checked_lock_delay(std::optional<std::int64_t> lock_delay_ms,
                                             const TtlLimits& limits);
// The lease an acquire asks for (ADR-0018): "lease" absent or "ttl" -> checked_ttl(ttl_ms, ...);
// "session" -> LockLease::session(), and then "ttl_ms" must be absent (field "ttl_ms"). Any other
// value is field "lease".
LockLease checked_lease(const std::optional<std::string>& lease, std::optional<std::int64_t> ttl_ms,
                        std::chrono::milliseconds fallback, const TtlLimits& limits);
// The mode of a lock acquire (ADR-0020): absent or "exclusive" -> exclusive, "shared" -> a
// shared holder; anything else is field "mode".
HoldMode checked_lock_mode(const std::optional<std::string>& mode);
// A semaphore acquire's permits: required, 1..limits::kMaxSemaphoreLimit (field "limit").
std::uint32_t checked_permits(std::optional<std::int64_t> limit);
// The wait asked (0 when none was), from 0 to `max_wait` (field "wait_ms").
std::chrono::milliseconds checked_wait(std::optional<std::int64_t> wait_ms,
                                       std::chrono::milliseconds max_wait);
// A fencing token in decimal (field "fencing_token", or `field`: "after_token").
std::uint64_t parse_token(std::string_view text, const char* field = "fencing_token");
// A query's wait_ms (absent: 0), from 0 to `max_wait` (field "wait_ms").
std::chrono::milliseconds parse_query_wait(const std::optional<std::string>& text,
                                           std::chrono::milliseconds max_wait);
// An election's value (ADR-0020): required, 1..limits::kMaxLeaderValueBytes bytes of UTF-8 text
// without NUL (field "value", or `field`: "after_value").
std::string checked_leader_value(const std::optional<std::string>& value,
                                 const char* field = "value");
// GET /v1/locks ?limit= (field "limit"): 1..kMaxListLimit, kDefaultListLimit when absent.
std::size_t parse_list_limit(const std::optional<std::string>& text);
// A boolean query parameter: "true" or "false" (absent: false); a 400 naming `field` otherwise.
bool parse_bool_query(const std::optional<std::string>& text, const char* field);

// Compares without an early exit, so response timing does not reveal a prefix of `expected`.
bool constant_time_equal(std::string_view given, std::string_view expected);

}  // namespace dlock::server
