#include "cli/cli.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <iostream>
#include <optional>
#include <ostream>
#include <thread>

#include "cli/command_line.h"
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

// One run of a subcommand that talks to the server: the client, the retries the user sees
// (server_retry.h) and the output. act() runs the subcommand and returns the exit status;
// errors propagate (run_cli maps them with report()).
class Invocation {
 public:
  Invocation(const CommandLine& line, std::ostream& out, std::ostream& err)
      : args_(line.args),
        given_(line.given),
        out_(out),
        err_(err),
        printer_(out, args_.flags.json),
        options_(client_options(args_.flags)),
        // One-shot calls: one attempt each, retried here where the user sees it (server_retry.h).
        client_(one_attempt(options_)),
        terminal_(stderr_is_terminal(err)),
        retry_(err, terminal_, options_.retry_budget) {
    retry_.set_servers(client_.servers());
  }

  int act() {
    if (*given_.session_open || *given_.session_keepalive || *given_.session_show ||
        *given_.session_close) {
      return session_command();
    }
    if (*given_.acquire) return acquire();
    if (*given_.extend || *given_.release) return extend_or_release();
    if (*given_.get) {
      once([&](SteadyClock::time_point deadline) {
        const auto state = client_.state(args_.key, args_.flags.ns, deadline);
        printer_.lock(args_.key, state.holders, state.waiters);
      });
    } else if (*given_.semaphore) {
      once([&](SteadyClock::time_point deadline) {
        printer_.semaphore(client_.semaphore(args_.key, args_.flags.ns, deadline));
      });
    } else if (*given_.list) {
      return list();
    } else if (*given_.sessions) {
      return sessions();
    } else if (*given_.revoke) {
      once(
          [&](SteadyClock::time_point deadline) {
            printer_.revoked(args_.key, client_.revoke(args_.key, args_.flags.ns, deadline));
          },
          /*repeat_safe=*/false);
    } else if (*given_.run || *given_.elect) {
      return run();
    } else if (*given_.watch) {
      return watch();
    } else if (*given_.leader) {
      client::Client watching(options_);
      if (args_.watch) {
        return watch_until_interrupted(watching, args_.key, args_.flags.ns, printer_, out_);
      }
      once([&](SteadyClock::time_point deadline) {
        printer_.leader(args_.key, client_.leader(args_.key, args_.flags.ns, deadline));
      });
    }
    return kExitOk;
  }

 private:
  // `call(deadline)` under the retries of ServerRetry::run.
  template <class Call>
  void once(Call call, bool repeat_safe = true) {
    retry_.run([&call](SteadyClock::time_point deadline) { call(deadline); }, repeat_safe);
  }

  // Who holds the key now and who waits, for the waiting line and "not acquired": one quick read.
  client::KeyState state_of() {
    const SteadyClock::time_point deadline = SteadyClock::now() + std::chrono::seconds(2);
    if (args_.permits == 0) return client_.state(args_.key, args_.flags.ns, deadline);
    client::SemaphoreInfo semaphore = client_.semaphore(args_.key, args_.flags.ns, deadline);
    return client::KeyState{std::move(semaphore.holders), std::move(semaphore.waiters)};
  }
  WaitLine::Lookup state_lookup() {
    return [this] { return state_of(); };
  }

  int session_command() {
    const std::string& session_id = args_.session_id;
    if (*given_.session_open) {
      once(
          [&](SteadyClock::time_point deadline) {
            printer_.session(client_.open_session(args_.owner, duration_flag(args_.ttl, "--ttl"),
                                                  deadline,
                                                  duration_flag(args_.lock_delay, "--lock-delay")));
          },
          /*repeat_safe=*/false);
    } else if (*given_.session_keepalive) {
      once([&](SteadyClock::time_point deadline) {
        printer_.keepalive(client_.keepalive(session_id, deadline));
      });
    } else if (*given_.session_show) {
      once([&](SteadyClock::time_point deadline) {
        printer_.session_detail(client_.session_detail(session_id, deadline));
      });
    } else {
      once([&](SteadyClock::time_point deadline) { client_.close_session(session_id, deadline); },
           /*repeat_safe=*/false);
      printer_.session_closed(session_id);
    }
    return kExitOk;
  }

