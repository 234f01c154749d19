#include "cli/cli.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <iostream>
#include <ostream>
#include <thread>

#include "cli/completion.h"
#include "cli/exit_codes.h"
#include "cli/help_text.h"
#include "cli/leader_command.h"
#include "cli/output.h"
#include "cli/run_command.h"
#include "cli/server_retry.h"
#include "cli/terminal_text.h"
#include "cli/token_command.h"
#include "cli/usage.h"
#include "cli/wait_line.h"
#include "cli/watch_command.h"
#include "dlock/client.h"

namespace dlock::cli {
namespace {

using std::chrono::milliseconds;

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

milliseconds duration_flag(const std::string& text, const char* flag) {
  return text.empty() ? milliseconds(0) : client::parse_duration(text, flag);
}

client::ClientOptions client_options(const GlobalFlags& flags) {
  client::ClientOptions options;
  // DLOCK_SERVER, DLOCK_TOKEN(_FILE) and DLOCK_CACERT/CERT/KEY apply through the library when
  // the flag is absent; only the flags' own names differ in error messages.
  options.server_url = flags.server;
  options.token = flags.token;
  options.token_file = flags.token_file;
  options.tls_ca_file = flags.cacert;
  options.tls_cert_file = flags.cert;
  options.tls_key_file = flags.key;
  options.admin_token = flags.admin_token;
  options.retry_budget = duration_flag(flags.timeout, "--timeout");
  if (!flags.clock_drift.empty()) {
    options.clock_drift = client::parse_clock_drift(flags.clock_drift, "--clock-drift");
  }
  return options;
}

// Whether `err` is this process's stderr and a terminal: then progress is drawn as one
// updating line. In-process callers (tests) pass a string stream: never a terminal.
bool stderr_is_terminal(const std::ostream& err) {
  return &err == &std::cerr && ::isatty(STDERR_FILENO) == 1;
}

// --fencing-token (alias --token after extend/release): a decimal unsigned 64-bit number. The
// error does not repeat the text, which may be a bearer token put in the wrong place.
FencingToken fencing_token_flag(const std::string& text) {
  FencingToken value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    throw InvalidArgumentError("--fencing-token",
                               "--fencing-token: expected the grant's fencing token, a decimal "
                               "number (the bearer token goes before the subcommand: dlock "
                               "--token T extend ..., or in DLOCK_TOKEN)");
  }
  return value;
}

// Maps the library's exceptions to exit statuses, in one place. Messages carry server-supplied
// text (keys, owners, the server's own message): printable() (docs/cli.md, "Output").
int report(const std::exception_ptr& failure, std::ostream& err) {
  try {
    std::rethrow_exception(failure);
  } catch (const UnauthenticatedError& error) {
    err << "dlock: not authenticated: " << printable(error.what()) << '\n';
    return kExitUnauthenticated;
  } catch (const PermissionDeniedError& error) {
    err << "dlock: permission denied: " << printable(error.what()) << '\n';
    return kExitPermission;
  } catch (const client::TlsError& error) {
    err << "dlock: TLS: " << printable(error.what()) << '\n';
    return kExitTls;
  } catch (const InvalidArgumentError& error) {
    err << "dlock: " << printable(error.what()) << '\n';
    return kExitUsage;
  } catch (const UnavailableError& error) {
    err << "dlock: unavailable: " << printable(error.what()) << '\n';
    return kExitUnavailable;
  } catch (const ResourceExhaustedError& error) {
    err << "dlock: server busy or throttling: " << printable(error.what()) << '\n';
    return kExitThrottled;
  } catch (const ConflictError& error) {
    // The request disagrees with the name's live holders (a semaphore's limit, ADR-0020).
    err << "dlock: conflict on " << printable(error.field()) << ": " << printable(error.what())
        << '\n';
    return kExitFailure;
  } catch (const LockLostError& error) {
    err << "dlock: lock lost: " << printable(error.what()) << '\n';
    return kExitLockLost;
  } catch (const std::exception& error) {
    err << "dlock: " << printable(error.what()) << '\n';
    return kExitFailure;
  }
}

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{help::kMain, "dlock"};
  // Before any subcommand is added: each copies its parent's formatter.
  app.formatter(std::make_shared<GlobalFlagsFormatter>());
  app.footer(help::kMainFooter);
  app.require_subcommand(1);
  app.fallthrough();  // so `dlock get KEY --json` works as well as `dlock --json get KEY`
  app.set_version_flag("--version", "dlock 0.1.0");

