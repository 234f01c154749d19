#include "server/json_util.h"

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/parse.hpp>
#include <ctime>
#include <set>
#include <vector>

#include "dlock/errors.h"

namespace dlock::server {
namespace {

// A boost::json::basic_parser handler that only looks for a key repeated within one object
// (boost::json::parse keeps the last one silently; a proxy or another parser may keep the first,
// so the request would mean different things to each).
struct DuplicateKeyFinder {
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);
  using ec = boost::system::error_code;
  using sv = std::string_view;

  std::vector<std::set<std::string>> objects;
  std::string key;
  std::optional<std::string> duplicate;

  bool on_document_begin(ec&) { return true; }
  bool on_document_end(ec&) { return true; }
  bool on_object_begin(ec&) {
    objects.emplace_back();
    return true;
  }
  bool on_object_end(std::size_t, ec&) {
    objects.pop_back();
    return true;
  }
  bool on_array_begin(ec&) { return true; }
  bool on_array_end(std::size_t, ec&) { return true; }
  bool on_key_part(sv part, std::size_t, ec&) {
    key.append(part);
    return true;
  }
  bool on_key(sv part, std::size_t, ec& error) {
    key.append(part);
    if (!objects.back().insert(key).second && !duplicate) duplicate = key;
    key.clear();
    if (duplicate) error = boost::json::error::syntax;  // stop: one is enough
    return !duplicate;
  }
  bool on_string_part(sv, std::size_t, ec&) { return true; }
  bool on_string(sv, std::size_t, ec&) { return true; }
  bool on_number_part(sv, ec&) { return true; }
  bool on_int64(std::int64_t, sv, ec&) { return true; }
  bool on_uint64(std::uint64_t, sv, ec&) { return true; }
  bool on_double(double, sv, ec&) { return true; }
  bool on_bool(bool, ec&) { return true; }
  bool on_null(ec&) { return true; }
  bool on_comment_part(sv, ec&) { return true; }
  bool on_comment(sv, ec&) { return true; }
};

// The first key repeated within one object of `json` (valid JSON), if any.
std::optional<std::string> duplicate_key(std::string_view json) {
  boost::json::basic_parser<DuplicateKeyFinder> parser{boost::json::parse_options{}};
  boost::system::error_code error;
  parser.write_some(false, json.data(), json.size(), error);
  return parser.handler().duplicate;
}

}  // namespace

std::string format_time(WallClock::time_point time) {
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(millis / 1000 - (millis % 1000 < 0));
  const int fraction = static_cast<int>((millis % 1000 + 1000) % 1000);
  std::tm parts{};
  gmtime_r(&seconds, &parts);
  char buffer[40];
  const auto length = std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%S", &parts);
  std::snprintf(buffer + length, sizeof(buffer) - length, ".%03dZ", fraction);
  return buffer;
}

BodyReader::BodyReader(std::string_view body,
                       std::initializer_list<std::string_view> allowed_fields) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return;
  boost::system::error_code error;
  auto value = boost::json::parse(body, error);
  if (error)
    throw InvalidArgumentError("body", "request body is not valid JSON: " + error.message());
  if (!value.is_object()) throw InvalidArgumentError("body", "request body must be a JSON object");
  if (auto key = duplicate_key(body)) {
    throw InvalidArgumentError(*key, "duplicate field '" + *key + "'");
  }
  object_ = std::move(value.as_object());
  for (const auto& entry : object_) {
    bool known = false;
    for (const auto field : allowed_fields) known = known || field == entry.key();
    if (!known) {
      throw InvalidArgumentError(std::string(entry.key()),
                                 "unknown field '" + std::string(entry.key()) + "'");
    }
  }
}

std::optional<std::string> BodyReader::string(std::string_view field) const {
  const auto* value = object_.if_contains(field);
  if (value == nullptr || value->is_null()) return std::nullopt;
  if (!value->is_string()) {
    throw InvalidArgumentError(std::string(field), std::string(field) + " must be a string");
  }
  return std::string(value->as_string());
}

std::optional<std::int64_t> BodyReader::integer(std::string_view field) const {
  const auto* value = object_.if_contains(field);
  if (value == nullptr || value->is_null()) return std::nullopt;
  if (value->is_int64()) return value->as_int64();
  if (value->is_uint64()) {
    throw InvalidArgumentError(std::string(field), std::string(field) + " is too large");
  }
  if (value->is_double()) {
    const double number = value->as_double();
    // Range first: casting an out-of-range double to an integer is undefined behaviour.
    if (number >= -9.0e18 && number <= 9.0e18 &&
        number == static_cast<double>(static_cast<std::int64_t>(number))) {
      return static_cast<std::int64_t>(number);
    }
  }
  throw InvalidArgumentError(std::string(field), std::string(field) + " must be an integer");
}

std::optional<std::uint64_t> BodyReader::unsigned_integer(std::string_view field) const {
  const auto* value = object_.if_contains(field);
  if (value == nullptr || value->is_null()) return std::nullopt;
  if (value->is_uint64()) return value->as_uint64();
  if (value->is_int64() && value->as_int64() >= 0) {
    return static_cast<std::uint64_t>(value->as_int64());
  }
  throw InvalidArgumentError(std::string(field),
                             std::string(field) + " must be a non-negative integer");
}

}  // namespace dlock::server
