// The servers of the client scenario suite (tests/clients/README.md): real dlockd on one
// backend, driven through a pipe by any language's test runner.
//
//   dlock_client_harness sqlite|pg|etcd
//
// Starts the backend (pg and etcd: a real PostgreSQL / etcd on free loopback ports, torn down at
// exit) and on it: the plain servers (two on pg and etcd, sharing one database, for failover;
// one on sqlite), each with the admin route enabled, and one more server that requires bearer
// tokens (a tokens file with a `writer` principal, role lock on every namespace, and a `reader`,
// role read), and one serving HTTPS that requires a client certificate (mTLS; certificates
// made at start-up with the openssl tool). Prints one JSON line on stdout:
//
//   {"backend": "pg", "servers": ["http://127.0.0.1:p0", "http://127.0.0.1:p1"],
//    "auth_server": "http://127.0.0.1:p2", "tls_server": "https://127.0.0.1:p3",
//    "tls": {"ca": PEM, "other_ca": PEM, "client_cert": PEM, "client_key": PEM},
//    "admin_token": "...", "tokens": {"writer": "dlk_...", "reader": "dlk_..."}}
//
// then reads one command a line on stdin and answers each with one JSON line,
// {"ok": true, ...} or {"ok": false, "error": "..."}. SERVER is an index into "servers" or the
// word "auth"; every server keeps its port across stops and starts.
//
//   kill9 SERVER      SIGKILL, as a crash
//   stop SERVER       SIGTERM and wait for the exit, as a service manager does
//   start SERVER      start a stopped server again on the same storage and port; waits until ready
//   restart SERVER    stop + start
//   backend_stop      PostgreSQL crashed (immediate shutdown) / the etcd member killed; not sqlite
//   backend_start     the backend started again; waits until it answers
//   ping              {"ok": true}
//   quit              stops everything and exits 0 (so does EOF on stdin)

#include <signal.h>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "auth/crypto.h"
#include "support/dlockd_backends.h"
#include "support/dlockd_process.h"
#include "support/subprocess.h"
#include "support/test_certs.h"

namespace dlock::testing {
namespace {

struct Tokens {
  std::string admin = auth::random_token();
  std::string writer = auth::random_token();
  std::string reader = auth::random_token();
};

std::string tokens_file_line(const std::string& principal, const std::string& token,
                             const std::string& permissions) {
  return principal + " " + auth::to_hex(auth::sha256(token)) + " " + permissions + "\n";
}

class Harness {
 public:
  explicit Harness(std::string backend)
      : backend_(std::move(backend)), dir_(make_temp_dir("clients")) {
    if (backend_ != "sqlite" && backend_ != "pg" && backend_ != "etcd") {
      throw std::invalid_argument("unknown backend '" + backend_ + "' (sqlite, pg or etcd)");
    }
    const std::string tokens_path = dir_ + "/tokens";
    std::ofstream(tokens_path) << tokens_file_line("writer", tokens_.writer, "lock:*")
                               << tokens_file_line("reader", tokens_.reader, "read:*");
    // Two plain servers share one backend for failover; SQLite is one process's file.
    const int plain = backend_ == "sqlite" ? 1 : 2;
    for (int i = 0; i < plain; ++i) {
      DlockdOptions options = base_options("dlock_clients");
      options.extra_args = {"--admin-enabled", "true", "--admin-token", tokens_.admin};
      servers_.push_back(std::make_unique<DlockdProcess>(options));
    }
    DlockdOptions options = base_options("dlock_clients_auth");
    options.extra_args = {"--auth-tokens-file", tokens_path};
    auth_server_ = std::make_unique<DlockdProcess>(options);
    // HTTPS with client certificates (mTLS). Its port may change on a restart (the ready file
    // reports it; a fixed port's readiness probe speaks clear HTTP): no command restarts it.
    ca_ = make_test_ca(dir_, "ca");
    other_ca_ = make_test_ca(dir_, "other-ca");
    const ServerCert server_cert = make_server_cert(ca_, dir_, "server");
    client_cert_ = make_client_cert(ca_, dir_, "client", "writer");
    DlockdOptions tls = dlockd_options(backend_, "dlock_clients");
    tls.log_level = "info";
    tls.extra_args = {"--tls-cert-file",    server_cert.cert_file,  "--tls-key-file",
                      server_cert.key_file, "--tls-client-ca-file", ca_.cert_file};
    tls_server_ = std::make_unique<DlockdProcess>(tls);
  }