  GlobalFlags flags;
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

  std::string key, session_id, owner, ttl, wait, stop_margin, kill_grace, prefix;
  // --lock-delay (C2 "Lock-delay") on every subcommand that opens a session.
  std::string lock_delay;
  constexpr const char* kLockDelayHelp =
      "keep the key ungranted this long after a grant of the session ends without a release "
      "(expiry, revoke): for a resource that cannot check fencing tokens (default 0)";
  // Parsed by fencing_token_flag, so a bearer token given here by mistake is never echoed.
  std::string token_text;
  std::size_t limit = 0;
  bool all_pages = false;
  std::vector<std::string> command;

  CLI::App* session = app.add_subcommand("session", help::kSession);
  session->footer(help::kSessionFooter);
  session->require_subcommand(1);
  CLI::App* session_open = session->add_subcommand("open", "Open a session; prints its id");
  session_open->add_option("--ttl", ttl, "session TTL (default: the server's, 30s)");
  session_open->add_option("--owner", owner, "owner name (default $DLOCK_OWNER or USER@host)");
  session_open->add_option("--lock-delay", lock_delay, kLockDelayHelp);
  CLI::App* session_keepalive = session->add_subcommand("keepalive", "Renew a session's lease");
  session_keepalive->add_option("SESSION_ID", session_id, "the session")->required();
  CLI::App* session_show =
      session->add_subcommand("show", "Show a session: what it holds and waits for");
  session_show->add_option("SESSION_ID", session_id, "the session")->required();
  CLI::App* session_close =
      session->add_subcommand("close", "Close a session, releasing its locks");
  session_close->add_option("SESSION_ID", session_id, "the session")->required();

  CLI::App* acquire = app.add_subcommand("acquire", help::kAcquire);
  acquire->footer(help::kAcquireFooter);
  acquire->add_option("KEY", key, "lock key (any text; sent percent-encoded)")->required();
  acquire->add_option("--session", session_id, "session id (dlock session open)")->required();
  acquire->add_option("--ttl", ttl, "lock TTL (default: the server's, 30s)");
  acquire->add_option("--wait", wait, "wait this long while the key is held (default 0)");
  bool shared = false;
  std::uint32_t permits = 0;
  auto* acquire_shared = acquire->add_flag(
      "--shared", shared, "a read lock: shared with other readers, excluded by writers");
  acquire->add_option("--semaphore", permits, "one of N permits of the semaphore KEY")
      ->check(CLI::Range(1u, UINT32_MAX))
      ->excludes(acquire_shared);

  CLI::App* extend = app.add_subcommand("extend", help::kExtend);
  extend->footer(help::kExtendFooter);
  extend->add_option("KEY", key, "lock key")->required();
  extend->add_option("--session", session_id, "session id of the grant")->required();
  extend->add_option("--fencing-token,--token", token_text, "fencing token of the grant")
      ->required();
  extend->add_option("--ttl", ttl, "new TTL (default: the server's)");

  CLI::App* release = app.add_subcommand("release", help::kRelease);
  release->footer(help::kReleaseFooter);
  release->add_option("KEY", key, "lock key")->required();
  release->add_option("--session", session_id, "session id of the grant")->required();
  release->add_option("--fencing-token,--token", token_text, "fencing token of the grant")
      ->required();

