// `dlock token new PRINCIPAL PERMISSIONS`, driven in-process through run_cli: the printed token
// authenticates the printed line, bad input exits 64, and no server is needed.

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <sstream>
#include <vector>

#include "auth/crypto.h"
#include "auth/tokens_file.h"
#include "cli/cli.h"
#include "cli/exit_codes.h"

namespace dlock::cli {
namespace {

struct Outcome {
  int status;
  std::string out;
  std::string err;
};

Outcome run(std::vector<const char*> args) {
  args.insert(args.begin(), "dlock");
  // An unreachable server: the command must not need one.
  args.insert(args.begin() + 1, {"--server", "http://127.0.0.1:1"});
  std::ostringstream out, err;
  const int status = run_cli(static_cast<int>(args.size()), args.data(), out, err);
  return {status, out.str(), err.str()};
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(TokenNewTest, PrintsASecretTokenAndTheLineThatAuthenticatesIt) {
  const Outcome outcome = run({"token", "new", "payments-worker", "lock:payments,read:*"});
  ASSERT_EQ(outcome.status, kExitOk) << outcome.err;
  const auto lines = lines_of(outcome.out);
  ASSERT_EQ(lines.size(), 5u) << outcome.out;
  EXPECT_NE(lines[0].find("SECRET"), std::string::npos);
  const std::string token = lines[1];
  EXPECT_EQ(token.rfind("dlk_", 0), 0u);
  EXPECT_NE(lines[2].find("not secret"), std::string::npos);
  const std::string line = lines[4];
  EXPECT_EQ(line.find(token), std::string::npos);
  const auto table = auth::parse_tokens(line, "printed");
  const auth::Principal* principal = table.find_by_token(token);
  ASSERT_NE(principal, nullptr);
  EXPECT_EQ(principal->name, "payments-worker");
  EXPECT_TRUE(principal->allows(auth::Role::kLock, "payments"));
  EXPECT_FALSE(principal->allows(auth::Role::kLock, "billing"));
}

TEST(TokenNewTest, JsonDocumentAndFreshTokensEachTime) {
  const Outcome first = run({"--json", "token", "new", "ops", "admin:*"});
  const Outcome second = run({"token", "new", "ops", "admin:*", "--json"});
  ASSERT_EQ(first.status, kExitOk) << first.err;
  ASSERT_EQ(second.status, kExitOk) << second.err;
  const auto doc = boost::json::parse(first.out).as_object();
  const std::string token(doc.at("token").as_string());
  EXPECT_EQ(doc.at("principal").as_string(), "ops");
  EXPECT_EQ(doc.at("permissions").as_string(), "admin:*");
  EXPECT_EQ(doc.at("sha256").as_string(), auth::to_hex(auth::sha256(token)));
  EXPECT_EQ(doc.at("tokens_file_line").as_string(),
            "ops " + auth::to_hex(auth::sha256(token)) + " admin:*");
  EXPECT_NE(boost::json::parse(second.out).as_object().at("token").as_string(), token);
}

TEST(TokenNewTest, BadPermissionsOrPrincipalExitWithUsage) {
  Outcome outcome = run({"token", "new", "alice", "write:payments"});
  EXPECT_EQ(outcome.status, kExitUsage);
  EXPECT_NE(outcome.err.find("role 'write' is not read, lock or admin"), std::string::npos)
      << outcome.err;
  EXPECT_EQ(outcome.out, "");  // no token printed for a line that would not parse
  outcome = run({"token", "new", "al ice", "read:*"});
  EXPECT_EQ(outcome.status, kExitUsage);
  EXPECT_NE(outcome.err.find("principal name"), std::string::npos) << outcome.err;
  EXPECT_EQ(run({"token", "new", "alice"}).status, kExitUsage);
  EXPECT_EQ(run({"token"}).status, kExitUsage);
}

TEST(TokenNewTest, HelpExplainsWhatIsSecret) {
  const Outcome outcome = run({"token", "--help"});
  EXPECT_EQ(outcome.status, kExitOk);
  EXPECT_NE(outcome.out.find("SECRET"), std::string::npos) << outcome.out;
  EXPECT_NE(outcome.out.find("SIGHUP"), std::string::npos);
}

}  // namespace
}  // namespace dlock::cli