  ~Harness() {
    servers_.clear();
    auth_server_.reset();
    tls_server_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::string hello() const {
    boost::json::array urls;
    for (const auto& server : servers_) urls.emplace_back(server->url());
    return boost::json::serialize(
        boost::json::object{{"backend", backend_},
                            {"servers", urls},
                            {"auth_server", auth_server_->url()},
                            {"tls_server", "https://" + tls_server_->address()},
                            {"tls",
                             {{"ca", ca_.cert_file},
                              {"other_ca", other_ca_.cert_file},
                              {"client_cert", client_cert_.cert_file},
                              {"client_key", client_cert_.key_file}}},
                            {"admin_token", tokens_.admin},
                            {"tokens", {{"writer", tokens_.writer}, {"reader", tokens_.reader}}}});
  }

  // One command line; returns the answer's extra members. Throws for a failed command.
  boost::json::object run(const std::string& line) {
    std::istringstream words(line);
    std::string command, which;
    words >> command >> which;
    if (command == "ping") return {};
    if (command == "backend_stop" || command == "backend_start") {
      backend_control(command == "backend_stop");
      return {};
    }
    DlockdProcess& server = pick(which);
    if (command == "kill9") {
      server.kill9();
    } else if (command == "stop") {
      stop(server);
    } else if (command == "start") {
      if (server.process().running()) throw std::runtime_error("server " + which + " is running");
      server.start();
    } else if (command == "restart") {
      stop(server);
      server.start();
    } else {
      throw std::invalid_argument("unknown command '" + command + "'");
    }
    return {{"server", server.url()}};
  }

 private:
  DlockdOptions base_options(const std::string& pg_database) const {
    DlockdOptions options = dlockd_options(backend_, pg_database);
    options.fixed_port = true;  // clients keep their server list across restarts
    options.log_level = "info";
    return options;
  }

  DlockdProcess& pick(const std::string& which) {
    if (which == "auth") return *auth_server_;
    std::size_t index = 0;
    try {
      index = std::stoul(which);
    } catch (const std::exception&) {
      throw std::invalid_argument("name a server: an index into \"servers\" or \"auth\"");
    }
    if (index >= servers_.size()) throw std::invalid_argument("no server " + which);
    return *servers_[index];
  }

  static void stop(DlockdProcess& server) {
    if (!server.process().running()) return;
    server.process().signal(SIGTERM);
    server.process().wait(std::chrono::seconds(30));
  }

  void backend_control(bool stop_it) {
#ifdef DLOCK_WITH_PG
    if (backend_ == "pg") {
      stop_it ? shared_postgres().crash() : shared_postgres().start();
      return;
    }
#endif
#ifdef DLOCK_WITH_ETCD
    if (backend_ == "etcd") {
      stop_it ? shared_etcd().kill(0) : shared_etcd().start(0);
      return;
    }
#endif
    (void)stop_it;
    throw std::invalid_argument("backend " + backend_ + " cannot be stopped on its own");
  }

  std::string backend_;
  std::string dir_;
  Tokens tokens_;
  std::vector<std::unique_ptr<DlockdProcess>> servers_;
  std::unique_ptr<DlockdProcess> auth_server_;
  TestCa ca_;
  TestCa other_ca_;
  ClientCert client_cert_;
  std::unique_ptr<DlockdProcess> tls_server_;
};

int run_harness(const std::string& backend) {
  // A runner that dies closes the pipe; the write of our answer must not kill us before the
  // destructors stop the servers and the backend.
  signal(SIGPIPE, SIG_IGN);
  Harness harness(backend);
  std::cout << harness.hello() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    if (line == "quit") break;
    boost::json::object answer;
    try {
      answer = harness.run(line);
      answer["ok"] = true;
    } catch (const std::exception& error) {
      answer = {{"ok", false}, {"error", error.what()}};
    }
    std::cout << boost::json::serialize(answer) << std::endl;
  }
  std::cout << R"({"ok": true})" << std::endl;
  return 0;
}

}  // namespace
}  // namespace dlock::testing

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: dlock_client_harness sqlite|pg|etcd (tests/clients/README.md)\n";
    return 64;
  }
  try {
    return dlock::testing::run_harness(argv[1]);
  } catch (const std::exception& error) {
    std::cout << boost::json::serialize(boost::json::object{{"ok", false}, {"error", error.what()}})
              << std::endl;
    std::cerr << "dlock_client_harness: " << error.what() << "\n";
    return 1;
  }
}
