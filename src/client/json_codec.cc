#include "client/json_codec.h"

#include <boost/json/parse.hpp>
#include <charconv>
#include <cstdint>
#include <cstdio>

#include "dlock/errors.h"

namespace dlock::client::detail {
namespace {

[[noreturn]] void bad_time(std::string_view text) {
  throw InternalError("server sent '" + std::string(text) + "', not an RFC 3339 timestamp");
}

int digits(std::string_view text, std::size_t at, std::size_t count) {
  if (at + count > text.size()) bad_time(text);
  int value = 0;
  for (std::size_t i = at; i < at + count; ++i) {
    if (text[i] < '0' || text[i] > '9') bad_time(text);
    value = value * 10 + (text[i] - '0');
  }
  return value;
}

void expect(std::string_view text, std::size_t at, char what) {
  if (at >= text.size() || (text[at] != what && !(what == 'T' && text[at] == 't'))) {
    bad_time(text);
  }
}

[[noreturn]] void bad_member(std::string_view name, const char* expected) {
  throw InternalError("server response has no valid \"" + std::string(name) + "\" (" + expected +
                      ")");
}

}  // namespace

WallClock::time_point parse_rfc3339(std::string_view text) {
  using namespace std::chrono;
  const int y = digits(text, 0, 4);
  expect(text, 4, '-');
  const int mo = digits(text, 5, 2);
  expect(text, 7, '-');
  const int d = digits(text, 8, 2);
  expect(text, 10, 'T');
  const int h = digits(text, 11, 2);
  expect(text, 13, ':');
  const int mi = digits(text, 14, 2);
  expect(text, 16, ':');
  const int s = digits(text, 17, 2);
  const year_month_day date{year(y), month(static_cast<unsigned>(mo)),
                            day(static_cast<unsigned>(d))};
  if (!date.ok() || h > 23 || mi > 59 || s > 60) bad_time(text);
  std::size_t at = 19;
  nanoseconds fraction{0};
  if (at < text.size() && text[at] == '.') {
    ++at;
    std::int64_t scale = 100'000'000;
    const std::size_t start = at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
      fraction += nanoseconds((text[at] - '0') * scale);
      scale /= 10;
      ++at;
    }
    if (at == start) bad_time(text);
  }
  minutes offset{0};
  if (at < text.size() && (text[at] == 'Z' || text[at] == 'z')) {
    ++at;
  } else if (at < text.size() && (text[at] == '+' || text[at] == '-')) {
    const int sign = text[at] == '+' ? 1 : -1;
    const int oh = digits(text, at + 1, 2);
    expect(text, at + 3, ':');
    const int om = digits(text, at + 4, 2);
    offset = minutes(sign * (oh * 60 + om));
    at += 6;
  } else {
    bad_time(text);
  }
  if (at != text.size()) bad_time(text);
  // In seconds first: a year the clock cannot hold (WallClock counts nanoseconds, so about
  // 1678..2261) is a bad timestamp, not a signed overflow.
  const auto utc = sys_days(date) + hours(h) + minutes(mi) + seconds(s) - offset;
  constexpr auto kLimit = duration_cast<seconds>(WallClock::duration::max()) - seconds(1);
  if (utc.time_since_epoch() > kLimit || utc.time_since_epoch() < -kLimit) bad_time(text);
  return time_point_cast<WallClock::duration>(utc) + duration_cast<WallClock::duration>(fraction);
}

std::string format_rfc3339(WallClock::time_point time) {
  using namespace std::chrono;
  // floor, not time_point_cast (which rounds toward zero): before 1970 the cast would move the
  // instant up to a millisecond later, and the text would no longer name the instant's millisecond.
  const auto millis = floor<milliseconds>(time);
  const auto day_start = floor<days>(millis);
  const year_month_day date{day_start};
  const hh_mm_ss clock{millis - day_start};
  char out[40];
  std::snprintf(out, sizeof out, "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", int(date.year()),
                unsigned(date.month()), unsigned(date.day()), int(clock.hours().count()),
                int(clock.minutes().count()), int(clock.seconds().count()),
                int(clock.subseconds().count()));
  return out;
}

boost::json::object parse_object(std::string_view body, const std::string& what) {
  boost::system::error_code ec;
  boost::json::value value = boost::json::parse(body, ec);
  if (ec || !value.is_object()) {
    throw InternalError(
        what + ": server response is not a JSON object: " + std::string(body.substr(0, 200)));
  }
  return std::move(value.get_object());
}

