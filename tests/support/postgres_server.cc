#include "support/postgres_server.h"

#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "support/test_certs.h"

namespace dlock::testing {
namespace {

std::string find_bin_dir() {
  if (const char* dir = std::getenv("DLOCK_PG_BIN_DIR")) return dir;
  for (const char* version : {"15", "16", "17", "14", "13"}) {
    const std::string dir = std::string("/usr/lib/postgresql/") + version + "/bin";
    if (std::filesystem::exists(dir + "/postgres")) return dir;
  }
  throw std::runtime_error("PostgreSQL server binaries not found (install postgresql-15)");
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

}  // namespace

PostgresServer::PostgresServer(PostgresOptions options)
    : options_(options), bin_dir_(find_bin_dir()) {
  root_dir_ = make_temp_dir("dlock-pg");
  data_dir_ = root_dir_ + "/data";
  if (geteuid() == 0) {
    // PostgreSQL refuses to run as root: run it as the always-present unprivileged "nobody".
    const passwd* nobody = getpwnam("nobody");
    if (nobody == nullptr) throw std::runtime_error("user nobody not found");
    uid_ = nobody->pw_uid;
    gid_ = nobody->pw_gid;
    if (chown(root_dir_.c_str(), *uid_, *gid_) != 0) {
      throw std::runtime_error("chown " + root_dir_ + " failed");
    }
  }
  const int status = run_command(
      as_postgres_user({bin_dir_ + "/initdb", "-D", data_dir_, "-U", "dlock", "--auth=trust", "-E",
                        "UTF8", "--no-sync", "--no-instructions"}),
      std::chrono::seconds(120));
  if (status != 0) {
    throw std::runtime_error("initdb failed (" + std::to_string(status) +
                             "): " + read_file(root_dir_ + "/postgres.log"));
  }
  if (options_.tls) make_certificates();
  port_ = free_loopback_port();
  start();
}

void PostgresServer::make_certificates() {
  const std::string dir = root_dir_ + "/tls";
  std::filesystem::create_directory(dir);
  const auto ca = make_test_ca(dir, "ca");
  const auto server = make_server_cert(ca, dir, "server");
  ca_file_ = ca.cert_file;
  // PostgreSQL reads its key as its own user and refuses one others can read (0600).
  for (const auto& file : {server.cert_file, server.key_file}) {
    if (uid_ && chown(file.c_str(), *uid_, *gid_) != 0) {
      throw std::runtime_error("chown " + file + " failed");
    }
  }
  server_cert_file_ = server.cert_file;
  server_key_file_ = server.key_file;
}

PostgresServer::~PostgresServer() {
  if (postmaster_ && postmaster_->running()) {
    postmaster_->signal(SIGINT);  // fast shutdown
    try {
      postmaster_->wait(std::chrono::seconds(20));
    } catch (...) {
      postmaster_->kill_now();
    }
  }
  postmaster_.reset();
  std::error_code ignored;
  std::filesystem::remove_all(root_dir_, ignored);
}

SubprocessOptions PostgresServer::as_postgres_user(std::vector<std::string> argv) const {
  SubprocessOptions options;
  options.argv = std::move(argv);
  options.uid = uid_;
  options.gid = gid_;
  options.log_path = root_dir_ + "/postgres.log";
  options.env = {"LC_ALL=C"};
  return options;
}

std::string PostgresServer::url(const std::string& database) const {
  return "postgresql://dlock@127.0.0.1:" + std::to_string(port_) + "/" + database;
}

void PostgresServer::start() {
  // fsync=off: these are disposable test clusters; durability is tested where it matters.
  std::vector<std::string> argv = {bin_dir_ + "/postgres",
                                   "-D",
                                   data_dir_,
                                   "-p",
                                   std::to_string(port_),
                                   "-c",
                                   "listen_addresses=127.0.0.1",
                                   "-c",
                                   "unix_socket_directories=",
                                   "-c",
                                   "fsync=off",
                                   "-c",
                                   "max_connections=200",
                                   "-c",
                                   "shared_buffers=32MB"};
  if (options_.tls) {
    argv.insert(argv.end(), {"-c", "ssl=on", "-c", "ssl_cert_file=" + server_cert_file_, "-c",
                             "ssl_key_file=" + server_key_file_});
  }
  postmaster_ = std::make_unique<Subprocess>(as_postgres_user(std::move(argv)));
  const std::string conninfo = url() + "?connect_timeout=2";
  const bool ready =
      wait_for([&] { return !postmaster_->running() || PQping(conninfo.c_str()) == PQPING_OK; },
               std::chrono::seconds(60), std::chrono::milliseconds(20));
  if (!ready || !postmaster_->running()) {
    throw std::runtime_error("postgres did not start: " + read_file(root_dir_ + "/postgres.log"));
  }
}

void PostgresServer::crash() {
  postmaster_->signal(SIGQUIT);  // immediate shutdown: no checkpoint, as after a crash
  postmaster_->wait(std::chrono::seconds(30));
}

bool PostgresServer::running() { return postmaster_ && postmaster_->running(); }

void PostgresServer::ensure_database(const std::string& database) {
  PGconn* conn = PQconnectdb(url().c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    const std::string message = PQerrorMessage(conn);
    PQfinish(conn);
    throw std::runtime_error("cannot connect to test postgres: " + message);
  }
  PGresult* exists =
      PQexec(conn, ("SELECT 1 FROM pg_database WHERE datname = '" + database + "'").c_str());
  const bool found = PQntuples(exists) == 1;
  PQclear(exists);
  if (!found) PQclear(PQexec(conn, ("CREATE DATABASE \"" + database + "\"").c_str()));
  PQfinish(conn);
}

}  // namespace dlock::testing

namespace dlock::testing {

void PostgresServer::base_backup(const std::string& dir) {
  // Written by the server's user, so the copy can become its data directory as it is.
  if (uid_ && chown(std::filesystem::path(dir).parent_path().c_str(), *uid_, *gid_) != 0) {
    throw std::runtime_error("chown of the parent of " + dir + " failed");
  }
  const int status =
      run_command(as_postgres_user({bin_dir_ + "/pg_basebackup", "-D", dir, "-d", url(), "-X",
                                    "stream", "--no-sync", "-c", "fast"}),
                  std::chrono::seconds(120));
  if (status != 0)
    throw std::runtime_error("pg_basebackup failed (" + std::to_string(status) + ")");
}

void PostgresServer::restore_base_backup(const std::string& dir) {
  if (postmaster_ && postmaster_->running()) {
    postmaster_->signal(SIGINT);  // fast shutdown
    postmaster_->wait(std::chrono::seconds(30));
  }
  std::filesystem::remove_all(data_dir_);
  std::filesystem::rename(dir, data_dir_);
  start();
}

}  // namespace dlock::testing