  int acquire() {
    const std::string& key = args_.key;
    const milliseconds wait_ms = duration_flag(args_.wait, "--wait");
    const milliseconds ttl_ms = duration_flag(args_.ttl, "--ttl");
    const SteadyClock::time_point started = SteadyClock::now();
    std::optional<LockHandle> handle;
    once([&](SteadyClock::time_point deadline) {
      // Per attempt: a failure clears it before the retry's line is drawn.
      std::optional<WaitLine> line;
      if (terminal_ && wait_ms.count() > 0) {
        line.emplace(err_, key, args_.session_id, state_lookup(), started);
      }
      // A retry after a failure asks only for what is left of the wait.
      const milliseconds left = std::max(
          milliseconds(0), wait_ms - std::chrono::ceil<milliseconds>(SteadyClock::now() - started));
      handle = args_.permits > 0
                   ? client_.acquire_permit(key, args_.session_id, args_.permits, ttl_ms, left,
                                            args_.flags.ns, deadline + left)
                   : client_.acquire(key, args_.session_id, ttl_ms, left, args_.flags.ns,
                                     deadline + left,
                                     args_.shared ? HoldMode::kShared : HoldMode::kExclusive);
    });
    if (!handle) {
      std::vector<LockInfo> holders;
      try {
        holders = state_of().holders;
      } catch (const std::exception&) {
        // Not named then.
      }
      if (args_.flags.json) {
        printer_.held(key, wait_ms, holders);
      } else {
        Printer(err_, false).held(key, wait_ms, holders);
      }
      return kExitNotAcquired;
    }
    printer_.granted(*handle, args_.flags.ns, args_.permits);
    return kExitOk;
  }

  int extend_or_release() {
    const std::string& key = args_.key;
    const FencingToken token = fencing_token_flag(args_.token_text);
    if (*given_.extend) {
      once([&](SteadyClock::time_point deadline) {
        printer_.extended(
            key, client_.extend(key, args_.session_id, token, duration_flag(args_.ttl, "--ttl"),
                                args_.flags.ns, deadline));
      });
      return kExitOk;
    }
    // Not repeated after a lost answer: a second release of a released grant says lock_lost.
    once(
        [&](SteadyClock::time_point deadline) {
          client_.release(key, args_.session_id, token, args_.flags.ns, deadline);
        },
        /*repeat_safe=*/false);
    printer_.released(key, token);
    return kExitOk;
  }

