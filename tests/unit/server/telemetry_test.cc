// Telemetry (src/server/telemetry.h): the per-status HTTP request counters, kept per code after
// their first use, and the log-level test callers make before building a frequent event's fields.

#include "server/telemetry.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace dlock::server {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(Telemetry, CountsHttpRequestsPerStatusCode) {
  Telemetry telemetry("sqlite");
  for (int i = 0; i < 3; ++i) telemetry.on_http_request(0, 200);
  telemetry.on_http_request(0, 409);
  telemetry.on_http_request(0, 599);
  telemetry.on_http_request(0, 100);
  telemetry.on_http_request(0, 700);  // outside 100..599: counted all the same
  const auto text = telemetry.scrape();
  EXPECT_TRUE(has_line(text, R"(dlock_http_requests_total{code="200",route="other"} 3)")) << text;
  EXPECT_TRUE(has_line(text, R"(dlock_http_requests_total{code="409",route="other"} 1)")) << text;
  EXPECT_TRUE(has_line(text, R"(dlock_http_requests_total{code="599",route="other"} 1)")) << text;
  EXPECT_TRUE(has_line(text, R"(dlock_http_requests_total{code="100",route="other"} 1)")) << text;
  EXPECT_TRUE(has_line(text, R"(dlock_http_requests_total{code="700",route="other"} 1)")) << text;
  EXPECT_EQ(text.find(R"(code="204")"), std::string::npos) << text;
}

TEST(Telemetry, CountsHttpRequestsPerRoute) {
  Telemetry telemetry("sqlite");
  telemetry.set_routes({"GET /v1/locks", "POST /v1/locks/{}/acquire"});
  telemetry.on_http_request(1, 200);
  telemetry.on_http_request(1, 409);
  telemetry.on_http_request(0, 200);
  telemetry.on_http_request(7, 404);  // no route matched
  const auto text = telemetry.scrape();
  EXPECT_TRUE(has_line(
      text, R"(dlock_http_requests_total{code="200",route="POST /v1/locks/{}/acquire"} 1)"))
      << text;
  EXPECT_TRUE(has_line(
      text, R"(dlock_http_requests_total{code="409",route="POST /v1/locks/{}/acquire"} 1)"))
      << text;
  EXPECT_TRUE(has_line(text, R"(dlock_http_requests_total{code="200",route="GET /v1/locks"} 1)"))
      << text;
  EXPECT_TRUE(has_line(text, R"(dlock_http_requests_total{code="404",route="other"} 1)")) << text;
}

// What an operator reaches for first (C4): the build, the process, and acquire buckets up to
// lock.max.wait.
TEST(Telemetry, ExportsTheBuildTheProcessAndBucketsUpToTheMaxWait) {
  set_build_info("9.8.7", "abc123");
  Telemetry telemetry("pg", std::chrono::minutes(10));
  const auto text = telemetry.scrape();
  EXPECT_TRUE(
      has_line(text, R"(dlock_build_info{backend="pg",revision="abc123",version="9.8.7"} 1)"))
      << text;
  for (const auto* name : {"process_cpu_seconds_total ", "process_resident_memory_bytes ",
                           "process_virtual_memory_bytes ", "process_open_fds ", "process_max_fds ",
                           "process_start_time_seconds "}) {
    EXPECT_NE(text.find(std::string("\n") + name), std::string::npos) << name << "\n" << text;
  }
  EXPECT_NE(text.find(R"(dlock_lock_acquire_seconds_bucket{backend="pg",outcome="held",le="600"})"),
            std::string::npos)
      << text;
  const auto short_wait = Telemetry("pg", std::chrono::seconds(90)).scrape();
  EXPECT_NE(short_wait.find(R"(outcome="held",le="90")"), std::string::npos) << short_wait;
  EXPECT_EQ(short_wait.find(R"(outcome="held",le="300")"), std::string::npos) << short_wait;
}

TEST(Telemetry, EachInstanceCountsItsOwnRequests) {
  Telemetry first("sqlite");
  Telemetry second("sqlite");
  first.on_http_request(0, 204);
  first.on_http_request(0, 204);
  second.on_http_request(0, 204);
  EXPECT_TRUE(has_line(first.scrape(), R"(dlock_http_requests_total{code="204",route="other"} 2)"));
  EXPECT_TRUE(
      has_line(second.scrape(), R"(dlock_http_requests_total{code="204",route="other"} 1)"));
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
