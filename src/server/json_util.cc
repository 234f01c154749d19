#include "server/json_util.h"

#include <boost/json/parse.hpp>
#include <ctime>

#include "dlock/errors.h"

namespace dlock::server {

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
