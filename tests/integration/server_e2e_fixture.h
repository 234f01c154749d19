#pragma once

// The fixture of the end-to-end suite ServerEndToEnd (contract C3), shared by its three files:
// server_e2e_test.cc (the routes and their error codes), server_e2e_waiting_test.cc (concurrency,
// waiting, hand-over, expiry) and server_e2e_lifecycle_test.cc (several servers, shutdown, crash,
// backend outage). One test binary, so every case runs against a real dlockd on every backend.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/json.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/dlockd_backends.h"
#include "support/dlockd_process.h"

namespace dlock::e2e {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::DlockdOptions;
using testing::DlockdProcess;
using testing::HttpResult;
// admin.token needs 32+ characters, 8+ distinct (ADR-0016).
inline constexpr const char* kAdminToken = "e2e-admin-token-0123456789abcdefgh";
namespace json = boost::json;

class ServerEndToEnd : public ::testing::TestWithParam<std::string> {
 protected:
  DlockdOptions options(std::vector<std::string> extra = {}) {
    DlockdOptions result = testing::dlockd_options(GetParam(), "dlock_e2e");
    result.extra_args = std::move(extra);
    return result;
  }

  void SetUp() override { server_ = std::make_unique<DlockdProcess>(options(admin_args())); }

  static std::vector<std::string> admin_args() {
    return {"--admin-enabled", "true", "--admin-token", kAdminToken};
  }

  HttpResult call(const std::string& method, const std::string& target,
                  const std::string& body = "",
                  const std::map<std::string, std::string>& headers = {},
                  DlockdProcess* server = nullptr) {
    return testing::http_call((server ? server : server_.get())->address(), method, target, body,
                              headers);
  }

  std::string open_session(const std::string& owner, int ttl_ms = 60000,
                           DlockdProcess* server = nullptr) {
    const auto result =
        call("POST", "/v1/sessions",
             json::serialize(json::object{{"owner", owner}, {"ttl_ms", ttl_ms}}), {}, server);
    EXPECT_EQ(result.status, 201) << result.body;
    return std::string(result.json.at("session_id").as_string());
  }

  // A key unique to this test and run, percent-encoded as one path segment.
  std::string fresh_key() {
    static std::atomic<int> counter{0};
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '-');  // "Name/pg" would be two segments
    return name + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  }

  HttpResult acquire(const std::string& key, const std::string& session, int ttl_ms = 30000,
                     int wait_ms = 0, DlockdProcess* server = nullptr) {
    return call("POST", "/v1/locks/" + key + "/acquire",
                json::serialize(json::object{
                    {"session_id", session}, {"ttl_ms", ttl_ms}, {"wait_ms", wait_ms}}),
                {}, server);
  }

  HttpResult release(const std::string& key, const std::string& session, std::uint64_t token,
                     DlockdProcess* server = nullptr) {
    return call(
        "DELETE",
        "/v1/locks/" + key + "?session_id=" + session + "&fencing_token=" + std::to_string(token),
        "", {}, server);
  }

  static std::uint64_t token_of(const HttpResult& result) {
    return result.json.at("fencing_token").to_number<std::uint64_t>();
  }

  // Waits until /metrics shows `value` for the dlock_waiters gauge.
  bool wait_for_waiters(int value, DlockdProcess* server = nullptr) {
    return wait_for_metric("dlock_waiters", value, server);
  }

  // Waits until /metrics shows `value` for `name`{backend=...}. A backend attempt is counted once
  // it has ended (C4), so a count of attempts seen has none of them in flight.
  bool wait_for_metric(const std::string& name, int value, DlockdProcess* server = nullptr) {
    const std::string line =
        name + "{backend=\"" + GetParam() + "\"} " + std::to_string(value) + "\n";
    return testing::wait_for(
        [&] {
          return call("GET", "/metrics", "", {}, server).body.find(line) != std::string::npos;
        },
        seconds(10));
  }

  std::unique_ptr<DlockdProcess> server_;
};

}  // namespace dlock::e2e