  CLI::App* get = app.add_subcommand("get", help::kGet);
  get->footer(help::kGetFooter);
  get->add_option("KEY", key, "lock key")->required();

  CLI::App* semaphore = app.add_subcommand("semaphore", help::kSemaphore);
  semaphore->footer(help::kSemaphoreFooter);
  semaphore->add_option("NAME", key, "semaphore name")->required();

  CLI::App* list = app.add_subcommand("list", help::kList);
  list->footer(help::kListFooter);
  auto* list_prefix = list->add_option("--prefix", prefix, "only keys starting with this");
  list->add_option("--limit", limit, "at most this many (default 100; pages of 1000 beyond)");
  list->add_flag("--all", all_pages, "every lock, page after page (C3 \"Paging\")");
  bool every_namespace = false;
  list->add_flag("-A,--all-namespaces", every_namespace,
                 "every namespace, with a NAMESPACE column (an administrator of every one)")
      ->excludes(list_prefix);

  CLI::App* watch_cmd = app.add_subcommand("watch", kWatchHelp);
  watch_cmd->footer(kWatchFooter);
  CLI::Option* watch_key = watch_cmd->add_option("KEY", key, "lock key");
  CLI::Option* watch_prefix =
      watch_cmd->add_option("--prefix", prefix, "every key beginning with this (\"\": all)");
  watch_key->excludes(watch_prefix);

  CLI::App* sessions = app.add_subcommand("sessions", help::kSessions);
  sessions->footer(help::kSessionsFooter);
  std::string owner_filter, principal_filter;
  sessions->add_option("--owner", owner_filter, "only owners starting with this");
  sessions->add_option("--principal", principal_filter, "only this principal's (C6)");
  sessions->add_option("--limit", limit, "at most this many (default 100; pages of 1000 beyond)");
  sessions->add_flag("--all", all_pages, "every session, page after page");

  CLI::App* revoke = app.add_subcommand("revoke", help::kRevoke);
  revoke->footer(help::kRevokeFooter);
  revoke->add_option("KEY", key, "lock key")->required();

  CLI::App* run = app.add_subcommand("run", help::kRun);
  run->footer(help::kRunFooter);
  run->add_option("KEY", key, "lock key")->required();
  run->add_option("CMD", command, "command and arguments, after --")->required();
  std::string lease = "session";
  run->add_option("--lease", lease,
                  "session: the lock lives as long as the session (default); ttl: the lock has "
                  "a TTL of its own, extended every TTL/3")
      ->check(CLI::IsMember({"session", "ttl"}));
  run->add_option("--ttl", ttl,
                  "session TTL, and the lock's with --lease ttl (default: the server's, 30s)");
  run->add_option("--wait", wait, "wait this long while the key is held (default 0)");
  run->add_option("--stop-margin", stop_margin,
                  "stop CMD this long before the lock's deadline when extends (keepalives) fail "
                  "(default max(1s, TTL/10), at most TTL/3)");
  run->add_option("--kill-grace", kill_grace,
                  "time between SIGTERM and SIGKILL (default half the stop margin)");
  run->add_option("--owner", owner, "owner name (default $DLOCK_OWNER or USER@host)");
  run->add_option("--lock-delay", lock_delay, kLockDelayHelp);
  auto* run_shared = run->add_flag("--shared", shared,
                                   "a read lock: shared with other readers, excluded by writers");
  run->add_option("--semaphore", permits, "hold one of N permits of the semaphore KEY")
      ->check(CLI::Range(1u, UINT32_MAX))
      ->excludes(run_shared);

