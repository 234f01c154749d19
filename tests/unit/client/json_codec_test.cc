// The client's RFC 3339 timestamps (src/client/json_codec.h): what the server's `expires_at`
// and `acquired_at` are read with, and written back with by the CLI.

#include "client/json_codec.h"

#include <gtest/gtest.h>

#include <chrono>

namespace dlock::client::detail {
namespace {

using namespace std::chrono;

// The instant's own millisecond, never the next one: a cast toward zero would name a later
// millisecond for every instant before 1970 (found by the client_response fuzz target).
TEST(Rfc3339, FormatsTheMillisecondAnInstantIsInOnBothSidesOf1970) {
  const auto before = parse_rfc3339("1874-11-30T01:02:03.1234890134564Z");
  EXPECT_EQ(format_rfc3339(before), "1874-11-30T01:02:03.123Z");
  EXPECT_EQ(parse_rfc3339(format_rfc3339(before)), floor<milliseconds>(before));
  const auto just_before_epoch = WallClock::time_point{} - nanoseconds(1);
  EXPECT_EQ(format_rfc3339(just_before_epoch), "1969-12-31T23:59:59.999Z");
  const auto after = parse_rfc3339("2026-12-04T05:30:00.9999Z");
  EXPECT_EQ(format_rfc3339(after), "2026-12-04T05:30:00.999Z");
}

}  // namespace
}  // namespace dlock::client::detail
