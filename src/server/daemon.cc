#include "server/daemon.h"

#include <pthread.h>
#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>

#include "core/lock_service.h"
#include "dlock/errors.h"
#include "server/api.h"
#include "server/http_server.h"
#include "server/telemetry.h"
#include "store/factory.h"

namespace dlock::server {
namespace {

namespace asio = boost::asio;

void set_hangup_blocked(bool blocked) {
  sigset_t hangup;
  sigemptyset(&hangup);
  sigaddset(&hangup, SIGHUP);
  pthread_sigmask(blocked ? SIG_BLOCK : SIG_UNBLOCK, &hangup, nullptr);
}

// Graceful shutdown: stop accepting, answer waiters 503, then wait (bounded) for in-flight
// requests before stopping the loop. Lives on run_dlockd's stack for the whole run.
class Drainer {
 public:
  Drainer(asio::io_context& io, HttpServer& http, core::LockService& service, Api& api)
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
  HttpServer& http_;
  core::LockService& service_;
  Api& api_;
  asio::steady_timer timer_;
  std::chrono::steady_clock::time_point deadline_;
};

core::ServiceOptions service_options(const ServerConfig& config) {
  core::ServiceOptions options;
  options.workers = config.workers;
  options.max_wait = config.max_wait;
  options.max_waiters = config.max_waiters;
  options.max_sessions = config.max_sessions;
  // Per principal only with authentication (C6): otherwise every session is the one principal
  // "", and the global cap is the limit, as before.
  if (config.auth_enabled()) options.max_sessions_per_principal = config.max_sessions_per_principal;
  return options;
}

// Tells supervisors and tests where we listen (port 0 works): written whole, then renamed.
void write_ready_file(const std::string& path, const std::string& address) {
  if (path.empty()) return;
  const std::string temporary = path + ".tmp";
  std::ofstream(temporary) << address << "\n";
  std::rename(temporary.c_str(), path.c_str());
}

// Serves on `backend` until a signal has drained the server.
int serve(const ServerConfig& config, Backend& backend) {
  // Before the io_context: connections destroyed with it still update the counters it keeps.
  Telemetry telemetry(std::string(backend.backend_id()), config.max_wait);
  asio::io_context io;
  // Installed before anything listens, so that every signal from then on is taken by the loop
  // once it runs (SIGHUP, held since main, included).
  asio::signal_set signals(io, SIGINT, SIGTERM);
  asio::signal_set hangup(io, SIGHUP);
  const auto cap = [](std::size_t value) { return static_cast<double>(value); };
  telemetry.set_limits({{"server.max.sessions", cap(config.max_sessions)},
                        {"server.max.waiters", cap(config.max_waiters)},
                        {"server.max.connections", cap(config.max_connections)},
                        {"server.max.unsent.bytes", cap(config.max_unsent_bytes)}});
  core::LockService service(backend, io, service_options(config), telemetry);
  std::unique_ptr<Api> loaded;
  try {
    loaded = std::make_unique<Api>(service, telemetry, config);
  } catch (const std::exception& error) {  // the tokens file, or a clash with admin.token
    std::fprintf(stderr, "dlockd: %s\n", error.what());
    return kExitUsage;
  }
  Api& api = *loaded;
  std::unique_ptr<HttpServer> http;
  try {
    http = std::make_unique<HttpServer>(io, config.listen, config, telemetry.counters(),
                                        Api::probe_routes(),
                                        [&api](Request&& request, const Peer& peer, Reply reply) {
                                          api.handle(std::move(request), std::move(reply), peer);
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
  log_event("info", "listening",
            {{"address", address},
             {"backend", backend.backend_id()},
             {"admin_enabled", config.admin_enabled},
             {"auth", config.auth_enabled()}});
  write_ready_file(config.ready_file, address);
  Drainer drainer(io, *http, service, api);
  signals.async_wait([&](const boost::system::error_code& error, int signal) {
    if (error) return;
    log_event("info", "shutdown", {{"signal", signal}});
    drainer.start();
  });
  // SIGHUP reloads the tokens file and takes away what it no longer allows: a removed
  // principal's waiters and sessions, grants where a principal may no longer lock (C6,
  // ApiAuth::reload). One that came while dlockd started is delivered when it is unblocked here,
  // and reloads once the loop runs.
  std::function<void()> on_hangup = [&] {
    hangup.async_wait([&](const boost::system::error_code& error, int) {
      if (error) return;
      api.reload_tokens();
      on_hangup();
    });
  };
  on_hangup();
  set_hangup_blocked(false);
  io.run();
  set_hangup_blocked(true);  // held again while the store closes: the handler goes with `hangup`
  return 0;
}

}  // namespace

void hold_hangups() { set_hangup_blocked(true); }

void release_hangups() { set_hangup_blocked(false); }

int run_dlockd(const ServerConfig& config) {
  set_log_level(config.log_level);
  BackendPtr backend;
  try {
    backend = store::make_backend(config.store);
  } catch (const InvalidArgumentError& error) {
    std::fprintf(stderr, "dlockd: %s\n", error.what());
    return kExitUsage;
  } catch (const std::exception& error) {
    log_event("error", "backend_unavailable",
              {{"backend", config.store.backend}, {"message", error.what()}});
    return kExitUnavailable;
  }
  const int status = serve(config, *backend);
  backend.reset();
  if (status == 0) log_event("info", "stopped");
  return status;
}

}  // namespace dlock::server
