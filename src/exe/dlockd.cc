// dlockd: the dlock server's main. Parses the configuration (C5) and either runs the one-shot
// etcd revision raise (ADR-0010) or serves (server::run_dlockd, src/server/daemon.cc).
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "auth/tokens_file.h"
#include "dlock_revision.h"
#include "server/config.h"
#include "server/daemon.h"
#include "server/telemetry.h"
#include "server/tls_context.h"

#ifdef DLOCK_WITH_ETCD
#include "exe/etcd_raise_revision.h"
#endif

namespace {

using namespace dlock;
using server::kExitUnavailable;
using server::kExitUsage;

// The one-shot --etcd-raise-revision-to (ADR-0010): no server, just the raise.
int raise_etcd_revision(const server::ServerConfig& config, std::int64_t target) {
#ifdef DLOCK_WITH_ETCD
  try {
    const auto report = exe::raise_etcd_revision(config.store.etcd_endpoints,
                                                 config.store.call_timeout, target, 32, stderr);
    const double seconds = std::chrono::duration<double>(report.elapsed).count();
    std::printf(
        "etcd revision raised from %lld to %lld (target %lld) in %.2f s, %.0f revisions/s\n",
        static_cast<long long>(report.from_revision), static_cast<long long>(report.to_revision),
        static_cast<long long>(target), seconds,
        seconds > 0 ? static_cast<double>(report.to_revision - report.from_revision) / seconds
                    : 0.0);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dlockd: raising the etcd revision failed: %s (run it again)\n",
                 error.what());
    return kExitUnavailable;
  }
#else
  (void)config;
  (void)target;
  std::fprintf(stderr, "dlockd: built without etcd support\n");
  return kExitUsage;
#endif
}

// --check-config's exit status for a configuration that would not start (C5).
constexpr int kExitBadConfig = 2;

// What start-up checks beyond the values, before it opens the store: the TLS certificate and
// key (and client CA) load, the tokens file parses. Throws naming the file.
void check_files(const server::ServerConfig& config) {
  if (config.tls_enabled()) server::make_tls_context(config);
  if (config.auth_enabled()) auth::load_tokens_file(config.auth_tokens_file);
}

}  // namespace

int main(int argc, char** argv) {
  // First, before anything starts a thread: a SIGHUP while dlockd starts is held, then one
  // reload once it serves, instead of its default action, death (server/daemon.h).
  server::hold_hangups();
  std::signal(SIGPIPE, SIG_IGN);  // a closed stdout or peer is an error to handle, not a death
  if (argc == 2 && std::string(argv[1]) == "--version") {
    // The build's version and revision (src/exe/CMakeLists.txt).
    std::printf("dlockd %s (revision %s)\n", DLOCK_VERSION, DLOCK_REVISION);
    return 0;
  }
  server::set_build_info(DLOCK_VERSION, DLOCK_REVISION);
  server::ServerConfig config;
  const std::vector<std::string> args(argv + 1, argv + argc);
  const bool checking = std::find(args.begin(), args.end(), "--check-config") != args.end();
  try {
    const auto parsed = server::load_config(args);
    if (parsed.help) {
      std::fputs(server::help_text().c_str(), stdout);
      return 0;
    }
    for (const std::string& warning : parsed.warnings) {
      std::fprintf(stderr, "dlockd: warning: %s\n", warning.c_str());
    }
    if (parsed.print_config) {
      std::fputs(server::print_config(parsed).c_str(), stdout);
      return 0;
    }
    if (parsed.check_config) {
      check_files(parsed.config);
      std::printf("dlockd: configuration OK (lock.backend %s, server.listen %s, TLS %s, auth %s)\n",
                  parsed.config.store.backend.c_str(), parsed.config.listen.c_str(),
                  parsed.config.tls_enabled() ? "on" : "off",
                  parsed.config.auth_enabled() ? "on" : "off");
      return 0;
    }
    config = parsed.config;
    if (parsed.etcd_raise_revision_to > 0) {
      server::set_log_level(config.log_level);
      server::release_hangups();  // no server to reload: SIGHUP ends the one-shot as before
      return raise_etcd_revision(config, parsed.etcd_raise_revision_to);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dlockd: %s\n", error.what());
    return checking ? kExitBadConfig : kExitUsage;
  }
  return server::run_dlockd(config);
}
