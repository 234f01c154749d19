#pragma once

// dlock's command line (CLI11): every flag and subcommand, declared in the order --help lists
// them, and what a command line says once parsed. cli.cc runs the subcommand it names.

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "cli/help_text.h"

namespace dlock::cli {

// Flags shared by every subcommand (declared on the top-level app; subcommands fall through).
struct GlobalFlags {
  std::string server;
  std::string token;
  std::string token_file;
  std::string cacert;
  std::string cert;
  std::string key;
  std::string admin_token;
  std::string ns;
  std::string timeout = "15s";
  std::string clock_drift;
  bool json = false;
};

// What the command line says: every flag and argument of every subcommand, filled by CLI11.
struct Arguments {
  GlobalFlags flags;
  std::string key, session_id, owner, ttl, wait, stop_margin, kill_grace, prefix;
  std::string lock_delay;
  // Parsed by fencing_token_flag, so a bearer token given here by mistake is never echoed.
  std::string token_text;
  std::size_t limit = 0;
  bool all_pages = false;
  std::vector<std::string> command;
  bool shared = false;
  std::uint32_t permits = 0;
  bool every_namespace = false;
  std::string owner_filter, principal_filter;
  std::string lease = "session";
  std::string value;   // elect's --value
  bool watch = false;  // leader's --watch
  std::string principal, permissions;
  std::string shell;
};

// The subcommands, each set once declared: which one the command line named.
struct Subcommands {
  CLI::App* session_open = nullptr;
  CLI::App* session_keepalive = nullptr;
  CLI::App* session_show = nullptr;
  CLI::App* session_close = nullptr;
  CLI::App* acquire = nullptr;
  CLI::App* extend = nullptr;
  CLI::App* release = nullptr;
  CLI::App* get = nullptr;
  CLI::App* semaphore = nullptr;
  CLI::App* list = nullptr;
  CLI::App* watch = nullptr;
  CLI::Option* watch_key = nullptr;
  CLI::Option* watch_prefix = nullptr;
  CLI::App* sessions = nullptr;
  CLI::App* revoke = nullptr;
  CLI::App* run = nullptr;
  CLI::App* elect = nullptr;
  CLI::App* leader = nullptr;
  CLI::App* token_new = nullptr;
  CLI::App* completion = nullptr;
};

// dlock's command line: the app with every flag and subcommand declared (in the order --help
// lists them), bound to `args`.
class CommandLine {
 public:
  CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // Parses argv into `args`. Returns the exit status when nothing is left to do: help or the
  // version printed, or a usage error reported.
  std::optional<int> parse(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

  CLI::App app{help::kMain, "dlock"};
  Arguments args;
  Subcommands given;

 private:
  void declare_global_flags();
  void declare_session_commands();
  void declare_lock_commands();     // acquire, extend, release, get, semaphore
  void declare_listing_commands();  // list, watch, sessions, revoke
  void declare_run_commands();      // run, elect, leader
  void declare_offline_commands();  // token new, completion: no server involved
  // --shared and --semaphore N (one excludes the other) of acquire and run.
  void declare_mode_flags(CLI::App* command, const char* semaphore_help);
};

}  // namespace dlock::cli
