#include "cli/command_line.h"

#include <ostream>

#include "cli/exit_codes.h"
#include "cli/usage.h"
#include "cli/watch_command.h"

namespace dlock::cli {
namespace {

// --lock-delay (C2 "Lock-delay") on every subcommand that opens a session.
constexpr const char* kLockDelayHelp =
    "keep the key ungranted this long after a grant of the session ends without a release "
    "(expiry, revoke): for a resource that cannot check fencing tokens (default 0)";

}  // namespace

CommandLine::CommandLine() {
  // Before any subcommand is added: each copies its parent's formatter.
  app.formatter(std::make_shared<GlobalFlagsFormatter>());
  app.footer(help::kMainFooter);
  app.require_subcommand(1);
  app.fallthrough();  // so `dlock get KEY --json` works as well as `dlock --json get KEY`
  app.set_version_flag("--version", "dlock 0.1.0");
  declare_global_flags();
  declare_session_commands();
  declare_lock_commands();
  declare_listing_commands();
  declare_run_commands();
  declare_offline_commands();
}

std::optional<int> CommandLine::parse(int argc, const char* const* argv, std::ostream& out,
                                      std::ostream& err) {
  try {
    app.parse(argc, argv);
    if (*given.watch && given.watch_key->count() == 0 && given.watch_prefix->count() == 0) {
      throw CLI::RequiredError("KEY or --prefix");
    }
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e, out, err);
  } catch (const CLI::ParseError& e) {
    err << usage_error(app, e) << '\n';
    return kExitUsage;
  }
  return std::nullopt;
}

void CommandLine::declare_global_flags() {
  GlobalFlags& flags = args.flags;
  app.add_option("--server", flags.server,
                 "dlockd URL(s), comma-separated to fail over (default http://127.0.0.1:7070)")
      ->envname("DLOCK_SERVER");
  // No envname (CLI11 would show it as the default) and no default: the token is never shown;
  // the library reads DLOCK_TOKEN / DLOCK_TOKEN_FILE itself.
  app.add_option("--token", flags.token,
                 "bearer token (prefer DLOCK_TOKEN or --token-file: flags are visible in ps)");
  app.add_option("--token-file", flags.token_file, "file whose first line is the bearer token");
  app.add_option("--cacert", flags.cacert, "PEM CA certificates for https:// servers")
      ->envname("DLOCK_CACERT");
  app.add_option("--cert", flags.cert, "PEM client certificate (mTLS)")->envname("DLOCK_CERT");
  app.add_option("--key", flags.key, "PEM key of --cert (default: in the --cert file)")
      ->envname("DLOCK_KEY");
  app.add_option("--admin-token", flags.admin_token, "admin token for revoke (default: --token)")
      ->envname("DLOCK_ADMIN_TOKEN");
  // DLOCK_NAMESPACE is also what `dlock run` gives CMD, so a dlock inside CMD sees its namespace.
  app.add_option("--ns", flags.ns, "namespace of the key (default \"default\")")
      ->envname("DLOCK_NAMESPACE");
  app.add_option("--timeout", flags.timeout,
                 "give up on an unreachable or unavailable server after this long")
      ->capture_default_str();
  app.add_option("--clock-drift", flags.clock_drift,
                 "trust every lease for this fraction less than its TTL (default 1%)")
      ->envname("DLOCK_CLOCK_DRIFT");
  app.add_flag("--json", flags.json, "print one JSON document instead of text");
}

void CommandLine::declare_session_commands() {
  CLI::App* session = app.add_subcommand("session", help::kSession);
  session->footer(help::kSessionFooter);
  session->require_subcommand(1);
  given.session_open = session->add_subcommand("open", "Open a session; prints its id");
  given.session_open->add_option("--ttl", args.ttl, "session TTL (default: the server's, 30s)");
  given.session_open->add_option("--owner", args.owner,
                                 "owner name (default $DLOCK_OWNER or USER@host)");
  given.session_open->add_option("--lock-delay", args.lock_delay, kLockDelayHelp);
  given.session_keepalive = session->add_subcommand("keepalive", "Renew a session's lease");
  given.session_keepalive->add_option("SESSION_ID", args.session_id, "the session")->required();
  given.session_show =
      session->add_subcommand("show", "Show a session: what it holds and waits for");
  given.session_show->add_option("SESSION_ID", args.session_id, "the session")->required();
  given.session_close = session->add_subcommand("close", "Close a session, releasing its locks");
  given.session_close->add_option("SESSION_ID", args.session_id, "the session")->required();
}

