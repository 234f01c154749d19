// Telemetry (src/server/telemetry.h): the per-status HTTP request counters, kept per code after
// their first use, and the log-level test callers make before building a frequent event's fields.

#include "server/telemetry.h"

#include <gtest/gtest.h>

#include <string>

namespace dlock::server {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(Telemetry, CountsHttpRequestsPerStatusCode) {
  Telemetry telemetry("sqlite");
  for (int i = 0; i < 3; ++i) telemetry.on_http_request(200);
  telemetry.on_http_request(409);
  telemetry.on_http_request(599);
  telemetry.on_http_request(100);
  telemetry.on_http_request(700);  // outside 100..599: counted all the same
  const auto text = telemetry.scrape();
  EXPECT_TRUE(has_line(text, R"(dlock_http_requests_total{code="200"} 3)")) << text;
  EXPECT_TRUE(has_line(text, R"(dlock_http_requests_total{code="409"} 1)")) << text;
  EXPECT_TRUE(has_line(text, R"(dlock_http_requests_total{code="599"} 1)")) << text;
  EXPECT_TRUE(has_line(text, R"(dlock_http_requests_total{code="100"} 1)")) << text;
  EXPECT_TRUE(has_line(text, R"(dlock_http_requests_total{code="700"} 1)")) << text;
  EXPECT_EQ(text.find(R"(code="204")"), std::string::npos) << text;
}

TEST(Telemetry, EachInstanceCountsItsOwnRequests) {
  Telemetry first("sqlite");
  Telemetry second("sqlite");
  first.on_http_request(204);
  first.on_http_request(204);
  second.on_http_request(204);
  EXPECT_TRUE(has_line(first.scrape(), R"(dlock_http_requests_total{code="204"} 2)"));
  EXPECT_TRUE(has_line(second.scrape(), R"(dlock_http_requests_total{code="204"} 1)"));
}

TEST(Telemetry, LogEnabledFollowsTheLevel) {
  set_log_level("warn");
  EXPECT_FALSE(log_enabled("debug"));
  EXPECT_FALSE(log_enabled("info"));
  EXPECT_TRUE(log_enabled("warn"));
  EXPECT_TRUE(log_enabled("error"));
  set_log_level("debug");
  EXPECT_TRUE(log_enabled("debug"));
  EXPECT_TRUE(log_enabled("info"));
  set_log_level("info");
  EXPECT_FALSE(log_enabled("debug"));
  EXPECT_TRUE(log_enabled("info"));
}

}  // namespace
}  // namespace dlock::server
