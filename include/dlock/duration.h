#pragma once

// The one spelling of durations shared by the CLI flags, the client options and the server
// configuration ("500ms", "30s", "5m", "1h"). Standard library only.

#include <chrono>
#include <string>
#include <string_view>

namespace dlock {

// Parses "500ms", "30s", "5m", "1h" (a non-negative integer and a unit; a bare "0" is allowed).
// Throws InvalidArgumentError whose field() is `field`, so a CLI or config error names the flag.
std::chrono::milliseconds parse_duration(std::string_view text,
                                         std::string_view field = "duration");
// The shortest exact spelling parse_duration accepts, e.g. 30000ms -> "30s".
std::string format_duration(std::chrono::milliseconds duration);

}  // namespace dlock
