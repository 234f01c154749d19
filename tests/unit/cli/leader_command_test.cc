// `dlock leader NAME [--watch]` (C3 "Elections") in process against a fake dlockd: the one-shot
// read (a leader, or "no leader" with status 0 as `dlock get` of a free key), its JSON, and the
// watch loop: one line per change, each observe carrying the last answer's token and value.

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <sstream>
#include <stop_token>

#include "cli/leader_command.h"
#include "cli_in_process.h"
#include "fake_server.h"
#include "test_options.h"

namespace dlock::client {
namespace {

using std::chrono::milliseconds;
using testing::error_body;
using testing::FakeRequest;
using testing::FakeResponse;
using testing::FakeServer;

std::string leader_body(int token, const std::string& value) {
  return R"({"name":"db","leader":{"owner":"o)" + std::to_string(token) + R"(","value":")" + value +
         R"("},"fencing_token":)" + std::to_string(token) +
         R"(,"acquired_at":"2030-01-01T00:00:00Z","expires_at":"2030-01-01T00:00:30Z"})";
}

FakeResponse no_leader() { return {404, error_body("no_leader", "nobody leads")}; }

using testing::CliResult;
using testing::dlock;

TEST(DlockLeader, PrintsTheLeaderOrNoLeaderAndExitsZeroEitherWay) {
  bool leads = true;
  FakeServer server([&](const FakeRequest&) {
    return leads ? FakeResponse{200, leader_body(9, "10.0.0.7")} : no_leader();
  });
  auto result = dlock({"--server", server.url(), "leader", "db", "--ns", "prod"});
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.out.find("leader o9"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("value 10.0.0.7"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("fencing token 9"), std::string::npos) << result.out;
  EXPECT_EQ(server.requests().back().target, "/v1/elections/db?ns=prod");

  result = dlock({"--server", server.url(), "leader", "db", "--json"});
  const auto json = boost::json::parse(result.out).as_object();
  EXPECT_EQ(json.at("leader").at("value").as_string(), "10.0.0.7");
  EXPECT_EQ(json.at("fencing_token").to_number<int>(), 9);

  leads = false;
  result = dlock({"--server", server.url(), "leader", "db"});
  EXPECT_EQ(result.status, 0);
  EXPECT_EQ(result.out, "db: no leader\n");
  result = dlock({"--server", server.url(), "leader", "db", "--json"});
  EXPECT_TRUE(boost::json::parse(result.out).at("leader").is_null());
}

// A new value of the same leader, its resignation (the poll ends without a successor), a new
// leader: one line each, and each observe asks after the last answer.
TEST(DlockLeader, WatchPrintsOneLinePerChange) {
  std::stop_source stop;
  FakeServer server([&](const FakeRequest& request) -> FakeResponse {
    const std::string& t = request.target;
    const auto has = [&t](const char* part) { return t.find(part) != std::string::npos; };
    if (!has("after_token")) return {200, leader_body(5, "a")};
    if (has("after_token=5&after_value=a")) return {200, leader_body(5, "b")};
    if (has("after_token=5&after_value=b")) return no_leader();
    if (has("after_token=5&wait_ms")) return {200, leader_body(7, "c")};
    if (has("after_token=7&after_value=c")) {
      stop.request_stop();
      return {200, leader_body(7, "c")};  // the poll ended without a change: nothing printed
    }
    return {500, error_body("internal", "unexpected " + t)};
  });
  Client client(testing::fast_options(server.url()));
  std::ostringstream out;
  cli::Printer printer(out, false);
  cli::watch_leader(client, "db", "", printer, out, milliseconds(200), stop.get_token());
  std::vector<std::string> lines;
  std::istringstream in(out.str());
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u) << out.str();
  EXPECT_NE(lines[0].find("value a  fencing token 5"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("value b  fencing token 5"), std::string::npos) << lines[1];
  EXPECT_EQ(lines[2], "db: no leader");
  EXPECT_NE(lines[3].find("value c  fencing token 7"), std::string::npos) << lines[3];
  for (const FakeRequest& request : server.requests()) {
    if (request.target.find("after_token") != std::string::npos) {
      EXPECT_NE(request.target.find("wait_ms=200"), std::string::npos) << request.target;
    }
  }
}

}  // namespace
}  // namespace dlock::client
