// The dlock command line as a user meets it: a mistyped subcommand or flag is named with the
// nearest known one, every usage error carries the `dlock:` prefix, subcommand help lists the
// global flags, and DLOCK_NAMESPACE stands in for --ns (as `dlock run` exports it to CMD).

#include <gtest/gtest.h>
#include <stdlib.h>

#include "cli/exit_codes.h"
#include "cli/suggest.h"
#include "cli_in_process.h"
#include "fake_lock_api.h"
#include "fake_server.h"

namespace dlock::client {
namespace {

using testing::dlock;
using testing::FakeLockApi;
using testing::FakeRequest;
using testing::FakeServer;

TEST(Suggest, NearestKnownWordWithinTwoEdits) {
  const std::vector<std::string> commands = {"session", "acquire", "get", "list", "run", "revoke"};
  EXPECT_EQ(cli::nearest("lst", commands), "list");
  EXPECT_EQ(cli::nearest("lsit", commands), "list");  // a swap is one edit
  EXPECT_EQ(cli::nearest("aquire", commands), "acquire");
  EXPECT_EQ(cli::nearest("sess", commands), "session");  // a unique abbreviation
  EXPECT_EQ(cli::nearest("frobnicate", commands), std::nullopt);
  EXPECT_EQ(cli::nearest("x", commands), std::nullopt);  // too short to guess from
  EXPECT_EQ(cli::edit_distance("kitten", "sitting"), 3U);
}

TEST(CliUsage, UnknownCommandNamesTheNearestOne) {
  const auto result = dlock({"lst"});
  EXPECT_EQ(result.status, cli::kExitUsage);
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err,
            "dlock: unknown command 'lst'; did you mean 'list'?\ndlock: see 'dlock --help'\n");
}

TEST(CliUsage, UnknownNestedCommandAndFlagAreNamed) {
  EXPECT_EQ(dlock({"session", "opn"}).err,
            "dlock: unknown command 'session opn'; did you mean 'session open'?\n"
            "dlock: see 'dlock session --help'\n");
  const auto flag = dlock({"get", "k", "--jsn"});
  EXPECT_EQ(flag.status, cli::kExitUsage);
  EXPECT_EQ(flag.err.substr(0, flag.err.find('\n')),
            "dlock: unknown flag '--jsn'; did you mean '--json'?");
}

TEST(CliUsage, EveryUsageErrorCarriesThePrefix) {
  for (const auto& args :
       std::vector<std::vector<std::string>>{{},
                                             {"get"},
                                             {"acquire", "k"},
                                             {"list", "--limit", "many"},
                                             {"run", "k", "--lease", "forever", "--", "true"}}) {
    const auto result = dlock(args);
    EXPECT_EQ(result.status, cli::kExitUsage);
    ASSERT_FALSE(result.err.empty());
    std::istringstream lines(result.err);
    for (std::string line; std::getline(lines, line);) {
      EXPECT_EQ(line.rfind("dlock: ", 0), 0U) << "line without the prefix: " << line;
    }
  }
}

TEST(CliUsage, SubcommandHelpListsTheGlobalFlags) {
  const auto result = dlock({"get", "--help"});
  EXPECT_EQ(result.status, 0);
  EXPECT_NE(result.out.find("Global options"), std::string::npos) << result.out;
  for (const char* flag : {"--json", "--server", "--ns", "--timeout", "--token"}) {
    EXPECT_NE(result.out.find(flag), std::string::npos) << flag << " missing from\n" << result.out;
  }
  // The subcommand's own help stays first.
  EXPECT_LT(result.out.find("KEY"), result.out.find("Global options"));
}

TEST(CliUsage, NamespaceComesFromTheEnvironmentWhenNoFlagIsGiven) {
  FakeLockApi api;
  FakeServer server([&api](const FakeRequest& request) { return api.handle(request); });
  ::setenv("DLOCK_NAMESPACE", "payments", 1);
  dlock({"--server", server.url(), "--timeout", "1s", "get", "k"});
  dlock({"--server", server.url(), "--timeout", "1s", "--ns", "ops", "get", "k"});
  ::unsetenv("DLOCK_NAMESPACE");
  const auto gets = server.requests_to("GET", "/v1/locks/k");
  ASSERT_EQ(gets.size(), 2U);
  EXPECT_NE(gets[0].target.find("ns=payments"), std::string::npos) << gets[0].target;
  EXPECT_NE(gets[1].target.find("ns=ops"), std::string::npos) << gets[1].target;  // flag wins
}

}  // namespace
}  // namespace dlock::client
