// End to end through a real dlockd process, on every backend: elections (/v1/elections, contract
// C3 "Elections", docs/adr/0020-more-primitives-design.md) — campaign, proclaim, resign, the
// read and the observing long poll, a leader ending with its session, and the errors.

#include <gtest/gtest.h>

#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <future>
#include <string>

#include "support/dlockd_backends.h"
#include "support/dlockd_process.h"

namespace dlock {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::DlockdProcess;
using testing::HttpResult;
namespace json = boost::json;

class ElectionsEndToEnd : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    server_ =
        std::make_unique<DlockdProcess>(testing::dlockd_options(GetParam(), "dlock_elections"));
  }

  HttpResult call(const std::string& method, const std::string& target,
                  const json::object& body = {}) {
    return testing::http_call(server_->address(), method, target,
                              body.empty() ? "" : json::serialize(body));
  }

  std::string open_session(const std::string& owner, int ttl_ms = 60000) {
    const auto result = call("POST", "/v1/sessions", {{"owner", owner}, {"ttl_ms", ttl_ms}});
    EXPECT_EQ(result.status, 201) << result.body;
    return std::string(result.json.at("session_id").as_string());
  }

  std::string fresh_name() {
    static std::atomic<int> counter{0};
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '-');
    return name + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  }

  HttpResult campaign(const std::string& name, const std::string& session, const std::string& value,
                      int wait_ms = 0) {
    return call("POST", "/v1/elections/" + name + "/campaign",
                {{"session_id", session}, {"value", value}, {"wait_ms", wait_ms}});
  }

  HttpResult proclaim(const std::string& name, const std::string& session, std::uint64_t token,
                      const std::string& value) {
    return call("POST", "/v1/elections/" + name + "/proclaim",
                {{"session_id", session}, {"fencing_token", token}, {"value", value}});
  }

  HttpResult resign(const std::string& name, const std::string& session, std::uint64_t token) {
    return call("POST", "/v1/elections/" + name + "/resign",
                {{"session_id", session}, {"fencing_token", token}});
  }

  HttpResult observe(const std::string& name, std::uint64_t after_token,
                     const std::string& after_value, int wait_ms) {
    std::string target = "/v1/elections/" + name + "?after_token=" + std::to_string(after_token) +
                         "&wait_ms=" + std::to_string(wait_ms);
    if (!after_value.empty()) target += "&after_value=" + after_value;
    return call("GET", target);
  }

  static std::uint64_t token_of(const HttpResult& result) {
    return result.json.at("fencing_token").to_number<std::uint64_t>();
  }
  static std::string value_of(const HttpResult& result) {
    return std::string(result.json.at("leader").at("value").as_string());
  }

  std::unique_ptr<DlockdProcess> server_;
};

