// The retry policy and the C3 decisions, with a scripted transport and a fake clock: no
// sockets, no real sleeps.

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <variant>
#include <vector>

#include "client/client_core.h"
#include "fake_server.h"

namespace dlock::client::detail {
namespace {

using client::testing::error_body;
using std::chrono::milliseconds;

using Scripted = std::variant<HttpResponse, TransportError>;

class ScriptedTransport : public Transport {
 public:
  std::deque<Scripted> script;
  std::vector<HttpRequest> requests;
  std::vector<milliseconds> timeouts;
  std::function<void()> on_send;  // e.g. advance the fake clock by the server's think time
  // Answered when the script runs out.
  Scripted fallback = HttpResponse{503, error_body("unavailable", "down"), std::nullopt};

  HttpResponse send(const HttpRequest& request, milliseconds timeout) override {
    requests.push_back(request);
    timeouts.push_back(timeout);
    if (on_send) on_send();
    Scripted next = fallback;
    if (!script.empty()) {
      next = script.front();
      script.pop_front();
    }
    if (auto* error = std::get_if<TransportError>(&next)) throw *error;
    return std::get<HttpResponse>(next);
  }
};

class RetryTest : public ::testing::Test {
 protected:
  RetryTest() {
    ClientOptions options;
    options.server_url = "http://127.0.0.1:1";
    options.retry_budget = std::chrono::seconds(10);
    options.request_timeout = std::chrono::seconds(2);
    options.clock_drift = 0.01;  // explicit: DLOCK_CLOCK_DRIFT in the environment must not leak in
    auto transport = std::make_unique<ScriptedTransport>();
    transport_ = transport.get();
    core_ = std::make_unique<ClientCore>(options, std::move(transport));
    core_->clock.now = [this] { return now_; };
    core_->clock.sleep = [this](milliseconds delay, const std::stop_token&) {
      sleeps_.push_back(delay);
      now_ += delay;
      return true;
    };
  }

  CallContext context() { return CallContext{now_ + std::chrono::seconds(10), {}, {}, {}}; }

  static HttpResponse ok(int status, std::string body) {
    return HttpResponse{status, std::move(body), std::nullopt};
  }
  static std::string grant(int ttl_ms = 30000) {
    return R"({"key":"k","fencing_token":7,"owner":"o","session_id":"s","ttl_ms":)" +
           std::to_string(ttl_ms) + R"(,"expires_at":"2030-01-01T00:00:00Z"})";
  }

