// The server's input checks and its one error table, without a backend (contract C3).
#include "server/input_checks.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "dlock/errors.h"
#include "server/error_mapping.h"
#include "util/limits.h"
#include "util/store_key.h"

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

TEST(InputChecks, TextMustBeUtf8SoAnswersAndLogsStayValidJson) {
  EXPECT_TRUE(is_utf8(""));
  EXPECT_TRUE(is_utf8("plain ascii"));
  EXPECT_TRUE(is_utf8("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x94\x92"));      // e-acute, euro, lock
  EXPECT_TRUE(is_utf8("\xED\x9F\xBF\xEE\x80\x80\xF4\x8F\xBF\xBF"));  // U+D7FF U+E000 max
  for (const char* bad :
       {"\xFF", "\xC0\xAF", "\xC1\xBF", "\xE0\x80\xAF", "\xF0\x80\x80\xAF", "\xED\xA0\x80",
        "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\x80", "a\xE2\x82", "\xC3", "\xE2\x28\xA1"}) {
    EXPECT_FALSE(is_utf8(bad)) << bad;
  }
  EXPECT_EQ(checked_key("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(field_of([] { checked_key("\xFF"); }), "key");
  EXPECT_EQ(field_of([] { checked_key("a\xC0\xAF"); }), "key");
  EXPECT_EQ(field_of([] { checked_owner("\xED\xA0\x80"); }), "owner");
  EXPECT_EQ(field_of([] { checked_namespace("\xFF"); }), "ns");
  EXPECT_EQ(field_of([] { checked_prefix("\xC0\xAF"); }), "prefix");
  EXPECT_EQ(checked_prefix(""), "");
  // Echoed text is repaired, not rejected: each bad byte becomes U+FFFD.
  EXPECT_EQ(to_utf8("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(to_utf8("a\xFF"
                    "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(to_utf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_TRUE(is_utf8(to_utf8("\xE2\x82\xF0\x9F\x94")));
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

// "lease" on acquire (C3, ADR-0018): "ttl" or absent -> the checked TTL; "session" -> no TTL, and
// then ttl_ms must be absent.
TEST(InputChecks, LeaseIsTtlOrSessionAndSessionTakesNoTtl) {
  const TtlLimits ttl_limits;
  EXPECT_EQ(checked_lease(std::nullopt, std::nullopt, milliseconds(5000), ttl_limits),
            LockLease(milliseconds(5000)));
  EXPECT_EQ(checked_lease("ttl", 2000, milliseconds(5000), ttl_limits),
            LockLease(milliseconds(2000)));
  EXPECT_TRUE(
      checked_lease("session", std::nullopt, milliseconds(5000), ttl_limits).session_bound());
  EXPECT_EQ(field_of([&] { checked_lease("session", 2000, milliseconds(5000), ttl_limits); }),
            "ttl_ms");
  EXPECT_EQ(
      field_of([&] { checked_lease("forever", std::nullopt, milliseconds(5000), ttl_limits); }),
      "lease");
  EXPECT_EQ(field_of([&] { checked_lease("ttl", 1, milliseconds(5000), ttl_limits); }), "ttl_ms");
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

TEST(ErrorTable, ErrorAnswersStayValidJson) {
  // A 404 or 405 names the decoded path, a 417 the header: bytes no check has vetted.
  const auto response = error_response(404, "not_found", "no such route: /v1/\xFF/\xC0\xAF");
  EXPECT_TRUE(is_utf8(response.body())) << response.body();
  EXPECT_NE(response.body().find("/v1/\xEF\xBF\xBD/"), std::string::npos) << response.body();
}

}  // namespace
}  // namespace dlock::server