TEST_P(ElectionsEndToEnd, CampaignProclaimResignAndTheNextLeader) {
  const auto name = fresh_name();
  const auto alice = open_session("alice");
  const auto bob = open_session("bob");
  const auto first = campaign(name, alice, "10.0.0.1");
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.json.at("name").as_string(), name);
  EXPECT_EQ(first.json.at("leader").at("owner").as_string(), "alice");
  EXPECT_EQ(value_of(first), "10.0.0.1");
  EXPECT_EQ(first.json.at("lease").as_string(), "session");
  EXPECT_EQ(first.json.at("session_id").as_string(), alice);

  const auto read = call("GET", "/v1/elections/" + name);
  ASSERT_EQ(read.status, 200) << read.body;
  EXPECT_EQ(token_of(read), token_of(first));
  EXPECT_EQ(value_of(read), "10.0.0.1");

  const auto held = campaign(name, bob, "10.0.0.2");
  EXPECT_EQ(held.status, 409);
  EXPECT_EQ(held.error_code(), "held");
  // The name is a lock too: a lock acquire is held, and the lock read shows the value.
  EXPECT_EQ(call("POST", "/v1/locks/" + name + "/acquire", {{"session_id", bob}}).status, 409);
  EXPECT_EQ(call("GET", "/v1/locks/" + name).json.at("value").as_string(), "10.0.0.1");

  const auto proclaimed = proclaim(name, alice, token_of(first), "10.0.0.9");
  ASSERT_EQ(proclaimed.status, 200) << proclaimed.body;
  EXPECT_EQ(token_of(proclaimed), token_of(first));
  EXPECT_EQ(value_of(proclaimed), "10.0.0.9");
  EXPECT_EQ(value_of(call("GET", "/v1/elections/" + name)), "10.0.0.9");

  EXPECT_EQ(resign(name, alice, token_of(first)).status, 204);
  EXPECT_EQ(call("GET", "/v1/elections/" + name).error_code(), "no_leader");
  const auto second = campaign(name, bob, "10.0.0.2");
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_GT(token_of(second), token_of(first));
  // The resigned leader can neither proclaim nor resign again.
  const auto stale = proclaim(name, alice, token_of(first), "stale");
  EXPECT_EQ(stale.status, 409);
  EXPECT_EQ(stale.error_code(), "lock_lost");
  EXPECT_EQ(resign(name, alice, token_of(first)).error_code(), "lock_lost");
  EXPECT_EQ(value_of(call("GET", "/v1/elections/" + name)), "10.0.0.2");
}

TEST_P(ElectionsEndToEnd, AWaitingCampaignerLeadsWhenTheLeaderResigns) {
  const auto name = fresh_name();
  const auto alice = open_session("alice");
  const auto bob = open_session("bob");
  const auto first = campaign(name, alice, "a");
  ASSERT_EQ(first.status, 200) << first.body;
  auto waiting = std::async(std::launch::async, [&] { return campaign(name, bob, "b", 20000); });
  ASSERT_EQ(waiting.wait_for(milliseconds(300)), std::future_status::timeout);
  EXPECT_EQ(resign(name, alice, token_of(first)).status, 204);
  const auto second = waiting.get();
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_GT(token_of(second), token_of(first));
  EXPECT_EQ(value_of(second), "b");
}

// The long poll wakes on the change, not at the end of its wait: a proclaim, then a new leader.
TEST_P(ElectionsEndToEnd, ObserversWakeOnANewValueAndOnANewLeader) {
  const auto name = fresh_name();
  const auto alice = open_session("alice");
  const auto bob = open_session("bob");
  const auto first = campaign(name, alice, "v1");
  ASSERT_EQ(first.status, 200) << first.body;
  // Already newer than token 0: answered at once.
  EXPECT_EQ(token_of(observe(name, 0, "", 30000)), token_of(first));

  const auto started = std::chrono::steady_clock::now();
  auto value_change =
      std::async(std::launch::async, [&] { return observe(name, token_of(first), "v1", 30000); });
  ASSERT_EQ(value_change.wait_for(milliseconds(300)), std::future_status::timeout)
      << "answered before anything changed";
  ASSERT_EQ(proclaim(name, alice, token_of(first), "v2").status, 200);
  const auto seen = value_change.get();
  ASSERT_EQ(seen.status, 200) << seen.body;
  EXPECT_EQ(value_of(seen), "v2");
  EXPECT_EQ(token_of(seen), token_of(first));

  auto leader_change =
      std::async(std::launch::async, [&] { return observe(name, token_of(first), "v2", 30000); });
  ASSERT_EQ(leader_change.wait_for(milliseconds(300)), std::future_status::timeout);
  ASSERT_EQ(resign(name, alice, token_of(first)).status, 204);
  // A resignation alone does not answer: no newer leader yet.
  ASSERT_EQ(leader_change.wait_for(milliseconds(300)), std::future_status::timeout);
  const auto second = campaign(name, bob, "v3");
  ASSERT_EQ(second.status, 200) << second.body;
  const auto next = leader_change.get();
  ASSERT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(token_of(next), token_of(second));
  EXPECT_EQ(value_of(next), "v3");
  // Woken by the changes, long before the 30 s waits ran out.
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(20));
}

