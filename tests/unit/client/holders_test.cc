// Read-write locks and semaphores through the client (docs/adr/0020-more-primitives-design.md)
// against a fake dlockd: what an acquire sends for each mode, which route a permit's extend and
// release take, how get, holders and semaphore decode the holder sets, and that a permit's loss
// is reported as a lock's is.

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

constexpr const char* kReader = R"({"key":"r","fencing_token":%T%,"owner":"o%T%",
  "session_id":"s%T%","acquired_at":"2030-01-01T00:00:00Z","expires_at":"2030-01-01T00:00:30Z",
  "lease":"ttl","mode":"shared"})";

std::string reader(int token) {
  std::string text = kReader;
  for (auto at = text.find("%T%"); at != std::string::npos; at = text.find("%T%")) {
    text.replace(at, 3, std::to_string(token));
  }
  return text;
}

std::string permit(int token, int limit) {
  std::string text = reader(token);
  text.replace(text.find(R"("shared")"), 8, R"("permit","limit":)" + std::to_string(limit));
  return text;
}

// AcquireOptions with a mode, permits and TTL (designated initializers would have to name every
// member before them under -Wmissing-field-initializers).
AcquireOptions hold(HoldMode mode, std::uint32_t permits = 0,
                    std::chrono::milliseconds ttl = std::chrono::milliseconds(0)) {
  AcquireOptions options;
  options.mode = mode;
  options.permits = permits;
  options.ttl = ttl;
  return options;
}

AcquireOptions permits(std::uint32_t count,
                       std::chrono::milliseconds ttl = std::chrono::milliseconds(0)) {
  return hold(HoldMode::kExclusive, count, ttl);
}

using HoldersTest = testing::ScriptedApiTest;

TEST_F(HoldersTest, ASharedAcquireSendsModeSharedAndReportsIt) {
  Session session(client_, {"tester", milliseconds(3000), {}});
  auto lock = session.acquire("reports/daily", hold(HoldMode::kShared));
  ASSERT_TRUE(lock.has_value());
  EXPECT_EQ(lock->mode(), HoldMode::kShared);
  EXPECT_EQ(lock->limit(), 0u);
  const auto acquires = sent("POST", "/v1/locks/reports%2Fdaily/acquire");
  ASSERT_EQ(acquires.size(), 1u);
  EXPECT_EQ(boost::json::parse(acquires[0].body).at("mode").as_string(), "shared");
  lock->release();
  EXPECT_EQ(sent("DELETE", "/v1/locks/reports%2Fdaily?").size(), 1u);
}

TEST_F(HoldersTest, AnExclusiveAcquireSendsTheSameBodyAsBeforeModes) {
  Session session(client_, {"tester", milliseconds(3000), {}});
  auto lock = session.acquire("k", {});
  ASSERT_TRUE(lock.has_value());
  EXPECT_EQ(lock->mode(), HoldMode::kExclusive);
  const auto acquires = sent("POST", "/v1/locks/k/acquire");
  ASSERT_EQ(acquires.size(), 1u);
  EXPECT_FALSE(boost::json::parse(acquires[0].body).as_object().contains("mode"));
}

TEST_F(HoldersTest, APermitGoesThroughTheSemaphoreRoutesWithItsLimit) {
  Session session(client_, {"tester", milliseconds(3000), {}});
  auto lock = session.acquire("gpu pool", permits(4, milliseconds(1000)));
  ASSERT_TRUE(lock.has_value());
  EXPECT_EQ(lock->mode(), HoldMode::kPermit);
  EXPECT_EQ(lock->limit(), 4u);
  const auto acquires = sent("POST", "/v1/semaphores/gpu%20pool/acquire");
  ASSERT_EQ(acquires.size(), 1u);
  const auto body = boost::json::parse(acquires[0].body);
  EXPECT_EQ(body.at("limit").to_number<int>(), 4);
  EXPECT_FALSE(body.as_object().contains("mode"));
  lock->extend();
  EXPECT_EQ(sent("POST", "/v1/semaphores/gpu%20pool/extend").size(), 1u);
  lock->release();
  const auto releases = sent("DELETE", "/v1/semaphores/gpu%20pool?");
  ASSERT_EQ(releases.size(), 1u);
  EXPECT_EQ(releases[0].target, "/v1/semaphores/gpu%20pool?session_id=s-1&fencing_token=42");
  EXPECT_TRUE(sent("DELETE", "/v1/locks/").empty());
  EXPECT_TRUE(sent("POST", "/v1/locks/").empty());
}

TEST_F(HoldersTest, ModeAndPermitsThatContradictEachOtherAreRefusedBeforeSending) {
  Session session(client_, {"tester", milliseconds(3000), {}});
  EXPECT_THROW(session.acquire("k", hold(HoldMode::kShared, 2)), InvalidArgumentError);
  EXPECT_THROW(session.acquire("k", hold(HoldMode::kPermit)), InvalidArgumentError);
  EXPECT_THROW(client_.acquire("k", session.id(), milliseconds(0), milliseconds(0), "", {},
                               HoldMode::kPermit),
               InvalidArgumentError);
  EXPECT_TRUE(sent("POST", "/v1/locks/").empty());
  EXPECT_TRUE(sent("POST", "/v1/semaphores/").empty());
  // kPermit spelled out with permits is the same request as permits alone.
  auto lock = session.acquire("k", hold(HoldMode::kPermit, 2));
  ASSERT_TRUE(lock.has_value());
  EXPECT_EQ(lock->limit(), 2u);
}

