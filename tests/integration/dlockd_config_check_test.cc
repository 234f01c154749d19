// dlockd's configuration from the command line as an operator meets it (C5): --check-config
// validates and exits 0, or 2 naming the key; --print-config prints the effective settings
// with secrets redacted, itself a valid --config file; a value in quotes is a clear error; an
// unknown DLOCK_* environment variable is warned about with the nearest setting.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/subprocess.h"

namespace dlock {
namespace {

using std::chrono::milliseconds;

struct Ran {
  int status;
  std::string output;  // stdout and stderr
};

// The "key = value" lines of a --print-config output, without the comments saying where each
// came from.
std::string settings_of(const std::string& printed) {
  std::istringstream lines(printed);
  std::string settings;
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line[0] != '#') settings += line + "\n";
  }
  return settings;
}

class DlockdConfigCheck : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::make_temp_dir("dlockd-config"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string file(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  Ran dlockd(std::vector<std::string> args, std::vector<std::string> env = {}) {
    const std::string log = dir_ + "/out-" + std::to_string(runs_++);
    testing::SubprocessOptions options;
    options.argv = {DLOCK_DLOCKD_PATH};
    options.argv.insert(options.argv.end(), args.begin(), args.end());
    options.log_path = log;
    options.env = std::move(env);
    const int status = testing::run_command(options, milliseconds(30'000));
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    return {status, text.str()};
  }

  std::string dir_;
  int runs_ = 0;
};

TEST_F(DlockdConfigCheck, AGoodConfigurationChecksOk) {
  const std::string conf = file("ok.conf", "lock.default.ttl = 10s\nlog.level = warn\n");
  const Ran ran = dlockd({"--config", conf, "--check-config"});
  EXPECT_EQ(ran.status, 0) << ran.output;
  EXPECT_NE(ran.output.find("dlockd: configuration OK (lock.backend sqlite"), std::string::npos)
      << ran.output;
}

TEST_F(DlockdConfigCheck, ABadValueExits2NamingTheKey) {
  const std::string conf = file("bad.conf", "# comment\nlock.default.ttl = 10 seconds\n");
  const Ran ran = dlockd({"--config", conf, "--check-config"});
  EXPECT_EQ(ran.status, 2);
  EXPECT_NE(ran.output.find("lock.default.ttl"), std::string::npos) << ran.output;
  EXPECT_NE(ran.output.find("bad.conf:2"), std::string::npos) << ran.output;
  // A TLS file that does not load is what start-up would stop on, too.
  const Ran tls = dlockd({"--tls-cert-file", dir_ + "/missing.crt", "--tls-key-file",
                          dir_ + "/missing.key", "--check-config"});
  EXPECT_EQ(tls.status, 2) << tls.output;
  EXPECT_NE(tls.output.find("missing.crt"), std::string::npos) << tls.output;
}

TEST_F(DlockdConfigCheck, AQuotedValueIsAClearErrorThatDoesNotEchoIt) {
  const std::string conf =
      file("quoted.conf", "admin.token = \"s3cret-s3cret-s3cret-s3cret-s3cret\"\n");
  const Ran ran = dlockd({"--config", conf, "--check-config"});
  EXPECT_EQ(ran.status, 2);
  // Before: the quotes were part of the value ("'\"30s\"' is not a duration", or a token that
  // never matched).
  EXPECT_NE(ran.output.find("quoted.conf:1: admin.token: the value is in quotes"),
            std::string::npos)
      << ran.output;
  EXPECT_EQ(ran.output.find("s3cret"), std::string::npos) << ran.output;
}

TEST_F(DlockdConfigCheck, UnknownKeysAndEnvironmentVariablesNameTheNearestSetting) {
  const Ran key =
      dlockd({"--config", file("typo.conf", "lock.bakend = sqlite\n"), "--check-config"});
  EXPECT_EQ(key.status, 2);
  EXPECT_NE(key.output.find("unknown key 'lock.bakend'; did you mean 'lock.backend'?"),
            std::string::npos)
      << key.output;
  // The environment is shared with the dlock CLI and `dlock run`'s commands: warned, not fatal
  // (C5); the CLI's own variables are not warned about.
  const Ran env = dlockd({"--check-config"}, {"DLOCK_LOCK_BAKEND=pg", "DLOCK_SERVER=http://x:1"});
  EXPECT_EQ(env.status, 0) << env.output;
  EXPECT_NE(env.output.find("dlockd: warning: environment DLOCK_LOCK_BAKEND is not a dlockd "
                            "setting (ignored); did you mean 'DLOCK_LOCK_BACKEND'?"),
            std::string::npos)
      << env.output;
  EXPECT_EQ(env.output.find("DLOCK_SERVER"), std::string::npos) << env.output;
}

TEST_F(DlockdConfigCheck, PrintConfigShowsTheEffectiveSettingsWithSecretsRedacted) {
  const std::string conf = file("base.conf", "lock.default.ttl = 10s\nlog.level = info\n");
  const Ran ran = dlockd(
      {"--config", conf, "--server-max-waiters", "7", "--pg-url",
       "postgresql://dlock:pg-secret@db/dlock", "--print-config"},
      {"DLOCK_LOG_LEVEL=debug", "DLOCK_ADMIN_TOKEN=admin-secret-0123456789abcdefghijklmnop"});
  EXPECT_EQ(ran.status, 0) << ran.output;
  for (const char* expected :
       {"# from " /* the file */, "lock.default.ttl = 10s\n",
        "# from environment DLOCK_LOG_LEVEL\nlog.level = debug\n",
        "# from --server-max-waiters\nserver.max.waiters = 7\n", "admin.token = REDACTED\n",
        "pg.url = postgresql://dlock:REDACTED@db/dlock\n", "lock.backend = sqlite\n"}) {
    EXPECT_NE(ran.output.find(expected), std::string::npos) << expected << " in\n" << ran.output;
  }
  EXPECT_EQ(ran.output.find("pg-secret"), std::string::npos) << ran.output;
  EXPECT_EQ(ran.output.find("admin-secret"), std::string::npos) << ran.output;

  // Without secrets the output is a configuration file that says the same.
  const Ran plain = dlockd({"--config", conf, "--print-config"});
  const std::string again = file("again.conf", plain.output);
  const Ran checked = dlockd({"--config", again, "--check-config"});
  EXPECT_EQ(checked.status, 0) << checked.output << "\nfrom\n" << plain.output;
  EXPECT_EQ(settings_of(dlockd({"--config", again, "--print-config"}).output),
            settings_of(plain.output));
}

}  // namespace
}  // namespace dlock