void CommandLine::declare_lock_commands() {
  CLI::App* acquire = given.acquire = app.add_subcommand("acquire", help::kAcquire);
  acquire->footer(help::kAcquireFooter);
  acquire->add_option("KEY", args.key, "lock key (any text; sent percent-encoded)")->required();
  acquire->add_option("--session", args.session_id, "session id (dlock session open)")->required();
  acquire->add_option("--ttl", args.ttl, "lock TTL (default: the server's, 30s)");
  acquire->add_option("--wait", args.wait, "wait this long while the key is held (default 0)");
  declare_mode_flags(acquire, "one of N permits of the semaphore KEY");

  CLI::App* extend = given.extend = app.add_subcommand("extend", help::kExtend);
  extend->footer(help::kExtendFooter);
  extend->add_option("KEY", args.key, "lock key")->required();
  extend->add_option("--session", args.session_id, "session id of the grant")->required();
  extend->add_option("--fencing-token,--token", args.token_text, "fencing token of the grant")
      ->required();
  extend->add_option("--ttl", args.ttl, "new TTL (default: the server's)");

  CLI::App* release = given.release = app.add_subcommand("release", help::kRelease);
  release->footer(help::kReleaseFooter);
  release->add_option("KEY", args.key, "lock key")->required();
  release->add_option("--session", args.session_id, "session id of the grant")->required();
  release->add_option("--fencing-token,--token", args.token_text, "fencing token of the grant")
      ->required();

  given.get = app.add_subcommand("get", help::kGet);
  given.get->footer(help::kGetFooter);
  given.get->add_option("KEY", args.key, "lock key")->required();

  given.semaphore = app.add_subcommand("semaphore", help::kSemaphore);
  given.semaphore->footer(help::kSemaphoreFooter);
  given.semaphore->add_option("NAME", args.key, "semaphore name")->required();
}

void CommandLine::declare_listing_commands() {
  CLI::App* list = given.list = app.add_subcommand("list", help::kList);
  list->footer(help::kListFooter);
  auto* list_prefix = list->add_option("--prefix", args.prefix, "only keys starting with this");
  list->add_option("--limit", args.limit, "at most this many (default 100; pages of 1000 beyond)");
  list->add_flag("--all", args.all_pages, "every lock, page after page (C3 \"Paging\")");
  list->add_flag("-A,--all-namespaces", args.every_namespace,
                 "every namespace, with a NAMESPACE column (an administrator of every one)")
      ->excludes(list_prefix);

  given.watch = app.add_subcommand("watch", kWatchHelp);
  given.watch->footer(kWatchFooter);
  given.watch_key = given.watch->add_option("KEY", args.key, "lock key");
  given.watch_prefix =
      given.watch->add_option("--prefix", args.prefix, "every key beginning with this (\"\": all)");
  given.watch_key->excludes(given.watch_prefix);

  CLI::App* sessions = given.sessions = app.add_subcommand("sessions", help::kSessions);
  sessions->footer(help::kSessionsFooter);
  sessions->add_option("--owner", args.owner_filter, "only owners starting with this");
  sessions->add_option("--principal", args.principal_filter, "only this principal's (C6)");
  sessions->add_option("--limit", args.limit,
                       "at most this many (default 100; pages of 1000 beyond)");
  sessions->add_flag("--all", args.all_pages, "every session, page after page");

  given.revoke = app.add_subcommand("revoke", help::kRevoke);
  given.revoke->footer(help::kRevokeFooter);
  given.revoke->add_option("KEY", args.key, "lock key")->required();
}