TEST_F(HoldersTest, EveryPermitTakenIsHeldAndAnotherLimitIsAConflict) {
  Session session(client_, {"tester", milliseconds(3000), {}});
  api_.held = true;
  EXPECT_FALSE(session.acquire("pool", permits(2)).has_value());
  api_.held = false;
  script_ = [](const FakeRequest& request) {
    if (request.target.rfind("/v1/semaphores/pool/acquire", 0) != 0) return FakeResponse(0, "");
    return FakeResponse(409, error_body("conflict", "the holders agreed on 3", "limit"));
  };
  try {
    session.acquire("pool", permits(2));
    FAIL() << "no ConflictError";
  } catch (const ConflictError& error) {
    EXPECT_EQ(error.field(), "limit");
  }
}

TEST_F(HoldersTest, ALostPermitIsReportedThroughOnLost) {
  Session session(client_, {"tester", milliseconds(3000), {}});
  std::atomic<int> reports{0};
  AcquireOptions options = permits(3, milliseconds(600));
  options.auto_extend = true;
  options.on_lost = [&](const std::string&) { ++reports; };
  auto lock = session.acquire("pool", std::move(options));
  ASSERT_TRUE(lock.has_value());
  ASSERT_TRUE(server_.wait_for_requests(
      [](const FakeRequest& r) { return r.target.rfind("/v1/semaphores/pool/extend", 0) == 0; }, 1,
      milliseconds(3000)));
  api_.lock_lost = true;
  EXPECT_TRUE(wait_until([&] { return reports.load() == 1; }, milliseconds(3000)));
  EXPECT_FALSE(lock->still_valid());
  EXPECT_TRUE(sent("POST", "/v1/locks/").empty()) << "a permit was extended as a lock";
}

TEST_F(HoldersTest, GetAndHoldersReportEveryReader) {
  script_ = [](const FakeRequest& request) {
    if (request.method != "GET") return FakeResponse(0, "");
    if (request.target.rfind("/v1/locks/free", 0) == 0) {
      return FakeResponse(404, error_body("lock_not_found", "no live lock"));
    }
    std::string top = reader(9);
    top.pop_back();
    return FakeResponse(200, top + R"(,"holders":[)" + reader(7) + "," + reader(9) + "]}");
  };
  const auto info = client_.get("r");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->mode, HoldMode::kShared);
  EXPECT_EQ(info->fencing_token, 9u);
  const auto holders = client_.holders("r");
  ASSERT_EQ(holders.size(), 2u);
  EXPECT_EQ(holders[0].fencing_token, 7u);
  EXPECT_EQ(holders[0].owner_id, "o7");
  EXPECT_EQ(holders[1].mode, HoldMode::kShared);
  EXPECT_TRUE(client_.holders("free").empty());
  EXPECT_FALSE(client_.get("free").has_value());
}

TEST_F(HoldersTest, HoldersFromAServerWithoutHolderSetsIsTheOneGrant) {
  script_ = [](const FakeRequest& request) {
    if (request.method != "GET") return FakeResponse(0, "");
    return FakeResponse(200, R"({"key":"k","fencing_token":5,"owner":"o"})");
  };
  const auto holders = client_.holders("k");
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].fencing_token, 5u);
  EXPECT_EQ(holders[0].mode, HoldMode::kExclusive);
}

TEST_F(HoldersTest, SemaphoreReportsItsLimitAndHolders) {
  script_ = [](const FakeRequest& request) {
    if (request.method != "GET") return FakeResponse(0, "");
    if (request.target.rfind("/v1/semaphores/empty", 0) == 0) {
      return FakeResponse(200, R"({"name":"empty","holders":[]})");
    }
    if (request.target.rfind("/v1/semaphores/pool?ns=team", 0) != 0) return FakeResponse(0, "");
    return FakeResponse(
        200, R"({"name":"pool","limit":3,"holders":[)" + permit(4, 3) + "," + permit(6, 3) + "]}");
  };
  const SemaphoreInfo info = client_.semaphore("pool", "team");
  EXPECT_EQ(info.name, "pool");
  EXPECT_EQ(info.limit, 3u);
  ASSERT_EQ(info.holders.size(), 2u);
  EXPECT_EQ(info.holders[1].fencing_token, 6u);
  EXPECT_EQ(info.holders[1].mode, HoldMode::kPermit);
  EXPECT_EQ(info.holders[1].limit, 3u);
  const SemaphoreInfo empty = client_.semaphore("empty");
  EXPECT_EQ(empty.limit, 0u);
  EXPECT_TRUE(empty.holders.empty());
}

TEST_F(HoldersTest, AnUnknownModeBreaksTheContract) {
  script_ = [](const FakeRequest& request) {
    if (request.method != "GET") return FakeResponse(0, "");
    return FakeResponse(200, R"({"key":"k","fencing_token":5,"mode":"sideways"})");
  };
  EXPECT_THROW(client_.get("k"), InternalError);
}

}  // namespace
}  // namespace dlock::client
