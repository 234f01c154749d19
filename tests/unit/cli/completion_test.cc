// `dlock completion bash|zsh|fish`: the bash script loads in bash and completes subcommands,
// nested subcommands, a subcommand's flags and the global flags, skips option values, and
// offers commands after `--`; zsh gets it through bashcompinit; fish gets `complete` lines.

#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cli/exit_codes.h"
#include "cli_in_process.h"

namespace dlock::client {
namespace {

using testing::dlock;

class BashCompletion : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/dlock-completion-XXXXXX";
    dir_ = ::mkdtemp(pattern);
    const auto script = dlock({"completion", "bash"});
    ASSERT_EQ(script.status, 0) << script.err;
    std::ofstream(dir_ + "/dlock.bash") << script.out;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // What bash offers for the command line `words` (the last one being completed), after
  // loading the script in a fresh bash.
  std::string complete(const std::string& words) {
    const std::string command =
        "bash --norc --noprofile -c 'source " + dir_ + "/dlock.bash || exit 3; COMP_WORDS=(" +
        words + "); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _dlock; echo \"${COMPREPLY[*]}\"' 2>&1";
    FILE* pipe = ::popen(command.c_str(), "r");
    std::string out;
    char buffer[4096];
    while (std::size_t got = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, got);
    const int status = ::pclose(pipe);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  std::string dir_;
};

TEST_F(BashCompletion, CompletesSubcommandsAndFlags) {
  EXPECT_EQ(complete("dlock li"), "list");
  EXPECT_EQ(complete("dlock re"), "release revoke");
  EXPECT_EQ(complete("dlock session \"\""), "open keepalive show close");
  EXPECT_EQ(complete("dlock run k --stop"), "--stop-margin");
  EXPECT_EQ(complete("dlock get k --js"), "--json");  // a global flag after the subcommand
  EXPECT_EQ(complete("dlock completion \"\""), "bash zsh fish");
}

TEST_F(BashCompletion, SkipsOptionValuesAndOffersCommandsAfterTheDoubleDash) {
  // "http://x" is --server's value, not the subcommand.
  EXPECT_EQ(complete("dlock --server http://x li"), "list");
  EXPECT_EQ(complete("dlock --ns payments ru"), "run");
  // A value is not completed as a subcommand.
  EXPECT_EQ(complete("dlock --timeout \"\""), "");
  EXPECT_NE(complete("dlock run k -- bas").find("bash"), std::string::npos);
}

TEST(Completion, ZshUsesTheBashScriptAndFishGetsCompleteLines) {
  const auto zsh = dlock({"completion", "zsh"});
  EXPECT_EQ(zsh.status, 0);
  EXPECT_EQ(zsh.out.rfind("#compdef dlock\n", 0), 0U);
  EXPECT_NE(zsh.out.find("bashcompinit"), std::string::npos);
  EXPECT_NE(zsh.out.find("complete -F _dlock dlock"), std::string::npos);

  const auto fish = dlock({"completion", "fish"});
  EXPECT_EQ(fish.status, 0);
  EXPECT_NE(fish.out.find("complete -c dlock -n 'not __fish_seen_subcommand_from session "),
            std::string::npos)
      << fish.out;
  EXPECT_NE(fish.out.find(" -a list -d 'List held locks"), std::string::npos) << fish.out;
  EXPECT_NE(fish.out.find("complete -c dlock -n '__fish_seen_subcommand_from run' -l stop-margin "
                          "-r"),
            std::string::npos);
  EXPECT_NE(fish.out.find("complete -c dlock -l json\n"), std::string::npos);

  const auto other = dlock({"completion", "tcsh"});
  EXPECT_EQ(other.status, cli::kExitUsage);
  EXPECT_EQ(other.out, "");
}

}  // namespace
}  // namespace dlock::client
