// The server's input checks and its one error table, without a backend (contract C3).
#include "server/input_checks.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "util/limits.h"
#include "util/store_key.h"
#include "dlock/errors.h"
#include "server/error_mapping.h"

namespace dlock::server {
namespace {

using std::chrono::milliseconds;

std::string field_of(const std::function<void()>& check) {
  try {
    check();
  } catch (const InvalidArgumentError& error) {
    return error.field();
  }
  return "";
}

TEST(InputChecks, TextIsNonEmptyBoundedAndFreeOfControlCharacters) {
  EXPECT_EQ(checked_key("orders/17"), "orders/17");
  EXPECT_EQ(field_of([] { checked_key(""); }), "key");
  EXPECT_EQ(field_of([] { checked_key(std::string(limits::kMaxKeyBytes + 1, 'k')); }), "key");
  EXPECT_EQ(checked_key(std::string(limits::kMaxKeyBytes, 'k')).size(), limits::kMaxKeyBytes);
  EXPECT_EQ(field_of([] { checked_key("a\nb"); }), "key");
  EXPECT_EQ(field_of([] { checked_owner(std::string(limits::kMaxOwnerBytes + 1, 'o')); }), "owner");
}

TEST(InputChecks, NamespaceHoldsNoSlashSoTheStoreKeySplitsBack) {
  EXPECT_EQ(checked_namespace("team-a.prod_1"), "team-a.prod_1");
  EXPECT_EQ(field_of([] { checked_namespace("a/b"); }), "ns");
  EXPECT_EQ(field_of([] { checked_namespace(std::string(limits::kMaxNamespaceBytes + 1, 'n')); }),
            "ns");
  const auto joined = store_key::join("team", "jobs/17");
  EXPECT_EQ(joined, "team/jobs/17");
  const auto parts = store_key::split(joined);
  ASSERT_TRUE(parts);
  EXPECT_EQ(parts->ns, "team");
  EXPECT_EQ(parts->key, "jobs/17");
  EXPECT_EQ(store_key::api_key(joined), "jobs/17");
}

TEST(InputChecks, SessionIdsTokensLimitsTtlsAndWaits) {
  EXPECT_EQ(field_of([] { checked_session_id("abc$"); }), "session_id");
  EXPECT_EQ(checked_session_id("7f-a_b"), "7f-a_b");
  EXPECT_EQ(parse_token("42"), 42u);
  EXPECT_EQ(field_of([] { parse_token("-1"); }), "fencing_token");
  EXPECT_EQ(field_of([] { parse_token("4x"); }), "fencing_token");
  EXPECT_EQ(parse_list_limit(std::nullopt), limits::kDefaultListLimit);
  EXPECT_EQ(field_of([] { parse_list_limit("0"); }), "limit");
  EXPECT_EQ(field_of([] { parse_list_limit(std::to_string(limits::kMaxListLimit + 1)); }), "limit");
  const TtlLimits ttl_limits;
  EXPECT_EQ(checked_ttl(std::nullopt, milliseconds(5000), ttl_limits), milliseconds(5000));
  EXPECT_EQ(field_of([&] { checked_ttl(1, milliseconds(5000), ttl_limits); }), "ttl_ms");
  EXPECT_EQ(checked_wait(std::nullopt, milliseconds(10)), milliseconds(0));
  EXPECT_EQ(field_of([] { checked_wait(11, milliseconds(10)); }), "wait_ms");
  EXPECT_EQ(field_of([] { checked_wait(-1, milliseconds(10)); }), "wait_ms");
  EXPECT_TRUE(constant_time_equal("Bearer t", "Bearer t"));
  EXPECT_FALSE(constant_time_equal("Bearer", "Bearer t"));
}

template <typename E>
Response mapped(const E& error) {
  return error_response(std::make_exception_ptr(error));
}

TEST(ErrorTable, EveryCodeHasItsStatusAndTransientFailuresAreNeverHeld) {
  EXPECT_EQ(mapped(InvalidArgumentError("ttl_ms", "m")).result_int(), 400u);
  EXPECT_EQ(mapped(SessionNotFoundError("m")).result_int(), 404u);
  EXPECT_EQ(mapped(LockLostError("m")).result_int(), 409u);
  const auto full = mapped(ResourceExhaustedError("m"));
  EXPECT_EQ(full.result_int(), 429u);
  EXPECT_NE(full.body().find("\"too_many_requests\""), std::string::npos);
  EXPECT_EQ(full.count(boost::beast::http::field::retry_after), 1u);
  for (const auto& transient :
       {Error(ErrorCode::kUnavailable, "m"), Error(ErrorCode::kUnknownOutcome, "m"),
        Error(ErrorCode::kContention, "m")}) {
    const auto response = mapped(transient);
    EXPECT_EQ(response.result_int(), 503u);
    EXPECT_NE(response.body().find("\"unavailable\""), std::string::npos);
  }
  EXPECT_NE(mapped(NotLeaderError("m")).body().find("\"not_leader\""), std::string::npos);
  EXPECT_EQ(mapped(InternalError("m")).result_int(), 500u);
}

}  // namespace
}  // namespace dlock::server