std::string string_member(const boost::json::object& object, std::string_view name, bool required) {
  const auto* value = object.if_contains(name);
  if (value != nullptr && value->is_string()) return std::string(value->get_string());
  if (required || (value != nullptr && !value->is_null())) bad_member(name, "a string");
  return {};
}

std::uint64_t uint_member(const boost::json::object& object, std::string_view name) {
  const auto* value = object.if_contains(name);
  if (value != nullptr) {
    if (value->is_uint64()) return value->get_uint64();
    if (value->is_int64() && value->get_int64() >= 0) {
      return static_cast<std::uint64_t>(value->get_int64());
    }
  }
  bad_member(name, "a non-negative integer");
}

std::chrono::milliseconds millis_member(const boost::json::object& object, std::string_view name) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(uint_member(object, name)));
}

WallClock::time_point time_member(const boost::json::object& object, std::string_view name) {
  const std::string text = string_member(object, name, /*required=*/false);
  return text.empty() ? WallClock::time_point{} : parse_rfc3339(text);
}

HoldMode mode_member(const boost::json::object& object, HoldMode fallback) {
  const std::string text = string_member(object, "mode", /*required=*/false);
  if (text.empty()) return fallback;
  for (HoldMode mode : {HoldMode::kExclusive, HoldMode::kShared, HoldMode::kPermit}) {
    if (text == to_string(mode)) return mode;
  }
  bad_member("mode", "exclusive, shared or permit");
}

std::uint32_t limit_member(const boost::json::object& object, std::uint32_t fallback) {
  const auto* value = object.if_contains("limit");
  if (value == nullptr || value->is_null()) return fallback;
  const std::uint64_t limit = uint_member(object, "limit");
  if (limit == 0 || limit > UINT32_MAX) bad_member("limit", "an integer from 1 to 2^32-1");
  return static_cast<std::uint32_t>(limit);
}

SessionInfo decode_session(const boost::json::object& object) {
  SessionInfo info;
  info.session_id = string_member(object, "session_id", /*required=*/false);
  info.owner_id = string_member(object, "owner", /*required=*/false);
  info.ttl = millis_member(object, "ttl_ms");
  info.expires_at = time_member(object, "expires_at");
  // Absent from a server without lock-delay (and from keepalive answers): none.
  if (object.contains("lock_delay_ms")) info.lock_delay = millis_member(object, "lock_delay_ms");
  return info;
}

LockInfo decode_lock_info(const boost::json::object& object) {
  LockInfo info;
  info.key = string_member(object, "key");
  info.owner_id = string_member(object, "owner", /*required=*/false);
  info.session_id = string_member(object, "session_id", /*required=*/false);
  info.fencing_token = uint_member(object, "fencing_token");
  info.acquired_at = time_member(object, "acquired_at");
  info.expires_at = time_member(object, "expires_at");
  info.session_bound = string_member(object, "lease", /*required=*/false) == "session";
  info.mode = mode_member(object, HoldMode::kExclusive);
  info.limit = limit_member(object, 0);
  return info;
}

LockOutcome decode_outcome(const boost::json::object& object) {
  LockOutcome outcome;
  const auto* revoked = object.if_contains("revoked");
  if (revoked == nullptr || !revoked->is_bool()) bad_member("revoked", "a boolean");
  outcome.revoked = revoked->get_bool();
  if (const auto* token = object.if_contains("fencing_token"); token && !token->is_null()) {
    outcome.fencing_token = uint_member(object, "fencing_token");
  }
  if (const auto* owner = object.if_contains("owner"); owner && owner->is_string()) {
    outcome.owner_id = std::string(owner->get_string());
  }
  return outcome;
}

client::LeaderInfo decode_leader_info(const boost::json::object& object, const std::string& name) {
  client::LeaderInfo info;
  info.name = string_member(object, "name", /*required=*/false);
  if (info.name.empty()) info.name = name;
  const auto* leader = object.if_contains("leader");
  if (leader == nullptr || !leader->is_object()) bad_member("leader", "an object");
  info.owner = string_member(leader->get_object(), "owner", /*required=*/false);
  info.value = string_member(leader->get_object(), "value");
  info.fencing_token = uint_member(object, "fencing_token");
  info.acquired_at = time_member(object, "acquired_at");
  info.expires_at = time_member(object, "expires_at");
  if (const auto* session = object.if_contains("session_id"); session && session->is_string()) {
    info.session_id = std::string(session->get_string());
  }
  return info;
}

}  // namespace dlock::client::detail