  // Elections (C3 "Elections"): elect runs CMD while leader, as run does while holding a lock.
  std::string value;
  CLI::App* elect = app.add_subcommand("elect", help::kElect);
  elect->footer(help::kElectFooter);
  elect->add_option("NAME", key, "election name")->required();
  elect->add_option("CMD", command, "command and arguments, after --")->required();
  elect->add_option("--value", value, "what to lead with (an address, an ID; 1..1024 bytes)")
      ->required();
  elect->add_option("--ttl", ttl, "session TTL: the leadership lives as long as the session");
  elect->add_option("--wait", wait, "wait this long while another session leads (default 0)");
  elect->add_option("--stop-margin", stop_margin,
                    "stop CMD this long before the session's deadline when keepalives fail "
                    "(default max(1s, TTL/10), at most TTL/3)");
  elect->add_option("--kill-grace", kill_grace,
                    "time between SIGTERM and SIGKILL (default half the stop margin)");
  elect->add_option("--owner", owner, "owner name (default $DLOCK_OWNER or USER@host)");
  elect->add_option("--lock-delay", lock_delay, kLockDelayHelp);

  bool watch = false;
  CLI::App* leader = app.add_subcommand("leader", help::kLeader);
  leader->footer(help::kLeaderFooter);
  leader->add_option("NAME", key, "election name")->required();
  leader->add_flag("--watch", watch, "print one line per change until interrupted");

  std::string principal, permissions;
  CLI::App* token_cmd = app.add_subcommand("token", help::kToken);
  token_cmd->footer(help::kTokenFooter);
  token_cmd->require_subcommand(1);
  CLI::App* token_new = token_cmd->add_subcommand("new", "Make a bearer token for a principal");
  token_new->add_option("PRINCIPAL", principal, "principal name (no spaces)")->required();
  token_new->add_option("PERMISSIONS", permissions, "<role>:<pattern>[,...], e.g. lock:payments")
      ->required();

  std::string shell;
  CLI::App* completion = app.add_subcommand(
      "completion", "Print a shell completion script: source <(dlock completion bash)");
  completion->add_option("SHELL", shell, "bash, zsh or fish")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh", "fish"}));

