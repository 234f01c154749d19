// The dlock CLI against a real dlockd with a tokens file (contract C6; docs/cli.md): the bearer
// token from --token-file and from DLOCK_TOKEN opens a session, acquires and releases; a missing
// or unknown token exits 67 ("not authenticated") without echoing the token. And failover
// (C3, docs/client.md "Failover"): with --server DEAD,LIVE every call moves on to the live
// dlockd. Part of the cli_e2e_test binary (cli_e2e_test.cc: the same CLI without a tokens file).

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <boost/json/parse.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "auth/crypto.h"
#include "auth/permissions.h"
#include "auth/tokens_file.h"
#include "cli/cli.h"
#include "support/dlockd_process.h"
#include "support/subprocess.h"

namespace dlock {
namespace {

// DLOCK_TOKEN set for one scope (unset when `value` is null), restored after.
class ScopedToken {
 public:
  explicit ScopedToken(const char* value) {
    if (const char* old = std::getenv("DLOCK_TOKEN")) old_ = old;
    if (value != nullptr)
      ::setenv("DLOCK_TOKEN", value, 1);
    else
      ::unsetenv("DLOCK_TOKEN");
  }
  ~ScopedToken() {
    if (old_.has_value())
      ::setenv("DLOCK_TOKEN", old_->c_str(), 1);
    else
      ::unsetenv("DLOCK_TOKEN");
  }
  ScopedToken(const ScopedToken&) = delete;
  ScopedToken& operator=(const ScopedToken&) = delete;

 private:
  std::optional<std::string> old_;
};

class CliWithAuth : public ::testing::Test {
 protected:
  void SetUp() override {
    // The environment must not lend the CLI a token: each case says where its token comes from.
    ::unsetenv("DLOCK_TOKEN_FILE");
    ::unsetenv("DLOCK_SERVER");
    dir_ = testing::make_temp_dir("cli-e2e-auth");
    token_ = auth::random_token();
    std::ofstream(dir_ + "/tokens")
        << auth::tokens_file_line("cli", token_, auth::parse_permissions("lock:*")) << "\n";
    token_file_ = dir_ + "/cli.token";
    std::ofstream(token_file_) << token_ << "\n";
    ::chmod(token_file_.c_str(), 0600);
    testing::DlockdOptions options;
    options.extra_args = {"--auth-tokens-file", dir_ + "/tokens"};
    server_ = std::make_unique<testing::DlockdProcess>(options);
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  struct Outcome {
    int status;
    std::string out;
    std::string err;
  };

  // Runs dlock in-process, exactly as main() would, against `server` (default: the dlockd).
  Outcome dlock(std::vector<std::string> args, const std::string& server = "") {
    args.insert(args.begin(), {"dlock", "--server", server.empty() ? server_->url() : server});
    std::vector<const char*> argv;
    for (const std::string& arg : args) argv.push_back(arg.c_str());
    std::ostringstream out, err;
    const int status = cli::run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
    return {status, out.str(), err.str()};
  }

  // Opens a session, acquires `key` in it and releases the grant with `auth` (global flags
  // before each subcommand, e.g. {"--token-file", F}) at `server`; returns the grant's token.
  std::uint64_t acquire_and_release(const std::string& key, const std::vector<std::string>& auth,
                                    const std::string& server = "") {
    auto with = [&](std::vector<std::string> args) {
      args.insert(args.begin(), auth.begin(), auth.end());
      return dlock(std::move(args), server);
    };
    const Outcome opened = with({"--json", "session", "open", "--ttl", "10s"});
    EXPECT_EQ(opened.status, 0) << opened.err;
    if (opened.status != 0) return 0;
    const std::string session(boost::json::parse(opened.out).at("session_id").as_string().c_str());
    const Outcome acquired = with({"--json", "acquire", key, "--session", session, "--ttl", "5s"});
    EXPECT_EQ(acquired.status, 0) << acquired.err;
    if (acquired.status != 0) return 0;
    const auto token =
        boost::json::parse(acquired.out).at("fencing_token").to_number<std::uint64_t>();
    const Outcome released =
        with({"release", key, "--session", session, "--fencing-token", std::to_string(token)});
    EXPECT_EQ(released.status, 0) << released.err;
    EXPECT_EQ(with({"session", "close", session}).status, 0);
    return token;
  }

  std::string dir_;
  std::string token_;
  std::string token_file_;
  std::unique_ptr<testing::DlockdProcess> server_;
};

TEST_F(CliWithAuth, TokenFileAndDlockTokenWorkAMissingOrUnknownTokenExits67) {
  const ScopedToken no_token(nullptr);
  const auto first = acquire_and_release("jobs/auth", {"--token-file", token_file_});
  EXPECT_GT(first, 0U);
  {
    const ScopedToken from_env(token_.c_str());
    EXPECT_GT(acquire_and_release("jobs/auth", {}), first);
  }
  // No token at all: 401 unauthenticated, exit 67 (docs/cli.md "Exit statuses").
  const Outcome missing = dlock({"session", "open"});
  EXPECT_EQ(missing.status, 67) << missing.err;
  EXPECT_NE(missing.err.find("not authenticated"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("DLOCK_TOKEN"), std::string::npos) << missing.err;
  // A well-formed token the tokens file does not know: the same, and it is never echoed.
  const std::string wrong = auth::random_token();
  const ScopedToken unknown(wrong.c_str());
  const Outcome refused = dlock({"get", "jobs/auth"});
  EXPECT_EQ(refused.status, 67) << refused.err;
  EXPECT_NE(refused.err.find("not authenticated"), std::string::npos) << refused.err;
  EXPECT_EQ(refused.err.find(wrong), std::string::npos) << "the token was printed";
  EXPECT_EQ(refused.out.find(wrong), std::string::npos) << "the token was printed";
}

TEST_F(CliWithAuth, ServerListFailsOverFromADeadServerToTheLiveOne) {
  const ScopedToken no_token(nullptr);
  // Nobody listens on `dead`: connection refused, so each call moves on to the next URL.
  const std::string dead = "http://127.0.0.1:" + std::to_string(testing::free_loopback_port());
  const std::string servers = dead + "," + server_->url();
  EXPECT_GT(acquire_and_release("jobs/failover", {"--token-file", token_file_}, servers), 0U);
  const Outcome free =
      dlock({"--token-file", token_file_, "--timeout", "5s", "get", "jobs/failover"}, servers);
  EXPECT_EQ(free.status, 0) << free.err;
  EXPECT_NE(free.out.find("is free"), std::string::npos) << free.out;
}

}  // namespace
}  // namespace dlock
