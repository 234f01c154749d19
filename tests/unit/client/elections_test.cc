// Elections through the client (C3 "Elections", docs/adr/0020-more-primitives-design.md) against
// a fake dlockd: what a campaign sends and how "held" is a value, proclaim and resign, a
// leadership lost with its session (it is session-bound, ADR-0018), the leader read and the
// observe long poll: its query (after_token, after_value, wait_ms) and its deadline allowance
// (ADR-0012: the server may hold the poll for the wait).

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include "dlock/client.h"
#include "scripted_api_test.h"
#include "test_options.h"
#include "wait_until.h"

namespace dlock::client {
namespace {

using std::chrono::milliseconds;
using testing::error_body;
using testing::FakeLockApi;
using testing::FakeRequest;
using testing::FakeResponse;
using testing::FakeServer;
using testing::wait_until;

constexpr const char* kLeaderBody =
    R"({"name":"db","leader":{"owner":"o-7","value":"10.0.0.7:5432"},"fencing_token":77,
    "acquired_at":"2030-01-01T00:00:00Z","expires_at":"2030-01-01T00:00:30Z","session_id":"s-7"})";

using ElectionsTest = testing::ScriptedApiTest;

TEST_F(ElectionsTest, ACampaignSendsTheValueAndWaitAndLeadsWithTheToken) {
  Session session(client_, {"tester", milliseconds(3000), {}});
  auto leadership = session.campaign("db primary", "10.0.0.7:5432", {milliseconds(800), "prod"});
  ASSERT_TRUE(leadership.has_value());
  EXPECT_EQ(leadership->token(), 42u);
  EXPECT_EQ(leadership->value(), "10.0.0.7:5432");
  EXPECT_EQ(leadership->name(), "db primary");
  EXPECT_EQ(leadership->ns(), "prod");
  EXPECT_TRUE(leadership->still_valid());
  EXPECT_TRUE(leadership->lock().session_bound());
  const auto campaigns = sent("POST", "/v1/elections/db%20primary/campaign?ns=prod");
  ASSERT_EQ(campaigns.size(), 1u);
  const auto body = boost::json::parse(campaigns[0].body).as_object();
  EXPECT_EQ(body.at("session_id").as_string(), "s-1");
  EXPECT_EQ(body.at("value").as_string(), "10.0.0.7:5432");
  EXPECT_GT(body.at("wait_ms").to_number<int>(), 0);
  EXPECT_LE(body.at("wait_ms").to_number<int>(), 800);
  EXPECT_FALSE(body.contains("ttl_ms"));
}

TEST_F(ElectionsTest, AnotherLeaderIsAnEmptyOptionalNotAnError) {
  Session session(client_, {"tester", milliseconds(3000), {}});
  api_.held = true;
  EXPECT_FALSE(session.campaign("db", "me").has_value());
  api_.held = false;
  api_.session_gone = true;
  EXPECT_THROW(session.campaign("db", "me"), SessionNotFoundError);
}

TEST_F(ElectionsTest, ProclaimKeepsTheTokenAndChangesTheValue) {
  Session session(client_, {"tester", milliseconds(3000), {}});
  auto leadership = session.campaign("db", "a");
  ASSERT_TRUE(leadership.has_value());
  leadership->proclaim("b");
  EXPECT_EQ(leadership->value(), "b");
  EXPECT_EQ(leadership->token(), 42u);
  const auto proclaims = sent("POST", "/v1/elections/db/proclaim");
  ASSERT_EQ(proclaims.size(), 1u);
  const auto body = boost::json::parse(proclaims[0].body).as_object();
  EXPECT_EQ(body.at("fencing_token").to_number<std::uint64_t>(), 42u);
  EXPECT_EQ(body.at("value").as_string(), "b");
}

TEST_F(ElectionsTest, AProclaimAnsweredLockLostThrowsAndTheLeadershipIsLost) {
  Session session(client_, {"tester", milliseconds(3000), {}});
  auto leadership = session.campaign("db", "a");
  ASSERT_TRUE(leadership.has_value());
  api_.lock_lost = true;
  EXPECT_THROW(leadership->proclaim("b"), LockLostError);
  EXPECT_FALSE(leadership->still_valid());
  EXPECT_NE(leadership->lost_reason(), "");
  EXPECT_EQ(leadership->value(), "a");
  leadership.reset();  // lost: nothing to resign
  EXPECT_TRUE(sent("POST", "/v1/elections/db/resign").empty());
}

TEST_F(ElectionsTest, ALeadershipIsLostWithItsSession) {
  Session session(client_, {"tester", milliseconds(3000), {}});
  auto leadership = session.campaign("db", "a");
  ASSERT_TRUE(leadership.has_value());
  api_.session_gone = true;  // the next keepalive (every ttl/3 of 1 s) answers 404
  ASSERT_TRUE(wait_until([&] { return !leadership->still_valid(); }, milliseconds(3000)));
  EXPECT_NE(leadership->lost_reason().find("session"), std::string::npos);
  leadership.reset();
  EXPECT_TRUE(sent("POST", "/v1/elections/db/resign").empty());
}