  try {
    app.parse(argc, argv);
    if (*watch_cmd && watch_key->count() == 0 && watch_prefix->count() == 0) {
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

  Printer printer(out, flags.json);
  try {
    if (*completion) {  // offline, as token new
      out << completion_script(app, shell);
      return kExitOk;
    }
    if (*token_new) {  // offline: no server involved
      print_new_token(principal, permissions, flags.json, out);
      return kExitOk;
    }
    const client::ClientOptions options = client_options(flags);
    // One-shot calls: one attempt each, retried here where the user sees it (server_retry.h).
    client::Client client(one_attempt(options));
    const bool terminal = stderr_is_terminal(err);
    ServerRetry retry(err, terminal, options.retry_budget);
    // Who holds `key` now and who waits, for the waiting line and "not acquired": one quick read.
    const WaitLine::Lookup state_of = [&client, &key, &flags, permits] {
      const SteadyClock::time_point deadline = SteadyClock::now() + std::chrono::seconds(2);
      if (permits == 0) return client.state(key, flags.ns, deadline);
      client::SemaphoreInfo semaphore = client.semaphore(key, flags.ns, deadline);
      return client::KeyState{std::move(semaphore.holders), std::move(semaphore.waiters)};
    };
    retry.set_servers(client.servers());
    const auto once = [&retry](auto call, bool repeat_safe = true) {
      retry.run([&call](SteadyClock::time_point deadline) { call(deadline); }, repeat_safe);
    };
    if (*session_open) {
      once(
          [&](SteadyClock::time_point deadline) {
            printer.session(client.open_session(owner, duration_flag(ttl, "--ttl"), deadline,
                                                duration_flag(lock_delay, "--lock-delay")));
          },
          /*repeat_safe=*/false);
    } else if (*session_keepalive) {
      once([&](SteadyClock::time_point deadline) {
        printer.keepalive(client.keepalive(session_id, deadline));
      });
    } else if (*session_show) {
      once([&](SteadyClock::time_point deadline) {
        printer.session_detail(client.session_detail(session_id, deadline));
      });
    } else if (*session_close) {
      once([&](SteadyClock::time_point deadline) { client.close_session(session_id, deadline); },
           /*repeat_safe=*/false);
      printer.session_closed(session_id);
    } else if (*acquire) {
      const milliseconds wait_ms = duration_flag(wait, "--wait");
      const milliseconds ttl_ms = duration_flag(ttl, "--ttl");
      const SteadyClock::time_point started = SteadyClock::now();
      std::optional<LockHandle> handle;
      once([&](SteadyClock::time_point deadline) {
        // Per attempt: a failure clears it before the retry's line is drawn.
        std::optional<WaitLine> line;
        if (terminal && wait_ms.count() > 0) {
          line.emplace(err, key, session_id, state_of, started);
        }
        // A retry after a failure asks only for what is left of the wait.
        const milliseconds left =
            std::max(milliseconds(0),
                     wait_ms - std::chrono::ceil<milliseconds>(SteadyClock::now() - started));
        handle = permits > 0
                     ? client.acquire_permit(key, session_id, permits, ttl_ms, left, flags.ns,
                                             deadline + left)
                     : client.acquire(key, session_id, ttl_ms, left, flags.ns, deadline + left,
                                      shared ? HoldMode::kShared : HoldMode::kExclusive);
      });
      if (!handle) {
        std::vector<LockInfo> holders;
        try {
          holders = state_of().holders;
        } catch (const std::exception&) {
          // Not named then.
        }
        if (flags.json) {
          printer.held(key, wait_ms, holders);
        } else {
          Printer(err, false).held(key, wait_ms, holders);
        }
        return kExitNotAcquired;
      }
      printer.granted(*handle, flags.ns, permits);
    } else if (*extend) {
      const FencingToken token = fencing_token_flag(token_text);
      once([&](SteadyClock::time_point deadline) {
        printer.extended(key, client.extend(key, session_id, token, duration_flag(ttl, "--ttl"),
                                            flags.ns, deadline));
      });
    } else if (*release) {
      const FencingToken token = fencing_token_flag(token_text);
      // Not repeated after a lost answer: a second release of a released grant says lock_lost.
      once(
          [&](SteadyClock::time_point deadline) {
            client.release(key, session_id, token, flags.ns, deadline);
          },
          /*repeat_safe=*/false);
      printer.released(key, token);
    } else if (*get) {
      once([&](SteadyClock::time_point deadline) {
        const auto state = client.state(key, flags.ns, deadline);
        printer.lock(key, state.holders, state.waiters);
      });
    } else if (*semaphore) {
      once([&](SteadyClock::time_point deadline) {
        printer.semaphore(client.semaphore(key, flags.ns, deadline));
      });
    } else if (*list) {
      // Pages of at most 1000 (C3 "Paging"), followed until --limit locks are shown (default
      // 100), or to the end with --all; a page's `next` says whether more follow.
      const std::size_t shown = limit == 0 ? 100 : limit;
      client::LockPage listed;
      std::string after;
      while (true) {
        const std::size_t wanted =
            all_pages ? 1000 : std::min<std::size_t>(1000, shown + 1 - listed.locks.size());
        client::LockPage page;
        once([&](SteadyClock::time_point deadline) {
          page = every_namespace ? client.list_every_namespace(wanted, after, deadline)
                                 : client.list_page(prefix, wanted, after, flags.ns, deadline);
        });
        const auto append = [](auto& to, auto& from) {
          to.insert(to.end(), std::make_move_iterator(from.begin()),
                    std::make_move_iterator(from.end()));
        };
        append(listed.locks, page.locks);
        append(listed.waiting, page.waiting);
        append(listed.namespaces, page.namespaces);
        if (page.next.empty()) break;
        after = page.next;
        if (!all_pages && listed.locks.size() > shown) break;
      }
      std::optional<ListCut> cut;
      if (!all_pages && listed.locks.size() > shown) {
        listed.locks.resize(shown);
        cut = ListCut{shown, true};
      }
      printer.locks(listed, every_namespace, cut);
    } else if (*sessions) {
      // As list: pages followed until --limit sessions (default 100), or to the end with --all.
      const std::size_t shown = limit == 0 ? 100 : limit;
      std::vector<client::ListedSession> listed;
      std::string after;
      bool more = false;
      while (true) {
        const std::size_t wanted =
            all_pages ? 1000 : std::min<std::size_t>(1000, shown + 1 - listed.size());
        client::SessionPage page;
        once([&](SteadyClock::time_point deadline) {
          page = client.list_sessions(owner_filter, principal_filter, wanted, after, deadline);
        });
        listed.insert(listed.end(), page.sessions.begin(), page.sessions.end());
        if (page.next.empty()) break;
        after = page.next;
        if (!all_pages && listed.size() > shown) break;
      }
      if (!all_pages && listed.size() > shown) {
        listed.resize(shown);
        more = true;
      }
      printer.sessions(listed, more);
    } else if (*revoke) {
      once(
          [&](SteadyClock::time_point deadline) {
            printer.revoked(key, client.revoke(key, flags.ns, deadline));
          },
          /*repeat_safe=*/false);
    } else if (*run || *elect) {
      client::Client keeping(options);
      // elect is run with a campaign for the grant (session-bound, exclusive).
      RunOptions run_options;
      run_options.key = key;
      run_options.ns = flags.ns;
      run_options.owner = owner;
      run_options.ttl = duration_flag(ttl, "--ttl");
      run_options.lock_delay = duration_flag(lock_delay, "--lock-delay");
      run_options.session_bound = *elect || lease == "session";
      run_options.wait = duration_flag(wait, "--wait");
      run_options.mode = shared ? HoldMode::kShared : HoldMode::kExclusive;
      run_options.permits = permits;
      if (*elect) run_options.leader_value = value;
      if (!stop_margin.empty()) {
        run_options.stop_margin = client::parse_duration(stop_margin, "--stop-margin");
      }
      if (!kill_grace.empty()) {
        run_options.kill_grace = client::parse_duration(kill_grace, "--kill-grace");
      }
      run_options.command = command;
      run_options.state = state_of;
      run_options.terminal = terminal;
      // Report an unreachable server before opening the session: the library's own retries,
      // which the session needs for its keepalives, are silent.
      once([&](SteadyClock::time_point deadline) {
        try {
          if (*elect) {
            client.leader(key, flags.ns, deadline);
          } else if (permits > 0) {
            client.semaphore(key, flags.ns, deadline);
          } else {
            client.holders(key, flags.ns, deadline);
          }
        } catch (const UnavailableError&) {
          throw;
        } catch (const ResourceExhaustedError&) {
          throw;
        } catch (const std::exception&) {
          // Reachable; the session and the acquire report what is wrong with the request.
        }
      });
      return run_locked(keeping, run_options, err);
    } else if (*watch_cmd) {
      const WatchOptions watch_options{.target = watch_key->count() > 0 ? key : prefix,
                                       .prefix = watch_key->count() == 0,
                                       .ns = flags.ns,
                                       .json = flags.json};
      if (!flags.json && terminal) {
        err << "dlock: watching " << (watch_options.prefix ? "prefix " : "")
            << printable(watch_options.target) << " (Ctrl-C to stop)\n";
      }
      client::Client watching(one_attempt(options));
      return until_interrupted(
          [&](const std::stop_token& stop) {
            follow_watch(watching, watch_options, out, err, stop,
                         [](milliseconds delay) { std::this_thread::sleep_for(delay); });
          },
          out);
    } else if (*leader) {
      client::Client watching(options);
      if (watch) return watch_until_interrupted(watching, key, flags.ns, printer, out);
      once([&](SteadyClock::time_point deadline) {
        printer.leader(key, client.leader(key, flags.ns, deadline));
      });
    }
  } catch (...) {
    return report(std::current_exception(), err);
  }
  return kExitOk;
}

}  // namespace dlock::cli
