#pragma once

// A real PostgreSQL for tests: initdb into a temp dir, a free loopback port, run as an
// unprivileged user when the tests run as root, torn down (process and files) on destruction.
// Optionally with ssl=on and a server certificate from a CA made at test time
// (tests/support/test_certs.h), for TLS to the backend (C6: sslmode=verify-full in the URL).

#include <memory>
#include <optional>
#include <string>

#include "support/subprocess.h"

namespace dlock::testing {

struct PostgresOptions {
  bool tls = false;  // ssl=on, certificate for 127.0.0.1 and localhost signed by ca_file()
};

class PostgresServer {
 public:
  explicit PostgresServer(PostgresOptions options = {});
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;
  ~PostgresServer();

  int port() const { return port_; }
  // With tls: the CA that signed the server's certificate (PEM), for sslrootcert.
  const std::string& ca_file() const { return ca_file_; }
  // A libpq URL for `database` on this server (user "dlock", trust auth on loopback).
  std::string url(const std::string& database = "postgres") const;
  // CREATE DATABASE if it does not exist yet.
  void ensure_database(const std::string& database);

  // Immediate shutdown, as after a crash (SIGQUIT to the postmaster), and start again on the
  // same port and data directory.
  void crash();
  void start();
  bool running();

  // Physical backup and restore: pg_basebackup of the running server into `dir` (WAL included),
  // and later, the server stopped (fast shutdown), its data directory replaced by that copy and
  // started again on the same port: PostgreSQL recovers to the end of the backup, so every
  // write after it is gone, as after restoring a base backup.
  void base_backup(const std::string& dir);
  void restore_base_backup(const std::string& dir);

 private:
  SubprocessOptions as_postgres_user(std::vector<std::string> argv) const;

  void make_certificates();

  PostgresOptions options_;
  std::string ca_file_;
  std::string server_cert_file_;
  std::string server_key_file_;
  std::string bin_dir_;
  std::string root_dir_;
  std::string data_dir_;
  int port_ = 0;
  std::optional<uid_t> uid_;
  std::optional<gid_t> gid_;
  std::unique_ptr<Subprocess> postmaster_;
};

}  // namespace dlock::testing
