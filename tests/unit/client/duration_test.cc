#include <gtest/gtest.h>

#include "dlock/client.h"

namespace dlock::client {
namespace {

using std::chrono::milliseconds;

TEST(ParseDuration, AcceptsEveryUnit) {
  EXPECT_EQ(parse_duration("500ms"), milliseconds(500));
  EXPECT_EQ(parse_duration("30s"), milliseconds(30'000));
  EXPECT_EQ(parse_duration("5m"), milliseconds(300'000));
  EXPECT_EQ(parse_duration("2h"), milliseconds(7'200'000));
  EXPECT_EQ(parse_duration("0"), milliseconds(0));
  EXPECT_EQ(parse_duration("0s"), milliseconds(0));
}

TEST(ParseDuration, RejectsMalformedInputNamingTheField) {
  for (const char* bad : {"", "30", "s", "-5s", "1.5s", "5 s", "5sec", "10d", "ms5", " 5s",
                          "99999999999999999999ms", "9223372036854775807h"}) {
    try {
      parse_duration(bad, "--wait");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InvalidArgumentError& error) {
      EXPECT_EQ(error.field(), "--wait") << bad;
      EXPECT_NE(std::string(error.what()).find("--wait"), std::string::npos) << error.what();
    }
  }
}

TEST(ParseClockDrift, AcceptsAFractionOrAPercentage) {
  EXPECT_DOUBLE_EQ(parse_clock_drift("0.01"), 0.01);
  EXPECT_DOUBLE_EQ(parse_clock_drift("2%"), 0.02);
  EXPECT_DOUBLE_EQ(parse_clock_drift("0"), 0.0);
}

TEST(ParseClockDrift, RejectsAnythingElseNamingTheField) {
  for (const char* bad : {"", "%", "0.5", "50%", "-0.01", "1", "nan", "0.01x", "one"}) {
    try {
      parse_clock_drift(bad, "--clock-drift");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InvalidArgumentError& error) {
      EXPECT_EQ(error.field(), "--clock-drift") << bad;
    }
  }
}

TEST(FormatDuration, RoundTripsThroughParse) {
  for (long ms : {0L, 1L, 999L, 1000L, 1500L, 60'000L, 90'000L, 3'600'000L}) {
    const milliseconds value(ms);
    EXPECT_EQ(parse_duration(format_duration(value)), value) << format_duration(value);
  }
  EXPECT_EQ(format_duration(milliseconds(30'000)), "30s");
  EXPECT_EQ(format_duration(milliseconds(1500)), "1500ms");
  EXPECT_EQ(format_duration(milliseconds(300'000)), "5m");
}

}  // namespace
}  // namespace dlock::client
