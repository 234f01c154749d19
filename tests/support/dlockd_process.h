#pragma once

// A real dlockd for end-to-end tests: started on a free port (port 0 + ready file), killed and
// reaped on destruction. Plus a small synchronous HTTP client to talk to it.

#include <boost/json/value.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/subprocess.h"

namespace dlock::testing {

struct DlockdOptions {
  std::string backend = "sqlite";
  std::string sqlite_path;  // default: a file in a fresh temp dir
  std::string pg_url;
  std::vector<std::string> extra_args;  // e.g. {"--admin-enabled", "true"}
};

class DlockdProcess {
 public:
  explicit DlockdProcess(DlockdOptions options);
  DlockdProcess(const DlockdProcess&) = delete;
  DlockdProcess& operator=(const DlockdProcess&) = delete;
  ~DlockdProcess();

  // "127.0.0.1:PORT"
  const std::string& address() const { return address_; }
  std::string url() const { return "http://" + address_; }
  Subprocess& process() { return *process_; }
  const std::string& log_path() const { return log_path_; }
  // The options it was started with, to start it again on the same storage.
  const DlockdOptions& options() const { return options_; }

 private:
  DlockdOptions options_;
  std::string dir_;
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
// reached.
HttpResult http_call(const std::string& address, const std::string& method,
                     const std::string& target, const std::string& body = "",
                     const std::map<std::string, std::string>& headers = {});

}  // namespace dlock::testing
