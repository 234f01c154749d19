#pragma once

// JSON and text helpers shared by the API handlers and the logs.

#include <boost/json/object.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/types.h"

namespace dlock::server {

// RFC 3339 UTC with milliseconds, e.g. "2026-11-30T01:02:03.456Z".
std::string format_time(WallClock::time_point time);

// Typed access to a request body; each throws InvalidArgumentError naming the field.
class BodyReader {
 public:
  // Parses `body` (empty = {}); rejects malformed JSON, non-objects and unknown fields.
  BodyReader(std::string_view body, std::initializer_list<std::string_view> allowed_fields);
  std::optional<std::string> string(std::string_view field) const;
  std::optional<std::int64_t> integer(std::string_view field) const;
  std::optional<std::uint64_t> unsigned_integer(std::string_view field) const;

 private:
  boost::json::object object_;
};

}  // namespace dlock::server
