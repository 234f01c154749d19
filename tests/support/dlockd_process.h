#pragma once

// A real dlockd for the end-to-end tests, the safety scenarios and the bench: started on a free
// port, killed and reaped on destruction, restartable on the same storage. Plus a small
// synchronous HTTP client to talk to it.

#include <sys/types.h>

#include <boost/json/value.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/subprocess.h"

namespace dlock::testing {

struct DlockdOptions {
  std::string backend = "sqlite";
  std::string sqlite_path;  // default: dlock.db in `dir`
  std::string pg_url;
  std::string etcd_endpoints;
  std::vector<std::string> extra_args;  // e.g. {"--admin-enabled", "true"}
  // Where it listens. Port 0 (the default): the kernel picks one and the ready file reports it;
  // ready = listening. fixed_port: a free port chosen once and kept across kill9() / start(), so
  // that clients (e.g. payout executors) keep their --server; ready = /readyz answers 200.
  std::string listen_host = "127.0.0.1";
  // A listen_host outside 127/8 gets --server-insecure true unless this is false (the tests of
  // C6's safe default for non-loopback addresses).
  bool insecure_off_loopback = true;
  bool fixed_port = false;
  // A command prefix, e.g. "ip netns exec NS" (tests/support/netns.h), and extra environment
  // ("NAME=value", e.g. a preloaded fault library).
  std::vector<std::string> wrapper;
  std::vector<std::string> env;
  std::string log_level = "debug";
  // When >= 0, dlockd's stdout (its JSON log) goes to this descriptor, not to dlockd.log
  // (SubprocessOptions::stdout_fd).
  int stdout_fd = -1;
  std::string binary = DLOCK_DLOCKD_PATH;
  // Holds dlockd.log (and the default sqlite file). Empty: a fresh temporary directory, removed
  // on destruction; given: left in place.
  std::string dir;
};

// One dlockd launcher for the integration tests, the safety tests and the bench.
class DlockdProcess {
 public:
  explicit DlockdProcess(DlockdOptions options);
  DlockdProcess(const DlockdProcess&) = delete;
  DlockdProcess& operator=(const DlockdProcess&) = delete;
  ~DlockdProcess();

  // "HOST:PORT"
  const std::string& address() const { return address_; }
  std::string url() const { return "http://" + address_; }
  Subprocess& process() { return *process_; }
  pid_t pid() const { return process_->pid(); }
  const std::string& log_path() const { return log_path_; }
  // The options it was started with (the sqlite path filled in), to start another on the same
  // storage.
  const DlockdOptions& options() const { return options_; }
  const std::string& sqlite_path() const { return options_.sqlite_path; }

  // SIGKILL and reap.
  void kill9();
  // Starts again on the same storage (and, with fixed_port, the same address); waits until
  // ready. Throws std::runtime_error with the log when it does not get there within 30 s.
  void start();

 private:
  DlockdOptions options_;
  std::string dir_;
  bool own_dir_ = false;
  int port_ = 0;
  std::string log_path_;
  std::string address_;
  std::unique_ptr<Subprocess> process_;
};

struct HttpResult {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
  // The parsed body (null when empty or not JSON).
  boost::json::value json;
  std::string error_code() const;  // body.error.code, or ""
};

// One request on a fresh connection; throws std::runtime_error when the server cannot be
// reached ("connect ...": nothing was sent) or the call does not end within `timeout`.
HttpResult http_call(const std::string& address, const std::string& method,
                     const std::string& target, const std::string& body = "",
                     const std::map<std::string, std::string>& headers = {},
                     std::chrono::milliseconds timeout = std::chrono::minutes(5));

// The acquires (and campaigns) waiting on the dlockd at `address`: its dlock_waiters gauge, or
// -1 when it cannot be read. For a test that must act once a request is queued.
long waiting_acquires(const std::string& address);

}  // namespace dlock::testing