TEST_P(ElectionsEndToEnd, AnObserverAnswersTheStateAtTheEndOfItsWait) {
  const auto name = fresh_name();
  const auto alice = open_session("alice");
  EXPECT_EQ(observe(name, 0, "", 300).error_code(), "no_leader");
  const auto first = campaign(name, alice, "v1");
  ASSERT_EQ(first.status, 200) << first.body;
  const auto started = std::chrono::steady_clock::now();
  const auto same = observe(name, token_of(first), "v1", 700);
  EXPECT_GE(std::chrono::steady_clock::now() - started, milliseconds(650));
  ASSERT_EQ(same.status, 200) << same.body;
  EXPECT_EQ(token_of(same), token_of(first));
  EXPECT_EQ(value_of(same), "v1");
}

TEST_P(ElectionsEndToEnd, ALeaderEndsWithItsSessionAndTheNextHasAGreaterToken) {
  const auto name = fresh_name();
  const auto alice = open_session("alice", 1000);  // never kept alive
  const auto bob = open_session("bob");
  const auto first = campaign(name, alice, "a");
  ASSERT_EQ(first.status, 200) << first.body;
  const auto second = campaign(name, bob, "b", 20000);
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_GT(token_of(second), token_of(first));
  // The dead session's proclaim fails: 404 when this server already knows the session is gone,
  // 409 lock_lost when it goes to the store first (C3, "Release, extend and acquire find the
  // session's owner…"); either way the new leader's value stays.
  const auto late = proclaim(name, alice, token_of(first), "late");
  EXPECT_TRUE(late.status == 404 || late.error_code() == "lock_lost") << late.body;
  EXPECT_EQ(value_of(call("GET", "/v1/elections/" + name)), "b");
}

TEST_P(ElectionsEndToEnd, BadInputNamesTheField) {
  const auto name = fresh_name();
  const auto alice = open_session("alice");
  const auto field_of = [](const HttpResult& result) -> std::string {
    if (result.status != 400) return "status " + std::to_string(result.status) + " " + result.body;
    return std::string(result.json.at("error").at("field").as_string());
  };
  const auto target = "/v1/elections/" + name + "/campaign";
  EXPECT_EQ(field_of(call("POST", target, {{"session_id", alice}})), "value");
  EXPECT_EQ(field_of(call("POST", target, {{"session_id", alice}, {"value", ""}})), "value");
  EXPECT_EQ(field_of(call("POST", target, {{"session_id", alice}, {"value", 7}})), "value");
  EXPECT_EQ(
      field_of(call("POST", target, {{"session_id", alice}, {"value", std::string(1025, 'v')}})),
      "value");
  EXPECT_EQ(
      field_of(call("POST", target, {{"session_id", alice}, {"value", "v"}, {"ttl_ms", 5000}})),
      "ttl_ms");
  EXPECT_EQ(field_of(call("POST", target, {{"value", "v"}})), "session_id");
  EXPECT_EQ(field_of(call("POST", "/v1/elections/" + name + "/proclaim",
                          {{"session_id", alice}, {"value", "v"}})),
            "fencing_token");
  EXPECT_EQ(field_of(call("GET", "/v1/elections/" + name + "?after_token=x")), "after_token");
  EXPECT_EQ(field_of(call("GET", "/v1/elections/" + name + "?after_value=v")), "after_value");
  EXPECT_EQ(field_of(call("GET", "/v1/elections/" + name + "?after_token=1&wait_ms=-1")),
            "wait_ms");
  EXPECT_EQ(call("PUT", "/v1/elections/" + name + "/campaign").status, 405);
  // A name held by a plain lock has no leader.
  ASSERT_EQ(call("POST", "/v1/locks/" + name + "/acquire", {{"session_id", alice}}).status, 200);
  EXPECT_EQ(call("GET", "/v1/elections/" + name).error_code(), "no_leader");
}

INSTANTIATE_TEST_SUITE_P(Backends, ElectionsEndToEnd,
                         ::testing::ValuesIn(testing::dlockd_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dlock