TEST_F(ElectionsTest, ALeadershipResignsOnDestructionOnce) {
  Session session(client_, {"tester", milliseconds(3000), {}});
  {
    auto leadership = session.campaign("db", "a", {milliseconds(0), "prod"});
    ASSERT_TRUE(leadership.has_value());
  }
  const auto resigns = sent("POST", "/v1/elections/db/resign?ns=prod");
  ASSERT_EQ(resigns.size(), 1u);
  const auto body = boost::json::parse(resigns[0].body).as_object();
  EXPECT_EQ(body.at("session_id").as_string(), "s-1");
  EXPECT_EQ(body.at("fencing_token").to_number<std::uint64_t>(), 42u);

  auto again = session.campaign("db", "a");
  ASSERT_TRUE(again.has_value());
  again->resign();
  EXPECT_FALSE(again->still_valid());
  again.reset();
  EXPECT_EQ(sent("POST", "/v1/elections/db/resign").size(), 2u);
}

TEST_F(ElectionsTest, TheLeaderReadDecodesTheLeaderAndNoLeaderIsEmpty) {
  bool leads = true;
  script_ = [&](const FakeRequest& request) -> FakeResponse {
    if (request.method != "GET") return {0, ""};
    if (!leads) return {404, error_body("no_leader", "nobody leads")};
    return {200, kLeaderBody};
  };
  const auto leader = client_.leader("db", "prod");
  ASSERT_TRUE(leader.has_value());
  EXPECT_EQ(leader->name, "db");
  EXPECT_EQ(leader->owner, "o-7");
  EXPECT_EQ(leader->value, "10.0.0.7:5432");
  EXPECT_EQ(leader->fencing_token, 77u);
  EXPECT_EQ(leader->session_id, std::optional<std::string>("s-7"));
  EXPECT_EQ(sent("GET", "/v1/elections/db?ns=prod").size(), 1u);
  leads = false;
  EXPECT_FALSE(client_.leader("db").has_value());
}

TEST_F(ElectionsTest, AnotherNotFoundIsAnErrorNotNoLeader) {
  script_ = [](const FakeRequest&) -> FakeResponse {
    return {404, error_body("not_found", "no such route")};
  };
  EXPECT_ANY_THROW(client_.leader("db"));
}

TEST_F(ElectionsTest, ObserveSendsTheLastTokenValueAndWait) {
  script_ = [](const FakeRequest& request) -> FakeResponse {
    if (request.method != "GET") return {0, ""};
    return {200, kLeaderBody};
  };
  const auto leader = client_.observe("db", 76, std::string("old value/1"), milliseconds(1500));
  ASSERT_TRUE(leader.has_value());
  EXPECT_EQ(leader->fencing_token, 77u);
  const auto gets = sent("GET", "/v1/elections/db?");
  ASSERT_EQ(gets.size(), 1u);
  EXPECT_NE(gets[0].target.find("after_token=76"), std::string::npos) << gets[0].target;
  EXPECT_NE(gets[0].target.find("after_value=old%20value%2F1"), std::string::npos)
      << gets[0].target;
  EXPECT_NE(gets[0].target.find("wait_ms=1500"), std::string::npos) << gets[0].target;

  // Without a value (nobody led at the last answer): the token alone.
  client_.observe("db", 77, std::nullopt, milliseconds(100));
  const auto later = sent("GET", "/v1/elections/db?");
  ASSERT_EQ(later.size(), 2u);
  EXPECT_NE(later[1].target.find("after_token=77"), std::string::npos);
  EXPECT_EQ(later[1].target.find("after_value"), std::string::npos);
}

// The server may hold the poll for the whole wait: an attempt must be allowed the wait beyond
// request_timeout, and the call the wait beyond retry_budget, or a quiet election would look
// like an unreachable server.
TEST_F(ElectionsTest, ObserveAllowsTheWaitBeyondTheRequestTimeoutAndRetryBudget) {
  ClientOptions options = testing::fast_options(server_.url());
  options.request_timeout = milliseconds(300);
  options.retry_budget = milliseconds(300);
  Client client(options);
  script_ = [](const FakeRequest& request) -> FakeResponse {
    if (request.method != "GET") return {0, ""};
    FakeResponse answer{404, error_body("no_leader", "nobody leads")};
    answer.delay = milliseconds(800);  // the wait passed without a leader
    return answer;
  };
  EXPECT_FALSE(client.observe("db", 5, std::nullopt, milliseconds(700)).has_value());
  EXPECT_EQ(sent("GET", "/v1/elections/db?").size(), 1u);
}

}  // namespace
}  // namespace dlock::client
