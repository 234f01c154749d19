#include <gtest/gtest.h>

#include "client/error_mapping.h"
#include "dlock/client.h"
#include "fake_server.h"

namespace dlock::client::detail {
namespace {

using client::testing::error_body;

template <typename Expected>
void expect_throws(int status, const std::string& body, const char* expected_field = nullptr) {
  const ApiError error = parse_api_error(HttpResponse{status, body, {}});
  try {
    throw_api_error(error, "call");
  } catch (const Expected& thrown) {
    if constexpr (std::is_base_of_v<InvalidArgumentError, Expected>) {
      if (expected_field != nullptr) {
        EXPECT_EQ(thrown.field(), expected_field);
      }
    }
    EXPECT_NE(std::string(thrown.what()).find("call: "), std::string::npos);
    return;
  } catch (const std::exception& other) {
    ADD_FAILURE() << status << " " << body << " threw the wrong type: " << other.what();
    return;
  }
}

TEST(ErrorMapping, ParsesC3ErrorBodies) {
  const ApiError error =
      parse_api_error({400, error_body("invalid_argument", "ttl_ms too large", "ttl_ms"), {}});
  EXPECT_EQ(error.code, "invalid_argument");
  EXPECT_EQ(error.message, "ttl_ms too large");
  EXPECT_EQ(error.field, "ttl_ms");
}

TEST(ErrorMapping, NonJsonBodiesKeepAHint) {
  const ApiError error = parse_api_error({502, "<html>Bad Gateway</html>", {}});
  EXPECT_TRUE(error.code.empty());
  EXPECT_NE(error.message.find("502"), std::string::npos);
  EXPECT_NE(error.message.find("Bad Gateway"), std::string::npos);
}

TEST(ErrorMapping, EveryC3CodeMapsToItsException) {
  expect_throws<InvalidArgumentError>(400, error_body("invalid_argument", "m", "ttl_ms"), "ttl_ms");
  expect_throws<InvalidArgumentError>(413, error_body("payload_too_large", "m"), "body");
  // C3 spells them unauthorized / forbidden, C6 unauthenticated / permission_denied.
  expect_throws<UnauthenticatedError>(401, error_body("unauthorized", "m"));
  expect_throws<UnauthenticatedError>(401, error_body("unauthenticated", "m"));
  expect_throws<UnauthenticatedError>(401, "");
  expect_throws<PermissionDeniedError>(403, error_body("forbidden", "m"));
  expect_throws<PermissionDeniedError>(403, error_body("permission_denied", "m"));
  expect_throws<PermissionDeniedError>(403, "");
  expect_throws<SessionNotFoundError>(404, error_body("session_not_found", "m"));
  expect_throws<LockLostError>(409, error_body("lock_lost", "m"));
  expect_throws<LockLostError>(404, error_body("lock_not_found", "m"));
  expect_throws<NotLeaderError>(503, error_body("not_leader", "m"));
  expect_throws<UnavailableError>(503, error_body("unavailable", "m"));
  expect_throws<ResourceExhaustedError>(429, error_body("too_many_requests", "m"));
  expect_throws<ResourceExhaustedError>(429, "");
  expect_throws<UnavailableError>(502, "bad gateway");
  expect_throws<UnavailableError>(504, "");
  expect_throws<InvalidArgumentError>(400, "not json", "request");
  expect_throws<InternalError>(500, error_body("internal", "m"));
}

TEST(ErrorMapping, UnavailableIsNeverReportedAsNotLeaderOrViceVersa) {
  try {
    throw_api_error(parse_api_error({503, error_body("unavailable", "m"), {}}), "call");
  } catch (const NotLeaderError&) {
    FAIL() << "unavailable mapped to NotLeaderError";
  } catch (const UnavailableError&) {
  }
}

TEST(ErrorMapping, TransientStatuses) {
  for (int status : {429, 502, 503, 504}) EXPECT_TRUE(is_transient_status(status)) << status;
  for (int status : {200, 400, 404, 409, 500}) EXPECT_FALSE(is_transient_status(status)) << status;
}

}  // namespace
}  // namespace dlock::client::detail