void CommandLine::declare_run_commands() {
  CLI::App* run = given.run = app.add_subcommand("run", help::kRun);
  run->footer(help::kRunFooter);
  run->add_option("KEY", args.key, "lock key")->required();
  run->add_option("CMD", args.command, "command and arguments, after --")->required();
  run->add_option("--lease", args.lease,
                  "session: the lock lives as long as the session (default); ttl: the lock has "
                  "a TTL of its own, extended every TTL/3")
      ->check(CLI::IsMember({"session", "ttl"}));
  run->add_option("--ttl", args.ttl,
                  "session TTL, and the lock's with --lease ttl (default: the server's, 30s)");
  run->add_option("--wait", args.wait, "wait this long while the key is held (default 0)");
  run->add_option("--stop-margin", args.stop_margin,
                  "stop CMD this long before the lock's deadline when extends (keepalives) fail "
                  "(default max(1s, TTL/10), at most TTL/3)");
  run->add_option("--kill-grace", args.kill_grace,
                  "time between SIGTERM and SIGKILL (default half the stop margin)");
  run->add_option("--owner", args.owner, "owner name (default $DLOCK_OWNER or USER@host)");
  run->add_option("--lock-delay", args.lock_delay, kLockDelayHelp);
  declare_mode_flags(run, "hold one of N permits of the semaphore KEY");

  // Elections (C3 "Elections"): elect runs CMD while leader, as run does while holding a lock.
  CLI::App* elect = given.elect = app.add_subcommand("elect", help::kElect);
  elect->footer(help::kElectFooter);
  elect->add_option("NAME", args.key, "election name")->required();
  elect->add_option("CMD", args.command, "command and arguments, after --")->required();
  elect->add_option("--value", args.value, "what to lead with (an address, an ID; 1..1024 bytes)")
      ->required();
  elect->add_option("--ttl", args.ttl, "session TTL: the leadership lives as long as the session");
  elect->add_option("--wait", args.wait, "wait this long while another session leads (default 0)");
  elect->add_option("--stop-margin", args.stop_margin,
                    "stop CMD this long before the session's deadline when keepalives fail "
                    "(default max(1s, TTL/10), at most TTL/3)");
  elect->add_option("--kill-grace", args.kill_grace,
                    "time between SIGTERM and SIGKILL (default half the stop margin)");
  elect->add_option("--owner", args.owner, "owner name (default $DLOCK_OWNER or USER@host)");
  elect->add_option("--lock-delay", args.lock_delay, kLockDelayHelp);

  given.leader = app.add_subcommand("leader", help::kLeader);
  given.leader->footer(help::kLeaderFooter);
  given.leader->add_option("NAME", args.key, "election name")->required();
  given.leader->add_flag("--watch", args.watch, "print one line per change until interrupted");
}

void CommandLine::declare_mode_flags(CLI::App* command, const char* semaphore_help) {
  auto* shared = command->add_flag("--shared", args.shared,
                                   "a read lock: shared with other readers, excluded by writers");
  command->add_option("--semaphore", args.permits, semaphore_help)
      ->check(CLI::Range(1u, UINT32_MAX))
      ->excludes(shared);
}

void CommandLine::declare_offline_commands() {
  CLI::App* token_cmd = app.add_subcommand("token", help::kToken);
  token_cmd->footer(help::kTokenFooter);
  token_cmd->require_subcommand(1);
  given.token_new = token_cmd->add_subcommand("new", "Make a bearer token for a principal");
  given.token_new->add_option("PRINCIPAL", args.principal, "principal name (no spaces)")
      ->required();
  given.token_new
      ->add_option("PERMISSIONS", args.permissions, "<role>:<pattern>[,...], e.g. lock:payments")
      ->required();

  given.completion = app.add_subcommand(
      "completion", "Print a shell completion script: source <(dlock completion bash)");
  given.completion->add_option("SHELL", args.shell, "bash, zsh or fish")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh", "fish"}));
}

}  // namespace dlock::cli
