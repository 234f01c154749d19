// Telemetry (src/server/telemetry.h): the per-status HTTP request counters, kept per code after
// their first use, and the log-level test callers make before building a frequent event's fields.

#include "server/telemetry.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

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

LockInfo grant(std::string key, HoldMode mode, bool leader = false) {
  LockInfo info;
  info.key = std::move(key);
  info.mode = mode;
  if (leader) info.value = "v";
  return info;
}

// dlock_held_locks counts the store's live grants by mode, from the list it is given; a failed
// count leaves the family out rather than showing stale figures.
TEST(Telemetry, HeldLocksAreCountedByModeFromTheStoresList) {
  Telemetry telemetry("sqlite");
  EXPECT_EQ(telemetry.scrape().find("dlock_held_locks{"), std::string::npos);
  ASSERT_TRUE(telemetry.held_count_due());
  EXPECT_FALSE(telemetry.held_count_due()) << "one count at a time, at most one a second";
  const std::vector<LockInfo> grants = {
      grant("default/a", HoldMode::kExclusive), grant("default/b", HoldMode::kShared),
      grant("default/b", HoldMode::kShared), grant("default/c", HoldMode::kPermit),
      grant("default/e", HoldMode::kExclusive, true)};
  telemetry.set_held_locks(&grants);
  const auto text = telemetry.scrape();
  EXPECT_TRUE(has_line(text, R"(dlock_held_locks{backend="sqlite",mode="exclusive"} 1)")) << text;
  EXPECT_TRUE(has_line(text, R"(dlock_held_locks{backend="sqlite",mode="shared"} 2)")) << text;
  EXPECT_TRUE(has_line(text, R"(dlock_held_locks{backend="sqlite",mode="permit"} 1)")) << text;
  EXPECT_TRUE(has_line(text, R"(dlock_held_locks{backend="sqlite",mode="leader"} 1)")) << text;
  EXPECT_FALSE(telemetry.held_count_due()) << "within the second of the last count";
  telemetry.set_held_locks(nullptr);
  EXPECT_EQ(telemetry.scrape().find("dlock_held_locks{"), std::string::npos);
}

// dlock_lock_hold_seconds: a grant made here is timed to its release or revoke; an expiry is
// timed by the store's own acquired and expiry times, whoever granted it; a release of a grant
// made elsewhere is counted as unmeasured, not observed as 0.
TEST(Telemetry, HoldDurationsAreObservedWhenGrantsEnd) {
  Telemetry telemetry("pg");
  LockHandle handle;
  handle.key = "default/a";
  handle.fencing_token = 7;
  handle.mode = HoldMode::kShared;
  telemetry.on_grant(handle);
  telemetry.on_release("default/a", 7);
  handle.key = "default/leader";
  handle.mode = HoldMode::kExclusive;
  telemetry.on_grant(handle);
  telemetry.on_leader("default/leader", 7);
  telemetry.on_revoke("default/leader", 7);
  auto expired = grant("default/x", HoldMode::kPermit);
  expired.acquired_at = WallClock::time_point(std::chrono::seconds(1000));
  expired.expires_at = expired.acquired_at + std::chrono::seconds(20);
  telemetry.on_expiry(expired);
  telemetry.on_release("default/elsewhere", 9);
  telemetry.on_release("default/a", 7);  // a second end of one grant is not a second hold
  const auto text = telemetry.scrape();
  EXPECT_TRUE(has_line(text, R"(dlock_lock_hold_seconds_count{backend="pg",mode="shared"} 1)"))
      << text;
  EXPECT_TRUE(
      has_line(text, R"(dlock_lock_hold_seconds_bucket{backend="pg",mode="shared",le="0.01"} 1)"))
      << text;
  EXPECT_TRUE(has_line(text, R"(dlock_lock_hold_seconds_count{backend="pg",mode="leader"} 1)"))
      << text;
  EXPECT_TRUE(has_line(text, R"(dlock_lock_hold_seconds_count{backend="pg",mode="exclusive"} 0)"))
      << text;
  EXPECT_TRUE(has_line(text, R"(dlock_lock_hold_seconds_sum{backend="pg",mode="permit"} 20)"))
      << text;
  EXPECT_TRUE(
      has_line(text, R"(dlock_lock_hold_seconds_bucket{backend="pg",mode="permit",le="10"} 0)"))
      << text;
  EXPECT_TRUE(has_line(text, R"(dlock_lock_holds_unmeasured_total{backend="pg"} 2)")) << text;
}

// dlock_limit: the configured caps, which the alert rules divide by.
TEST(Telemetry, ExportsTheConfiguredCaps) {
  Telemetry telemetry("etcd");
  telemetry.set_limits({{"server.max.sessions", 1200}, {"server.max.unsent.bytes", 1 << 20}});
  const auto text = telemetry.scrape();
  EXPECT_TRUE(has_line(text, R"(dlock_limit{limit="server.max.sessions"} 1200)")) << text;
  EXPECT_TRUE(has_line(text, R"(dlock_limit{limit="server.max.unsent.bytes"} 1048576)")) << text;
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
