// dlockd's identity settings end to end (contract C6, C5; sqlite: none of this depends on the
// backend): the safe default for non-loopback addresses, admin.token strength and
// admin.token.file, the warning for --admin-token, the throttle on admin.token without a tokens
// file, a tokens file that does not parse, SIGHUP reloads that keep sessions and locks, the
// per-principal quotas for sessions and waiting acquires, and the fields of the audit events.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "auth/crypto.h"
#include "auth/permissions.h"
#include "auth/tokens_file.h"
#include "support/dlockd_process.h"
#include "support/subprocess.h"
#include "support/test_certs.h"

namespace dlock {
namespace {

using std::chrono::milliseconds;
using testing::DlockdOptions;
using testing::DlockdProcess;
using testing::HttpResult;
namespace json = boost::json;

// A string field of a log line, "<none>" when it is absent or not a string.
std::string text_of(const json::object& event, const char* field) {
  const auto* value = event.if_contains(field);
  return value != nullptr && value->is_string() ? std::string(value->as_string()) : "<none>";
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class AuthzConfig : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::make_temp_dir("authz-config"); }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Runs dlockd with `args` until it exits (it must refuse to start): {status, output}.
  std::pair<int, std::string> refused(std::vector<std::string> args) {
    testing::SubprocessOptions options;
    options.argv = {DLOCK_DLOCKD_PATH, "--sqlite-path", dir_ + "/refused.db"};
    options.argv.insert(options.argv.end(), args.begin(), args.end());
    options.log_path = dir_ + "/refused.log";
    std::filesystem::remove(options.log_path);
    const int status = testing::run_command(options, milliseconds(20000));
    return {status, read_all(dir_ + "/refused.log")};
  }

  void write_tokens(const std::vector<std::tuple<std::string, std::string, std::string>>& lines) {
    std::ofstream file(dir_ + "/tokens.tmp");
    for (const auto& [name, token, permissions] : lines) {
      file << auth::tokens_file_line(name, token, auth::parse_permissions(permissions)) << "\n";
    }
    file.close();
    std::filesystem::rename(dir_ + "/tokens.tmp", dir_ + "/tokens");
  }

  void start(std::vector<std::string> extra = {}) {
    DlockdOptions options;
    options.dir = dir_;
    options.log_level = "info";
    options.extra_args = {"--auth-tokens-file", dir_ + "/tokens"};
    options.extra_args.insert(options.extra_args.end(), extra.begin(), extra.end());
    server_ = std::make_unique<DlockdProcess>(options);
  }

  HttpResult call(const std::string& token, const std::string& method, const std::string& target,
                  const json::object& body = {}) {
    return testing::http_call(server_->address(), method, target,
                              body.empty() ? "" : json::serialize(body),
                              {{"Authorization", "Bearer " + token}});
  }

  std::string open_session(const std::string& token) {
    const auto result = call(token, "POST", "/v1/sessions", {{"owner", "app"}});
    EXPECT_EQ(result.status, 201) << result.body;
    return result.status == 201 ? std::string(result.json.at("session_id").as_string()) : "";
  }