  SteadyClock::time_point now_{std::chrono::hours(1)};
  std::vector<milliseconds> sleeps_;
  ScriptedTransport* transport_ = nullptr;
  std::unique_ptr<ClientCore> core_;
};

TEST(Backoff, GrowsExponentiallyWithJitterUpToTheCap) {
  const BackoffPolicy policy{milliseconds(100), milliseconds(1000)};
  for (std::uint64_t random : {0ULL, 1ULL, 12345ULL, ~0ULL}) {
    const milliseconds expected_full[] = {milliseconds(100),  milliseconds(200),
                                          milliseconds(400),  milliseconds(800),
                                          milliseconds(1000), milliseconds(1000)};
    for (int attempt = 0; attempt < 6; ++attempt) {
      const milliseconds delay = backoff_delay(policy, attempt, random);
      EXPECT_GE(delay, expected_full[attempt] / 2) << attempt;
      EXPECT_LE(delay, expected_full[attempt]) << attempt;
    }
  }
  EXPECT_EQ(backoff_delay(policy, 1'000'000, 0), milliseconds(500));  // no overflow
}

TEST(Backoff, JitterSpreadsClientsThatFailedTogether) {
  const BackoffPolicy policy{milliseconds(100), milliseconds(10'000)};
  std::set<long> seen;
  for (std::uint64_t random = 0; random < 50; ++random) {
    seen.insert(backoff_delay(policy, 3, random * 7919).count());
  }
  EXPECT_GT(seen.size(), 10U);
}

TEST_F(RetryTest, RetriesTransientFailuresThenSucceeds) {
  transport_->script = {
      TransportError(TransportError::Kind::kNotSent, "connection refused"),
      ok(503, error_body("unavailable", "db down")),
      ok(502, "bad gateway"),
      ok(200, grant()),
  };
  auto grant = core_->acquire("k", "s", milliseconds(30000), milliseconds(0), "", context());
  ASSERT_TRUE(grant.has_value());
  EXPECT_EQ(grant->handle.fencing_token, 7U);
  EXPECT_EQ(transport_->requests.size(), 4U);
  ASSERT_EQ(sleeps_.size(), 3U);
  // Each wait is within its backoff window; the windows grow.
  EXPECT_LE(sleeps_[0], milliseconds(50));
  EXPECT_GE(sleeps_[2], milliseconds(100));
}

TEST_F(RetryTest, AcquireNeverReportsAnOutageAsHeld) {
  transport_->fallback = ok(503, error_body("unavailable", "db down"));
  EXPECT_THROW(core_->acquire("k", "s", milliseconds(0), milliseconds(0), "", context()),
               UnavailableError);
  EXPECT_GT(transport_->requests.size(), 3U);
  // Gave up within the deadline.
  EXPECT_LE(now_, SteadyClock::time_point(std::chrono::hours(1)) + std::chrono::seconds(10));
}

TEST_F(RetryTest, NotLeaderSurfacesAsNotLeader) {
  transport_->fallback = ok(503, error_body("not_leader", "election"));
  EXPECT_THROW(core_->get("k", "", context()), NotLeaderError);
}

TEST_F(RetryTest, ConnectionLostAfterSendIsAnUnknownOutcome) {
  transport_->fallback = TransportError(TransportError::Kind::kMaybeSent, "reset");
  EXPECT_THROW(core_->release("k", "s", 7, "", context()), UnknownOutcomeError);
  transport_->fallback = TransportError(TransportError::Kind::kNotSent, "refused");
  try {
    core_->release("k", "s", 7, "", context());
    FAIL();
  } catch (const UnknownOutcomeError&) {
    FAIL() << "a request that never left must not be an unknown outcome";
  } catch (const UnavailableError& error) {
    EXPECT_NE(std::string(error.what()).find("gave up after"), std::string::npos);
  }
}

TEST_F(RetryTest, HonoursRetryAfter) {
  transport_->script = {HttpResponse{503, error_body("unavailable", "x"), milliseconds(3000)},
                        ok(200, R"({"locks":[]})")};
  EXPECT_TRUE(core_->list("", 0, "", context()).empty());
  ASSERT_EQ(sleeps_.size(), 1U);
  EXPECT_EQ(sleeps_[0], milliseconds(3000));
}

TEST_F(RetryTest, GivesUpRatherThanSleepPastTheDeadline) {
  transport_->script = {HttpResponse{503, error_body("unavailable", "x"), milliseconds(60'000)}};
  EXPECT_THROW(core_->list("", 0, "", context()), UnavailableError);
  EXPECT_TRUE(sleeps_.empty());
  EXPECT_EQ(transport_->requests.size(), 1U);
}

TEST_F(RetryTest, DecisionsAndCallerErrorsAreNotRetried) {
  transport_->script = {ok(409, error_body("held", "someone else"))};
  EXPECT_FALSE(core_->acquire("k", "s", milliseconds(0), milliseconds(0), "", context()));
  transport_->script = {ok(409, error_body("lock_lost", "gone"))};
  EXPECT_THROW(core_->extend("k", "s", 7, milliseconds(0), "", context()), LockLostError);
  transport_->script = {ok(404, error_body("session_not_found", "gone"))};
  EXPECT_THROW(core_->acquire("k", "s", milliseconds(0), milliseconds(0), "", context()),
               SessionNotFoundError);
  transport_->script = {ok(400, error_body("invalid_argument", "too long", "ttl_ms"))};
  try {
    core_->acquire("k", "s", milliseconds(0), milliseconds(0), "", context());
    FAIL();
  } catch (const InvalidArgumentError& error) {
    EXPECT_EQ(error.field(), "ttl_ms");
  }
  transport_->script = {ok(404, error_body("lock_not_found", "free"))};
  EXPECT_FALSE(core_->get("k", "", context()).has_value());
  EXPECT_EQ(transport_->requests.size(), 5U);
  EXPECT_TRUE(sleeps_.empty());
}

TEST_F(RetryTest, ClientDeadlineCountsFromTheSendTimeOfTheGrantingAttempt) {
  transport_->script = {ok(503, error_body("unavailable", "x")), ok(200, grant(30000))};
  auto grant = core_->acquire("k", "s", milliseconds(0), milliseconds(0), "", context());
  ASSERT_TRUE(grant);
  // The second attempt was sent after one backoff sleep; the lease is trusted for its TTL less
  // the 1 % clock-rate allowance (ADR-0012).
  EXPECT_EQ(grant->handle.client_deadline, SteadyClock::time_point(std::chrono::hours(1)) +
                                               sleeps_.at(0) + milliseconds(30000 - 300));
  EXPECT_EQ(grant->ttl, milliseconds(30000));
}

TEST_F(RetryTest, WaitingAcquireStretchesTheAttemptTimeoutAndSendsWait) {
  transport_->script = {ok(200, grant())};
  ASSERT_TRUE(core_->acquire("a/b", "s", milliseconds(0), milliseconds(5000), "ns1", context()));
  EXPECT_EQ(transport_->timeouts.at(0), milliseconds(2000 + 5000));
  EXPECT_EQ(transport_->requests.at(0).target, "/v1/locks/a%2Fb/acquire?ns=ns1");
  EXPECT_NE(transport_->requests.at(0).body.find(R"("wait_ms":5000)"), std::string::npos);
}

TEST_F(RetryTest, HeldBeforeOurWaitIsOverIsAskedAgain) {
  // A server whose maximum wait is shorter than ours answers "held" early; the client asks
  // again for the rest of its wait.
  transport_->on_send = [this] { now_ += std::chrono::seconds(6); };
  transport_->script = {ok(409, error_body("held", "x")), ok(200, grant())};
  auto grant = core_->acquire("k", "s", milliseconds(0), milliseconds(10'000), "", context());
  ASSERT_TRUE(grant);
  ASSERT_EQ(transport_->requests.size(), 2U);
  EXPECT_NE(transport_->requests.at(0).body.find(R"("wait_ms":10000)"), std::string::npos);
  EXPECT_NE(transport_->requests.at(1).body.find(R"("wait_ms":4000)"), std::string::npos)
      << transport_->requests.at(1).body;
}

TEST_F(RetryTest, RetriedWaitingAcquireAsksOnlyForTheRestOfItsWait) {
  transport_->on_send = [this] { now_ += std::chrono::seconds(2); };
  transport_->script = {ok(503, error_body("unavailable", "x")), ok(200, grant())};
  CallContext generous = context();
  generous.deadline = now_ + std::chrono::minutes(1);
  ASSERT_TRUE(core_->acquire("k", "s", milliseconds(0), milliseconds(10'000), "", generous));
  ASSERT_EQ(transport_->requests.size(), 2U);
  const std::string expected = R"("wait_ms":)" + std::to_string(8000 - sleeps_.at(0).count()) + "}";
  EXPECT_NE(transport_->requests.at(1).body.find(expected), std::string::npos)
      << transport_->requests.at(1).body;
  EXPECT_EQ(transport_->timeouts.at(1), milliseconds(2000 + 8000) - sleeps_.at(0));
}

TEST_F(RetryTest, HeldAfterTheWholeWaitIsHeld) {
  transport_->on_send = [this] { now_ += std::chrono::seconds(10); };
  transport_->script = {ok(409, error_body("held", "x"))};
  EXPECT_FALSE(core_->acquire("k", "s", milliseconds(0), milliseconds(10'000), "", context()));
  EXPECT_EQ(transport_->requests.size(), 1U);
}

TEST_F(RetryTest, RoutesFollowC3) {
  transport_->fallback = ok(204, "");
  core_->release("payouts/batch-17", "s 1", 18446744073709551615ULL, "", context());
  EXPECT_EQ(transport_->requests.back().target,
            "/v1/locks/payouts%2Fbatch-17?session_id=s%201&fencing_token=18446744073709551615");
  EXPECT_EQ(transport_->requests.back().method, Method::kDelete);
  core_->close_session("s-1", context());
  EXPECT_EQ(transport_->requests.back().target, "/v1/sessions/s-1");

  core_->options.admin_token = "t0k";
  transport_->fallback = ok(200, R"({"revoked":true,"fencing_token":9,"owner":"o"})");
  const LockOutcome outcome = core_->revoke("k", "ns", context());
  EXPECT_TRUE(outcome.revoked);
  EXPECT_EQ(outcome.fencing_token, 9U);
  EXPECT_EQ(transport_->requests.back().target, "/v1/admin/locks/k/revoke?ns=ns");
  ASSERT_EQ(transport_->requests.back().headers.size(), 1U);
  EXPECT_EQ(transport_->requests.back().headers[0].second, "Bearer t0k");
}

TEST_F(RetryTest, TokensAboveTwoToThe53SurviveDecoding) {
  transport_->script = {
      ok(200, R"({"key":"k","fencing_token":18446744073709551615,"ttl_ms":1000})")};
  auto grant = core_->acquire("k", "s", milliseconds(0), milliseconds(0), "", context());
  ASSERT_TRUE(grant);
  EXPECT_EQ(grant->handle.fencing_token, 18446744073709551615ULL);
}

TEST_F(RetryTest, ExtendAnsweringAnotherTokenIsALostLock) {
  transport_->script = {ok(200, grant())};  // token 7
  EXPECT_THROW(core_->extend("k", "s", 8, milliseconds(0), "", context()), LockLostError);
}

// --- renew_until_deadline: the keepalive and auto-extend loop --------------------------------

// A lease of 300 ms renewed every 100 ms, on a fake clock that advances when the loop sleeps.
class RenewalTest : public ::testing::Test {
 protected:
  using TimePoint = SteadyClock::time_point;

  RenewalTest() {
    clock_.now = [this] { return now_; };
    clock_.sleep = [this](milliseconds delay, const std::stop_token& stop) {
      sleeps_.push_back(delay);
      now_ += delay;
      return !stop.stop_requested();
    };
    renewal_.retry_delay = milliseconds(50);
    renewal_.deadline = [this] { return deadline_; };
    renewal_.on_expired = [this](const std::string& error) { expired_.push_back(error); };
    renewal_.on_retry = [this](const std::string& error) { retried_.push_back(error); };
  }

  void run(TimePoint first) { renew_until_deadline(renewal_, first, clock_, stop_.get_token()); }

  TimePoint start_ = TimePoint(std::chrono::hours(1));
  TimePoint now_ = start_;
  TimePoint deadline_ = start_ + milliseconds(300);
  RetryClock clock_;
  LeaseRenewal renewal_;
  std::stop_source stop_;
  std::vector<milliseconds> sleeps_;
  std::vector<TimePoint> attempts_;   // when renew ran, by the fake clock
  std::vector<TimePoint> deadlines_;  // the deadline each attempt was bounded by
  std::vector<std::string> expired_;
  std::vector<std::string> retried_;
};

TEST_F(RenewalTest, RenewsAtTheTimesRenewAsksForUntilItEnds) {
  renewal_.renew = [this](TimePoint deadline) -> std::optional<TimePoint> {
    attempts_.push_back(now_);
    deadlines_.push_back(deadline);
    if (attempts_.size() == 3) return std::nullopt;  // a final answer: the loop ends
    deadline_ = now_ + milliseconds(300);
    return now_ + milliseconds(100);
  };
  run(start_ + milliseconds(100));
  ASSERT_EQ(attempts_.size(), 3U);
  EXPECT_EQ(attempts_[0], start_ + milliseconds(100));
  EXPECT_EQ(attempts_[1], start_ + milliseconds(200));
  EXPECT_EQ(attempts_[2], start_ + milliseconds(300));
  EXPECT_EQ(deadlines_[0], start_ + milliseconds(300)) << "bounded by the lease's deadline";
  EXPECT_EQ(deadlines_[1], start_ + milliseconds(400)) << "the deadline is read afresh";
  EXPECT_TRUE(expired_.empty());
  EXPECT_TRUE(retried_.empty());
}

TEST_F(RenewalTest, RetriesATransientFailureUntilTheDeadlineThenReportsExpiredOnce) {
  renewal_.renew = [this](TimePoint) -> std::optional<TimePoint> {
    attempts_.push_back(now_);
    throw UnavailableError("backend down");
  };
  run(start_ + milliseconds(100));
  // 100, 150, 200, 250: retried every 50 ms; the last retry is due at the deadline itself.
  ASSERT_EQ(attempts_.size(), 5U);
  EXPECT_EQ(attempts_[1] - attempts_[0], milliseconds(50));
  EXPECT_EQ(attempts_.back(), deadline_) << "never scheduled past the deadline";
  EXPECT_EQ(retried_.size(), 4U);
  ASSERT_EQ(expired_.size(), 1U);
  EXPECT_NE(expired_[0].find("backend down"), std::string::npos);
  EXPECT_GE(now_, deadline_) << "expired only once the deadline has passed";
}

TEST_F(RenewalTest, RetryIsNeverScheduledPastTheDeadline) {
  renewal_.retry_delay = milliseconds(1000);
  renewal_.renew = [this](TimePoint) -> std::optional<TimePoint> {
    attempts_.push_back(now_);
    throw UnavailableError("down");
  };
  run(start_ + milliseconds(100));
  ASSERT_EQ(attempts_.size(), 2U);
  EXPECT_EQ(attempts_[1], deadline_);
  EXPECT_EQ(expired_.size(), 1U);
}

TEST_F(RenewalTest, ASuccessAfterFailuresKeepsTheLeaseAndResumesTheSchedule) {
  int failures = 2;
  renewal_.renew = [&](TimePoint) -> std::optional<TimePoint> {
    attempts_.push_back(now_);
    if (failures-- > 0) throw UnavailableError("blip");
    if (attempts_.size() > 3) return std::nullopt;
    deadline_ = now_ + milliseconds(300);
    return now_ + milliseconds(100);
  };
  run(start_ + milliseconds(100));
  ASSERT_EQ(attempts_.size(), 4U);
  EXPECT_EQ(attempts_[2], start_ + milliseconds(200));
  EXPECT_EQ(attempts_[3], start_ + milliseconds(300));
  EXPECT_EQ(retried_.size(), 2U);
  EXPECT_TRUE(expired_.empty()) << "a failure before the deadline is not a loss";
}

TEST_F(RenewalTest, StopEndsTheLoopWithoutReportingALoss) {
  renewal_.renew = [this](TimePoint) -> std::optional<TimePoint> {
    attempts_.push_back(now_);
    stop_.request_stop();  // the owner closes the session while a call fails
    throw UnavailableError("cancelled");
  };
  run(start_ + milliseconds(100));
  EXPECT_EQ(attempts_.size(), 1U);
  EXPECT_TRUE(expired_.empty());
  EXPECT_TRUE(retried_.empty());
}

TEST_F(RenewalTest, AStopRequestedWhileSleepingEndsTheLoopBeforeAnyAttempt) {
  renewal_.renew = [this](TimePoint) -> std::optional<TimePoint> {
    attempts_.push_back(now_);
    return now_ + milliseconds(100);
  };
  stop_.request_stop();
  run(start_ + milliseconds(100));
  EXPECT_TRUE(attempts_.empty());
}

}  // namespace
}  // namespace dlock::client::detail