  // Pages of at most 1000 (C3 "Paging"), followed until --limit locks are shown (default 100),
  // or to the end with --all; a page's `next` says whether more follow.
  int list() {
    const std::size_t shown = args_.limit == 0 ? 100 : args_.limit;
    client::LockPage listed;
    std::string after;
    while (true) {
      const std::size_t wanted =
          args_.all_pages ? 1000 : std::min<std::size_t>(1000, shown + 1 - listed.locks.size());
      client::LockPage page;
      once([&](SteadyClock::time_point deadline) {
        page = args_.every_namespace
                   ? client_.list_every_namespace(wanted, after, deadline)
                   : client_.list_page(args_.prefix, wanted, after, args_.flags.ns, deadline);
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
      if (!args_.all_pages && listed.locks.size() > shown) break;
    }
    std::optional<ListCut> cut;
    if (!args_.all_pages && listed.locks.size() > shown) {
      listed.locks.resize(shown);
      cut = ListCut{shown, true};
    }
    printer_.locks(listed, args_.every_namespace, cut);
    return kExitOk;
  }

  // As list: pages followed until --limit sessions (default 100), or to the end with --all.
  int sessions() {
    const std::size_t shown = args_.limit == 0 ? 100 : args_.limit;
    std::vector<client::ListedSession> listed;
    std::string after;
    bool more = false;
    while (true) {
      const std::size_t wanted =
          args_.all_pages ? 1000 : std::min<std::size_t>(1000, shown + 1 - listed.size());
      client::SessionPage page;
      once([&](SteadyClock::time_point deadline) {
        page = client_.list_sessions(args_.owner_filter, args_.principal_filter, wanted, after,
                                     deadline);
      });
      listed.insert(listed.end(), page.sessions.begin(), page.sessions.end());
      if (page.next.empty()) break;
      after = page.next;
      if (!args_.all_pages && listed.size() > shown) break;
    }
    if (!args_.all_pages && listed.size() > shown) {
      listed.resize(shown);
      more = true;
    }
    printer_.sessions(listed, more);
    return kExitOk;
  }

  // run and elect (elect is run with a campaign for the grant: session-bound, exclusive).
  int run() {
    const bool elect = static_cast<bool>(*given_.elect);
    const std::uint32_t permits = args_.permits;
    client::Client keeping(options_);
    RunOptions run_options;
    run_options.key = args_.key;
    run_options.ns = args_.flags.ns;
    run_options.owner = args_.owner;
    run_options.ttl = duration_flag(args_.ttl, "--ttl");
    run_options.lock_delay = duration_flag(args_.lock_delay, "--lock-delay");
    run_options.session_bound = elect || args_.lease == "session";
    run_options.wait = duration_flag(args_.wait, "--wait");
    run_options.mode = args_.shared ? HoldMode::kShared : HoldMode::kExclusive;
    run_options.permits = permits;
    if (elect) run_options.leader_value = args_.value;
    if (!args_.stop_margin.empty()) {
      run_options.stop_margin = client::parse_duration(args_.stop_margin, "--stop-margin");
    }
    if (!args_.kill_grace.empty()) {
      run_options.kill_grace = client::parse_duration(args_.kill_grace, "--kill-grace");
    }
    run_options.command = args_.command;
    run_options.state = state_lookup();
    run_options.terminal = terminal_;
    // Report an unreachable server before opening the session: the library's own retries,
    // which the session needs for its keepalives, are silent.
    once([&](SteadyClock::time_point deadline) {
      try {
        if (elect) {
          client_.leader(args_.key, args_.flags.ns, deadline);
        } else if (permits > 0) {
          client_.semaphore(args_.key, args_.flags.ns, deadline);
        } else {
          client_.holders(args_.key, args_.flags.ns, deadline);
        }
      } catch (const UnavailableError&) {
        throw;
      } catch (const ResourceExhaustedError&) {
        throw;
      } catch (const std::exception&) {
        // Reachable; the session and the acquire report what is wrong with the request.
      }
    });
    return run_locked(keeping, run_options, err_);
  }

  int watch() {
    const bool by_key = given_.watch_key->count() > 0;
    const WatchOptions watch_options{.target = by_key ? args_.key : args_.prefix,
                                     .prefix = !by_key,
                                     .ns = args_.flags.ns,
                                     .json = args_.flags.json};
    if (!args_.flags.json && terminal_) {
      err_ << "dlock: watching " << (watch_options.prefix ? "prefix " : "")
           << printable(watch_options.target) << " (Ctrl-C to stop)\n";
    }
    client::Client watching(one_attempt(options_));
    return until_interrupted(
        [&](const std::stop_token& stop) {
          follow_watch(watching, watch_options, out_, err_, stop,
                       [](milliseconds delay) { std::this_thread::sleep_for(delay); });
        },
        out_);
  }

  const Arguments& args_;
  const Subcommands& given_;
  std::ostream& out_;
  std::ostream& err_;
  Printer printer_;
  const client::ClientOptions options_;
  client::Client client_;
  const bool terminal_;
  ServerRetry retry_;
};

// The subcommands that need no server (completion, token new): their exit status, or
// std::nullopt for any other.
std::optional<int> run_offline(const CommandLine& line, std::ostream& out) {
  if (*line.given.completion) {
    out << completion_script(line.app, line.args.shell);
    return kExitOk;
  }
  if (*line.given.token_new) {
    print_new_token(line.args.principal, line.args.permissions, line.args.flags.json, out);
    return kExitOk;
  }
  return std::nullopt;
}

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CommandLine line;
  if (const auto done = line.parse(argc, argv, out, err)) return *done;
  try {
    if (const auto done = run_offline(line, out)) return *done;
    Invocation invocation(line, out, err);
    return invocation.act();
  } catch (...) {
    return report(std::current_exception(), err);
  }
}

}  // namespace dlock::cli
