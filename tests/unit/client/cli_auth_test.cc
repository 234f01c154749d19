// The dlock CLI's credentials and failover (contract C6), in process (run_cli) against the fake
// dlockd: --token and DLOCK_TOKEN reach the server as a bearer token, 401/403/429 exit with
// their own statuses, and the token never appears in --help, errors or other output.

#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "cli_in_process.h"
#include "fake_server.h"

namespace dlock::client {
namespace {

using testing::error_body;
using testing::FakeRequest;
using testing::FakeResponse;
using testing::FakeServer;

const char* kSecret = "dlk_very-secret-token";

using testing::CliResult;
using testing::dlock;

const char* kFreeLock = R"({"error":{"code":"lock_not_found","message":"free"}})";

TEST(CliAuth, TokenFlagAndEnvironmentAreSentAsBearer) {
  FakeServer server([](const FakeRequest&) { return FakeResponse{404, kFreeLock}; });
  EXPECT_EQ(dlock({"--server", server.url(), "--token", kSecret, "get", "k"}).status, 0);
  setenv("DLOCK_TOKEN", "from-env", 1);
  EXPECT_EQ(dlock({"--server", server.url(), "get", "k"}).status, 0);
  unsetenv("DLOCK_TOKEN");
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2U);
  EXPECT_EQ(requests[0].authorization, std::string("Bearer ") + kSecret);
  EXPECT_EQ(requests[1].authorization, "Bearer from-env");
}

TEST(CliAuth, DeniedAnswersHaveTheirOwnExitStatusAndHideTheToken) {
  int status = 401;
  FakeServer server([&status](const FakeRequest&) {
    const char* code = status == 401   ? "unauthenticated"
                       : status == 403 ? "permission_denied"
                                       : "too_many_requests";
    return FakeResponse{status, error_body(code, "denied")};
  });
  for (const auto& [answer, exit_status] :
       std::vector<std::pair<int, int>>{{401, 67}, {403, 77}, {429, 79}}) {
    status = answer;
    const CliResult result =
        dlock({"--server", server.url(), "--token", kSecret, "--timeout", "200ms", "get", "k"});
    EXPECT_EQ(result.status, exit_status) << answer << ": " << result.err;
    EXPECT_EQ(result.err.find(kSecret), std::string::npos) << result.err;
    EXPECT_EQ(result.out.find(kSecret), std::string::npos) << result.out;
  }
}

TEST(CliAuth, HelpNeverShowsTheToken) {
  setenv("DLOCK_TOKEN", kSecret, 1);
  const CliResult result = dlock({"--help"});
  unsetenv("DLOCK_TOKEN");
  EXPECT_EQ(result.status, 0);
  EXPECT_NE(result.out.find("--token"), std::string::npos);
  EXPECT_NE(result.out.find("DLOCK_TOKEN"), std::string::npos);
  EXPECT_EQ(result.out.find(kSecret), std::string::npos);
}

TEST(CliAuth, ABearerTokenGivenAsFencingTokenIsNotEchoed) {
  const CliResult result = dlock(
      {"--server", "http://127.0.0.1:1", "extend", "k", "--session", "s", "--token", kSecret});
  EXPECT_EQ(result.status, 64);
  EXPECT_EQ(result.err.find(kSecret), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("--fencing-token"), std::string::npos) << result.err;
}

TEST(CliAuth, FencingTokenFlagAndItsOldSpellingBothWork) {
  FakeServer server([](const FakeRequest&) { return FakeResponse{204, ""}; });
  EXPECT_EQ(
      dlock({"--server", server.url(), "release", "k", "--session", "s", "--fencing-token", "7"})
          .status,
      0);
  EXPECT_EQ(dlock({"--server", server.url(), "--token", kSecret, "release", "k", "--session", "s",
                   "--token", "8"})
                .status,
            0);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2U);
  EXPECT_NE(requests[0].target.find("fencing_token=7"), std::string::npos);
  EXPECT_NE(requests[1].target.find("fencing_token=8"), std::string::npos);
  EXPECT_EQ(requests[1].authorization, std::string("Bearer ") + kSecret);
}

TEST(CliAuth, ServerListFailsOver) {
  std::string gone;
  {
    FakeServer closed([](const FakeRequest&) { return FakeResponse{}; });
    gone = closed.url();
  }
  FakeServer server([](const FakeRequest&) { return FakeResponse{404, kFreeLock}; });
  EXPECT_EQ(dlock({"--server", gone + "," + server.url(), "get", "k"}).status, 0);
  EXPECT_EQ(server.requests().size(), 1U);
}

}  // namespace
}  // namespace dlock::client
