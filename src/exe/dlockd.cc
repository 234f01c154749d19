// dlockd: the dlock server. Configuration (C5), then the store, the lock service and the HTTP
// front end; SIGTERM/SIGINT shut it down gracefully.
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <thread>

#include "core/lock_service.h"
#include "server/api.h"
#include "server/config.h"
#include "server/http_server.h"
#include "server/telemetry.h"
#include "store/factory.h"

#ifdef DLOCK_WITH_ETCD
#include "exe/etcd_raise_revision.h"
#endif

namespace {

namespace asio = boost::asio;
using namespace dlock;

// sysexits(3)
constexpr int kExitUsage = 64;
constexpr int kExitUnavailable = 69;

// Graceful shutdown: stop accepting, answer waiters 503, then wait (bounded) for in-flight
// requests before stopping the loop. Lives on main's stack for the whole run.
class Drainer {
 public:
  Drainer(asio::io_context& io, server::HttpServer& http, core::LockService& service,
          server::Api& api)
      : io_(io), http_(http), service_(service), api_(api), timer_(io) {}

  void start() {
    api_.set_ready(false);
    http_.stop_accepting();
    service_.shutdown();
    deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    poll();
  }

 private:
  void poll() {
    if (http_.in_flight() == 0 || std::chrono::steady_clock::now() >= deadline_) {
      io_.stop();
      return;
    }
    timer_.expires_after(std::chrono::milliseconds(20));
    timer_.async_wait([this](auto) { poll(); });
  }

  asio::io_context& io_;
  server::HttpServer& http_;
  core::LockService& service_;
  server::Api& api_;
  asio::steady_timer timer_;
  std::chrono::steady_clock::time_point deadline_;
};

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

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // a closed stdout or peer is an error to handle, not a death
  server::ServerConfig config;
  try {
    const auto parsed = server::load_config(std::vector<std::string>(argv + 1, argv + argc));
    if (parsed.help) {
      std::fputs(server::help_text().c_str(), stdout);
      return 0;
    }
    config = parsed.config;
    if (parsed.etcd_raise_revision_to > 0) {
      server::set_log_level(config.log_level);
      return raise_etcd_revision(config, parsed.etcd_raise_revision_to);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dlockd: %s\n", error.what());
    return kExitUsage;
  }
  server::set_log_level(config.log_level);

  BackendPtr backend;
  try {
    backend = store::make_backend(config.store);
  } catch (const InvalidArgumentError& error) {
    std::fprintf(stderr, "dlockd: %s\n", error.what());
    return kExitUsage;
  } catch (const std::exception& error) {
    server::log_event("error", "backend_unavailable",
                      {{"backend", config.store.backend}, {"message", error.what()}});
    return kExitUnavailable;
  }

  asio::io_context io;
  server::Telemetry telemetry(std::string(backend->backend_id()));
  core::ServiceOptions options;
  options.workers = config.workers;
  options.max_wait = config.max_wait;
  options.max_waiters = config.max_waiters;
  options.max_sessions = config.max_sessions;
  int status = 0;
  {
    core::LockService service(*backend, io, options, telemetry);
    server::Api api(service, telemetry, config);
    std::unique_ptr<server::HttpServer> http;
    try {
      http = std::make_unique<server::HttpServer>(
          io, config.listen, config, [&api](server::Request&& request, server::Reply reply) {
            api.handle(std::move(request), std::move(reply));
          });
    } catch (const std::exception& error) {
      std::fprintf(stderr, "dlockd: %s\n", error.what());
      return kExitUnavailable;
    }
    http->start();
    const auto endpoint = http->local_endpoint();
    const std::string address =
        endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
    api.set_ready(true);
    server::log_event("info", "listening",
                      {{"address", address},
                       {"backend", backend->backend_id()},
                       {"admin_enabled", config.admin_enabled}});
    if (!config.ready_file.empty()) {
      const std::string temporary = config.ready_file + ".tmp";
      std::ofstream(temporary) << address << "\n";
      std::rename(temporary.c_str(), config.ready_file.c_str());
    }
    Drainer drainer(io, *http, service, api);
    asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code& error, int signal) {
      if (error) return;
      server::log_event("info", "shutdown", {{"signal", signal}});
      drainer.start();
    });
    io.run();
  }
  backend.reset();
  server::log_event("info", "stopped");
  return status;
}