  std::string dir_;
  std::unique_ptr<DlockdProcess> server_;
};

TEST_F(AuthzConfig, NonLoopbackListenNeedsTokensAndTlsOrServerInsecure) {
  const auto [status, output] = refused({"--server-listen", "0.0.0.0:0"});
  EXPECT_EQ(status, 64) << output;
  EXPECT_NE(output.find("not a loopback address"), std::string::npos) << output;
  EXPECT_NE(output.find("server.insecure"), std::string::npos) << output;
  EXPECT_NE(output.find("missing auth.tokens.file and TLS"), std::string::npos) << output;
  // A tokens file alone is not enough: TLS is named as missing.
  write_tokens({{"alice", auth::random_token(), "lock:*"}});
  const auto [without_tls, why] =
      refused({"--server-listen", "0.0.0.0:0", "--auth-tokens-file", dir_ + "/tokens"});
  EXPECT_EQ(without_tls, 64) << why;
  EXPECT_NE(why.find("missing TLS"), std::string::npos) << why;
  // Explicitly insecure: serves.
  DlockdOptions options;
  options.dir = dir_;
  options.listen_host = "0.0.0.0";  // the launcher adds --server-insecure true
  DlockdProcess insecure(options);
  EXPECT_EQ(
      testing::http_call("127.0.0.1:" + insecure.address().substr(8), "GET", "/healthz").status,
      200);
}

// C6's safe default met: a tokens file and TLS serve 0.0.0.0 without server.insecure; TLS
// without a tokens file is refused, the error naming what is missing.
TEST_F(AuthzConfig, NonLoopbackListenWithTokensAndTlsStartsWithoutServerInsecure) {
  const auto ca = testing::make_test_ca(dir_, "ca");
  const auto cert = testing::make_server_cert(ca, dir_, "server");
  const std::vector<std::string> tls = {"--tls-cert-file", cert.cert_file, "--tls-key-file",
                                        cert.key_file};
  auto args = tls;
  args.insert(args.begin(), {"--server-listen", "0.0.0.0:0"});
  const auto [status, output] = refused(args);
  EXPECT_EQ(status, 64) << output;
  EXPECT_NE(output.find("missing auth.tokens.file"), std::string::npos) << output;
  EXPECT_EQ(output.find("missing TLS"), std::string::npos) << output;

  write_tokens({{"alice", auth::random_token(), "lock:*"}});
  DlockdOptions options;
  options.dir = dir_;
  options.listen_host = "0.0.0.0";
  options.insecure_off_loopback = false;
  options.extra_args = {"--auth-tokens-file", dir_ + "/tokens"};
  options.extra_args.insert(options.extra_args.end(), tls.begin(), tls.end());
  DlockdProcess served(options);  // throws with the log when it does not get ready
  EXPECT_TRUE(served.process().running());
  // The launcher did not add --server-insecure: without the tokens file the same start fails.
  options.extra_args = tls;
  options.dir = dir_ + "/no-tokens";
  std::filesystem::create_directories(options.dir);
  EXPECT_THROW(DlockdProcess{options}, std::runtime_error);
}

TEST_F(AuthzConfig, WeakAdminTokenAndAdminTokenFileChecks) {
  auto [status, output] = refused({"--admin-enabled", "true", "--admin-token", "t0ken"});
  EXPECT_EQ(status, 64) << output;
  EXPECT_NE(output.find("dlock token new admin admin:*"), std::string::npos) << output;
  EXPECT_EQ(output.find("t0ken"), std::string::npos) << "the token is echoed: " << output;

  const std::string file = dir_ + "/admin-token";
  std::ofstream(file) << auth::random_token() << "\n";
  ::chmod(file.c_str(), 0644);
  std::tie(status, output) = refused({"--admin-token-file", file});
  EXPECT_EQ(status, 64) << output;
  EXPECT_NE(output.find("admin token file " + file), std::string::npos) << output;
}

// C6 "admin.token": a token given as --admin-token shows in ps; dlockd still takes it (tests
// use it) but warns at start-up, on stderr and as a warn event, without quoting it. From the
// environment or from admin.token.file there is no warning.
TEST_F(AuthzConfig, AdminTokenOnTheCommandLineIsWarnedAbout) {
  const auto admin = auth::random_token();
  DlockdOptions options;
  options.dir = dir_;
  options.log_level = "info";
  options.extra_args = {"--admin-enabled", "true", "--admin-token", admin};
  server_ = std::make_unique<DlockdProcess>(options);
  std::string log;
  EXPECT_TRUE(testing::wait_for(
      [&] {
        log = read_all(server_->log_path());
        return log.find("\"event\":\"admin_token_on_command_line\"") != std::string::npos;
      },
      milliseconds(5000)))
      << log;
  EXPECT_NE(log.find("dlockd: warning: --admin-token"), std::string::npos) << log;
  EXPECT_NE(log.find("admin.token.file"), std::string::npos) << log;
  EXPECT_EQ(log.find(admin), std::string::npos) << "the token is echoed: " << log;
  EXPECT_EQ(testing::http_call(server_->address(), "POST", "/v1/admin/locks/k/revoke", "",
                               {{"Authorization", "Bearer " + admin}})
                .status,
            200);
  server_.reset();

  options.dir = dir_ + "/from-env";
  std::filesystem::create_directories(options.dir);
  options.extra_args = {"--admin-enabled", "true"};
  options.env = {"DLOCK_ADMIN_TOKEN=" + admin};
  server_ = std::make_unique<DlockdProcess>(options);
  EXPECT_EQ(testing::http_call(server_->address(), "POST", "/v1/admin/locks/k/revoke", "",
                               {{"Authorization", "Bearer " + admin}})
                .status,
            200);
  log = read_all(server_->log_path());
  EXPECT_EQ(log.find("admin_token_on_command_line"), std::string::npos) << log;
  EXPECT_EQ(log.find("dlockd: warning"), std::string::npos) << log;
}

// C6: without a tokens file the revoke route checks admin.token itself, and its failures go
// through the same per-address throttle as bearer tokens: ten wrong tokens (403), then 429
// with Retry-After; the right token is still accepted from that address.
TEST_F(AuthzConfig, AdminTokenGuessesAreThrottledWithoutATokensFile) {
  const auto admin = auth::random_token();
  const std::string token_file = dir_ + "/admin-token";
  std::ofstream(token_file) << admin << "\n";
  ::chmod(token_file.c_str(), 0600);
  DlockdOptions options;
  options.dir = dir_;
  options.log_level = "info";
  options.extra_args = {"--admin-enabled", "true", "--admin-token-file", token_file};
  server_ = std::make_unique<DlockdProcess>(options);
  const auto revoke = [&](const std::string& token) {
    std::map<std::string, std::string> headers;
    if (!token.empty()) headers["Authorization"] = "Bearer " + token;
    return testing::http_call(server_->address(), "POST", "/v1/admin/locks/k/revoke", "", headers);
  };
  const auto guess = auth::random_token();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(revoke(guess).status, 403) << i;
  const auto throttled = revoke(guess);
  EXPECT_EQ(throttled.status, 429) << throttled.body;
  EXPECT_EQ(throttled.error_code(), "too_many_requests") << throttled.body;
  EXPECT_EQ(throttled.headers.count("retry-after"), 1u);
  EXPECT_EQ(revoke("Basic abc").status, 429);
  EXPECT_EQ(revoke(admin).status, 200);  // a valid token is never throttled
  EXPECT_EQ(revoke("").status, 401);     // a missing header guesses nothing
  // Only the admin route checks admin.token: the others stay open (no tokens file).
  EXPECT_EQ(testing::http_call(server_->address(), "GET", "/v1/locks").status, 200);
  const auto metrics = testing::http_call(server_->address(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("dlock_auth_denied_total{reason=\"unknown\"} 10"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("dlock_auth_denied_total{reason=\"throttled\"} 2"), std::string::npos)
      << metrics;
}

TEST_F(AuthzConfig, ABadTokensFileStopsStartUpNamingItsLine) {
  std::ofstream(dir_ + "/tokens") << "# ok\nbob 1234 lock:*\n";
  const auto [status, output] = refused({"--auth-tokens-file", dir_ + "/tokens"});
  EXPECT_EQ(status, 64) << output;
  EXPECT_NE(output.find(dir_ + "/tokens:2:"), std::string::npos) << output;
}

TEST_F(AuthzConfig, SighupReloadsTheTokensFileKeepingSessionsAndLocks) {
  const auto alice = auth::random_token();
  const auto bob = auth::random_token();
  write_tokens({{"alice", alice, "lock:*"}});
  start();
  const auto session = open_session(alice);
  const auto held = call(alice, "POST", "/v1/locks/k/acquire", {{"session_id", session}});
  ASSERT_EQ(held.status, 200) << held.body;
  EXPECT_EQ(call(bob, "GET", "/v1/locks/k").status, 401);

  write_tokens({{"alice", alice, "lock:*"}, {"bob", bob, "read:*"}});
  server_->process().signal(SIGHUP);
  ASSERT_TRUE(testing::wait_for([&] { return call(bob, "GET", "/v1/locks/k").status == 200; },
                                milliseconds(5000)));
  // The session and its lock lived through the reload.
  EXPECT_EQ(call(alice, "POST", "/v1/sessions/" + session + "/keepalive").status, 200);
  EXPECT_EQ(call(alice, "GET", "/v1/locks/k").json.at("session_id").as_string(), session);

  // A file that does not parse: the old table stays, the reason is logged.
  std::ofstream(dir_ + "/tokens") << "bob nothex read:*\n";
  server_->process().signal(SIGHUP);
  ASSERT_TRUE(testing::wait_for(
      [&] {
        return read_all(server_->log_path()).find("\"result\":\"error\"") != std::string::npos;
      },
      milliseconds(5000)));
  EXPECT_EQ(call(bob, "GET", "/v1/locks/k").status, 200);
  EXPECT_EQ(call(alice, "POST", "/v1/sessions/" + session + "/keepalive").status, 200);
  const auto log = read_all(server_->log_path());
  EXPECT_EQ(log.find(alice), std::string::npos) << "a token in the log";
  EXPECT_EQ(log.find(session), std::string::npos) << "a raw session id in the log";
  EXPECT_NE(log.find("\"action\":\"grant\""), std::string::npos) << log;
}

// A session opened without a tokens file has no principal, and keeps none once one is in use
// (C6): an owner string that starts with a principal's name does not make it that principal's.
// Here the owner "alice worker": after a restart with a tokens file, alice may neither keep it
// alive nor see its session_id.
TEST_F(AuthzConfig, ASessionOpenedWithoutAuthIsNobodysOnceAuthIsOn) {
  std::string session;
  {
    DlockdOptions options;
    options.dir = dir_;  // the same SQLite file as start() below
    DlockdProcess open(options);
    const auto opened = testing::http_call(open.address(), "POST", "/v1/sessions",
                                           R"({"owner":"alice worker","ttl_ms":120000})");
    ASSERT_EQ(opened.status, 201) << opened.body;
    session = std::string(opened.json.at("session_id").as_string());
    EXPECT_EQ(opened.json.at("owner").as_string(), "alice worker");
    const auto granted =
        testing::http_call(open.address(), "POST", "/v1/locks/adopted/acquire",
                           R"({"session_id":")" + session + R"(","ttl_ms":120000})");
    ASSERT_EQ(granted.status, 200) << granted.body;
    EXPECT_EQ(granted.json.at("owner").as_string(), "alice worker");
  }
  const auto alice = auth::random_token();
  write_tokens({{"alice", alice, "lock:*"}});
  start();
  EXPECT_EQ(call(alice, "POST", "/v1/sessions/" + session + "/keepalive").status, 404);
  const auto read = call(alice, "GET", "/v1/locks/adopted");
  ASSERT_EQ(read.status, 200) << read.body;
  EXPECT_FALSE(read.json.as_object().contains("session_id")) << read.body;
  EXPECT_EQ(read.json.at("owner").as_string(), "alice worker") << read.body;
}

TEST_F(AuthzConfig, PerPrincipalQuotasForSessionsAndWaiters) {
  const auto alice = auth::random_token();
  const auto bob = auth::random_token();
  write_tokens({{"alice", alice, "lock:*"}, {"bob", bob, "lock:*"}});
  start({"--auth-max-sessions-per-principal", "2", "--auth-max-waiters-per-principal", "1"});
  const auto first = open_session(alice);
  open_session(alice);
  const auto third = call(alice, "POST", "/v1/sessions", {{"owner", "app"}});
  EXPECT_EQ(third.status, 429) << third.body;
  EXPECT_NE(third.body.find("principal alice (limit 2)"), std::string::npos) << third.body;
  const auto bobs = open_session(bob);  // another principal is not affected
  ASSERT_FALSE(bobs.empty());

  // bob holds the key; alice may have one waiting acquire, not two.
  ASSERT_EQ(call(bob, "POST", "/v1/locks/w/acquire", {{"session_id", bobs}}).status, 200);
  std::thread waiter([&] {
    call(alice, "POST", "/v1/locks/w/acquire", {{"session_id", first}, {"wait_ms", 3000}});
  });
  ASSERT_TRUE(testing::wait_for([&] { return testing::waiting_acquires(server_->address()) == 1; },
                                milliseconds(10'000)))
      << "the first waiting acquire was never queued";
  const auto second =
      call(alice, "POST", "/v1/locks/w/acquire", {{"session_id", first}, {"wait_ms", 3000}});
  EXPECT_EQ(second.status, 429) << second.body;
  EXPECT_NE(second.body.find("principal alice (limit 1)"), std::string::npos) << second.body;
  waiter.join();
  // The waiter has been answered: alice may wait again.
  EXPECT_EQ(
      call(alice, "POST", "/v1/locks/w/acquire", {{"session_id", first}, {"wait_ms", 100}}).status,
      409);
}

// The audit events of C6 end to end: grant, release, revoke and both kinds of denial name the
// principal, the namespace, the key, the fencing token (when there is one) and the remote
// address, and never a session ID; the denials and reloads are counted in /metrics.
TEST_F(AuthzConfig, AuditEventsCarryWhoWhatAndWhereButNoSessionId) {
  const auto alice = auth::random_token();
  const auto bob = auth::random_token();
  const auto carol = auth::random_token();
  const auto ops = auth::random_token();
  write_tokens({{"alice", alice, "lock:a"},
                {"bob", bob, "read:a"},
                {"carol", carol, "lock:*"},
                {"ops", ops, "admin:*"}});
  start();
  const auto session = open_session(alice);
  ASSERT_FALSE(session.empty());
  const json::object on_session{{"session_id", session}};
  const auto granted = call(alice, "POST", "/v1/locks/audited/acquire?ns=a", on_session);
  ASSERT_EQ(granted.status, 200) << granted.body;
  const auto token = granted.json.at("fencing_token").to_number<std::uint64_t>();
  ASSERT_EQ(call(alice, "DELETE",
                 "/v1/locks/audited?ns=a&session_id=" + session +
                     "&fencing_token=" + std::to_string(token))
                .status,
            204);
  const auto held = call(alice, "POST", "/v1/locks/revoked/acquire?ns=a", on_session);
  ASSERT_EQ(held.status, 200) << held.body;
  const auto revoked_token = held.json.at("fencing_token").to_number<std::uint64_t>();
  ASSERT_EQ(call(ops, "POST", "/v1/admin/locks/revoked/revoke?ns=a").status, 200);
  // bob may only read: 403. carol may lock but not with alice's session: 404 (C6 does not
  // reveal that it exists), twice -- on a lock route and on a session route.
  EXPECT_EQ(call(bob, "POST", "/v1/locks/forbidden/acquire?ns=a", on_session).status, 403);
  EXPECT_EQ(call(carol, "POST", "/v1/locks/stolen/acquire?ns=a", on_session).status, 404);
  EXPECT_EQ(call(carol, "POST", "/v1/sessions/" + session + "/keepalive").status, 404);
  server_->process().signal(SIGHUP);
  std::string metrics;
  ASSERT_TRUE(testing::wait_for(
      [&] {
        metrics = testing::http_call(server_->address(), "GET", "/metrics").body;
        return metrics.find("dlock_auth_reloads_total{result=\"ok\"} 1") != std::string::npos;
      },
      milliseconds(5000)))
      << metrics;
  EXPECT_NE(metrics.find("dlock_auth_denied_total{reason=\"permission_denied\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("dlock_auth_denied_total{reason=\"session_owner\"} 2"), std::string::npos)
      << metrics;

  // dlockd writes its log from a thread of its own (telemetry.cc): the reload's line, the last
  // of this test, may come after the metric that counts it.
  std::string log;
  EXPECT_TRUE(testing::wait_for(
      [&] {
        log = read_all(server_->log_path());
        return log.find("\"event\":\"tokens_reload\"") != std::string::npos;
      },
      milliseconds(5000)))
      << log;
  EXPECT_EQ(log.find(session), std::string::npos) << "a raw session id in the log: " << log;
  std::map<std::string, std::vector<json::object>> audits;  // by action
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    boost::system::error_code error;
    auto value = json::parse(line, error);
    if (error || !value.is_object() || text_of(value.as_object(), "event") != "audit") continue;
    auto& event = value.as_object();
    EXPECT_FALSE(event.contains("session_id")) << line;
    EXPECT_EQ(text_of(event, "remote"), "127.0.0.1") << line;
    audits[text_of(event, "action")].push_back(event);
  }
  const auto expect = [&](const std::string& action, const std::string& principal,
                          const std::string& ns, const std::string& key,
                          std::optional<std::uint64_t> fencing_token, const std::string& reason) {
    const auto& events = audits[action];
    const auto found = std::find_if(events.begin(), events.end(), [&](const json::object& event) {
      return text_of(event, "principal") == principal && text_of(event, "key") == key &&
             text_of(event, "ns") == ns &&
             (reason.empty() ? !event.contains("reason") : text_of(event, "reason") == reason) &&
             (fencing_token
                  ? event.contains("fencing_token") &&
                        event.at("fencing_token").to_number<std::uint64_t>() == *fencing_token
                  : !event.contains("fencing_token"));
    });
    EXPECT_NE(found, events.end()) << action << " " << principal << " " << key << "\n" << log;
  };
  expect("grant", "alice", "a", "audited", token, "");
  // One line per event (C4): the grant's audit line carries what a separate `grant` line did.
  EXPECT_EQ(log.find("\"event\":\"grant\""), std::string::npos) << log;
  EXPECT_EQ(log.find("\"event\":\"release\""), std::string::npos) << log;
  for (const auto& event : audits["grant"]) {
    EXPECT_TRUE(event.contains("owner") && event.contains("session") &&
                event.contains("expires_at"))
        << json::serialize(event);
  }
  expect("release", "alice", "a", "audited", token, "");
  expect("revoke", "ops", "a", "revoked", revoked_token, "");
  expect("denied", "bob", "a", "forbidden", std::nullopt, "permission_denied");
  // A session_owner denial names the key of a lock route; never the session (a session route).
  expect("denied", "carol", "", "stolen", std::nullopt, "session_owner");
  expect("denied", "carol", "", "", std::nullopt, "session_owner");
}

}  // namespace
}  // namespace dlock
