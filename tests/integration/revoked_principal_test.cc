// A reload of the tokens file (SIGHUP) takes away what the new file no longer allows (contract
// C6 "Reloading the tokens file"), against a real dlockd on every backend: a removed principal's
// waiting acquire is answered 401 at once (not at its wait_ms), its sessions are closed (its
// locks released, the waiters behind them woken; also a session this dlockd has not seen, found
// by its grants) and its token refused; a principal that stays keeps its sessions, locks and
// waiters, also when its token was rotated (sessions belong to principals, not tokens); a
// principal that lost a namespace has its waiters there answered 403 and its grants there
// released, and keeps the rest.

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "auth/crypto.h"
#include "auth/permissions.h"
#include "auth/tokens_file.h"
#include "support/dlockd_backends.h"
#include "support/dlockd_process.h"
#include "support/raw_socket.h"
#include "support/subprocess.h"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
namespace json = boost::json;

// A waiting acquire on a socket of its own: sent now, its answer read later.
class Waiting {
 public:
  Waiting(const std::string& address, const std::string& token, const std::string& path,
          const std::string& session) {
    const auto body = json::serialize(
        json::object{{"session_id", session}, {"ttl_ms", 30000}, {"wait_ms", 30000}});
    socket_ = std::make_unique<RawSocket>(address);
    sent_ = socket_->send("POST " + path + " HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " +
                          token + "\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body);
  }
  bool sent() const { return sent_; }
  // The answer's status line and the rest ("" when none came within the socket's 5 s).
  std::string answer() { return socket_->receive("}"); }

 private:
  std::unique_ptr<RawSocket> socket_;
  bool sent_ = false;
};

bool has_status(const std::string& answer, int status) {
  return answer.starts_with("HTTP/1.1 " + std::to_string(status) + " ");
}

class RevokedPrincipal : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("revoked-principal");
    // Keys of their own: pg and etcd are shared by every test of this binary.
    static int tests = 0;
    prefix_ = "rp-" + std::to_string(::getpid()) + "-" + std::to_string(++tests) + "-";
  }
  void TearDown() override {
    dlockd_.reset();
    std::filesystem::remove_all(dir_);
  }

  void write_tokens(const std::vector<std::tuple<std::string, std::string, std::string>>& lines) {
    std::ofstream file(dir_ + "/tokens.tmp");
    for (const auto& [name, token, permissions] : lines) {
      file << auth::tokens_file_line(name, token, auth::parse_permissions(permissions)) << "\n";
    }
    file.close();
    std::filesystem::rename(dir_ + "/tokens.tmp", dir_ + "/tokens");
  }

  void start() {
    DlockdOptions options = dlockd_options(GetParam(), "dlock_revoked");
    options.dir = dir_;
    options.log_level = "info";
    options.extra_args = {"--auth-tokens-file", dir_ + "/tokens"};
    dlockd_ = std::make_unique<DlockdProcess>(options);
  }

  // Sends SIGHUP and waits for the reload's log line (written once its withdrawal is done).
  json::object reload() {
    const auto lines_before = reload_lines().size();
    dlockd_->process().signal(SIGHUP);
    std::vector<json::object> lines;
    EXPECT_TRUE(wait_for(
        [&] {
          lines = reload_lines();
          return lines.size() > lines_before;
        },
        10s));
    return lines.empty() ? json::object{} : lines.back();
  }

  std::vector<json::object> reload_lines() {
    std::ifstream in(dlockd_->log_path());
    std::vector<json::object> lines;
    for (std::string line; std::getline(in, line);) {
      boost::system::error_code error;
      auto value = json::parse(line, error);
      if (error || !value.is_object()) continue;
      const auto* event = value.as_object().if_contains("event");
      if (event != nullptr && event->is_string() && event->as_string() == "tokens_reload") {
        lines.push_back(value.as_object());
      }
    }
    return lines;
  }

  HttpResult call(const std::string& token, const std::string& method, const std::string& target,
                  const json::object& body = {}) {
    return http_call(dlockd_->address(), method, target, body.empty() ? "" : json::serialize(body),
                     {{"Authorization", "Bearer " + token}});
  }

  std::string open_session(const std::string& token) {
    const auto result = call(token, "POST", "/v1/sessions", {{"owner", "app"}});
    EXPECT_EQ(result.status, 201) << result.body;
    return result.status == 201 ? std::string(result.json.at("session_id").as_string()) : "";
  }

  std::string path(const std::string& key, const std::string& ns = "default") {
    return "/v1/locks/" + prefix_ + key + "?ns=" + ns;
  }

  // Acquires `key` (in `ns`) for `session` without waiting; the fencing token, or 0.
  std::uint64_t hold(const std::string& token, const std::string& session, const std::string& key,
                     const std::string& ns = "default") {
    const auto result = call(token, "POST", "/v1/locks/" + prefix_ + key + "/acquire?ns=" + ns,
                             {{"session_id", session}, {"ttl_ms", 30000}});
    EXPECT_EQ(result.status, 200) << key << ": " << result.body;
    return result.status == 200 ? result.json.at("fencing_token").to_number<std::uint64_t>() : 0;
  }

  std::unique_ptr<Waiting> wait(const std::string& token, const std::string& session,
                                const std::string& key, const std::string& ns = "default") {
    auto waiting = std::make_unique<Waiting>(
        dlockd_->address(), token, "/v1/locks/" + prefix_ + key + "/acquire?ns=" + ns, session);
    EXPECT_TRUE(waiting->sent());
    return waiting;
  }

  // The session holding `key`, "" when it is free (read with `token`, which may see it).
  std::string holder(const std::string& token, const std::string& key,
                     const std::string& ns = "default") {
    const auto result = call(token, "GET", path(key, ns));
    if (result.status != 200) return "";
    const auto* session = result.json.as_object().if_contains("session_id");
    return session != nullptr ? std::string(session->as_string()) : "?";
  }

  bool waiters_become(int count) {
    const std::string line =
        "dlock_waiters{backend=\"" + GetParam() + "\"} " + std::to_string(count) + "\n";
    return wait_for(
        [&] {
          return http_call(dlockd_->address(), "GET", "/metrics").body.find(line) !=
                 std::string::npos;
        },
        5s);
  }

  std::string dir_;
  std::string prefix_;
  std::unique_ptr<DlockdProcess> dlockd_;
};

TEST_P(RevokedPrincipal, ARemovedPrincipalLosesItsWaitersSessionsAndLocksOthersKeepTheirs) {
  const auto alice = auth::random_token();
  const auto bob = auth::random_token();
  const auto carol = auth::random_token();
  write_tokens({{"alice", alice, "admin:*"}, {"bob", bob, "lock:*"}, {"carol", carol, "lock:*"}});
  start();
  const auto a = open_session(alice);
  const auto b = open_session(bob);
  const auto b_idle = open_session(bob);  // holds nothing, waits for nothing: closed all the same
  const auto c = open_session(carol);
  ASSERT_NE(hold(alice, a, "first"), 0u);
  ASSERT_NE(hold(bob, b, "bobs"), 0u);
  ASSERT_NE(hold(carol, c, "carols"), 0u);
  // bob waits for alice's key, carol behind him; alice waits for bob's key.
  auto bob_waits = wait(bob, b, "first");
  ASSERT_TRUE(waiters_become(1));
  auto carol_waits = wait(carol, c, "first");
  auto alice_waits = wait(alice, a, "bobs");
  ASSERT_TRUE(waiters_become(3));

  // bob removed; carol's token rotated (the old one removed, a new one added).
  const auto carol_new = auth::random_token();
  write_tokens({{"alice", alice, "admin:*"}, {"carol", carol_new, "lock:*"}});
  const auto hangup = std::chrono::steady_clock::now();
  const auto line = reload();
  const auto bob_answer = bob_waits->answer();
  const auto answered_after = std::chrono::steady_clock::now() - hangup;
  EXPECT_TRUE(has_status(bob_answer, 401)) << bob_answer;
  EXPECT_NE(bob_answer.find("\"unauthenticated\""), std::string::npos) << bob_answer;
  EXPECT_NE(bob_answer.find("WWW-Authenticate: Bearer"), std::string::npos) << bob_answer;
  EXPECT_LT(answered_after, 2s) << "not answered at the reload (its wait_ms is 30 s)";
  // bob's session closed: his lock released, alice (who waited for it) granted.
  const auto alice_answer = alice_waits->answer();
  EXPECT_TRUE(has_status(alice_answer, 200)) << alice_answer;
  EXPECT_EQ(holder(alice, "bobs"), a);
  EXPECT_EQ(call(bob, "GET", path("first")).status, 401) << "bob's token is still accepted";

  // carol kept her session, her lock and her place in the queue; her old token is refused.
  EXPECT_EQ(call(carol, "POST", "/v1/sessions/" + c + "/keepalive").status, 401);
  EXPECT_EQ(call(carol_new, "POST", "/v1/sessions/" + c + "/keepalive").status, 200);
  EXPECT_EQ(holder(alice, "carols"), c);
  EXPECT_TRUE(waiters_become(1)) << "carol's waiter is gone";
  EXPECT_EQ(holder(alice, "first"), a) << "alice kept her lock";
  const auto first = call(alice, "GET", path("first"));
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_EQ(call(alice, "DELETE",
                 path("first") + "&session_id=" + a + "&fencing_token=" +
                     std::to_string(first.json.at("fencing_token").to_number<std::uint64_t>()))
                .status,
            204);
  const auto carol_answer = carol_waits->answer();
  EXPECT_TRUE(has_status(carol_answer, 200))
      << "carol's waiter after alice's release: " << carol_answer;
  EXPECT_EQ(holder(alice, "first"), c);

  // The reload's line says what it did, naming principals, never a token.
  EXPECT_EQ(line.at("result").as_string(), "ok") << json::serialize(line);
  EXPECT_EQ(json::serialize(line.at("removed")), R"(["bob"])") << json::serialize(line);
  EXPECT_EQ(line.at("waiters_answered").to_number<int>(), 1) << json::serialize(line);
  EXPECT_EQ(line.at("sessions_closed").to_number<int>(), 2) << json::serialize(line);
  EXPECT_EQ(line.at("locks_released").to_number<int>(), 1) << json::serialize(line);
  std::ifstream in(dlockd_->log_path());
  const std::string log((std::istreambuf_iterator<char>(in)), {});
  for (const auto& token : {alice, bob, carol, carol_new}) {
    EXPECT_EQ(log.find(token), std::string::npos) << "a token in the log";
  }

  // bob back (a new token): his old sessions stay closed.
  const auto bob_new = auth::random_token();
  write_tokens(
      {{"alice", alice, "admin:*"}, {"bob", bob_new, "lock:*"}, {"carol", carol_new, "lock:*"}});
  reload();
  EXPECT_EQ(call(bob_new, "POST", "/v1/sessions/" + b + "/keepalive").status, 404);
  EXPECT_EQ(call(bob_new, "POST", "/v1/sessions/" + b_idle + "/keepalive").status, 404);
}

TEST_P(RevokedPrincipal, APrincipalThatLostANamespaceLosesItsWaitersAndGrantsThereOnly) {
  const auto alice = auth::random_token();
  const auto dave = auth::random_token();
  write_tokens({{"alice", alice, "admin:*"}, {"dave", dave, "lock:keep,lock:lose"}});
  start();
  const auto a = open_session(alice);
  const auto d = open_session(dave);
  ASSERT_NE(hold(dave, d, "kept", "keep"), 0u);
  ASSERT_NE(hold(dave, d, "lost", "lose"), 0u);
  ASSERT_NE(hold(alice, a, "busy", "lose"), 0u);
  ASSERT_NE(hold(alice, a, "busy", "keep"), 0u);
  auto waits_lost = wait(dave, d, "busy", "lose");
  ASSERT_TRUE(waiters_become(1));
  auto waits_kept = wait(dave, d, "busy", "keep");
  ASSERT_TRUE(waiters_become(2));

  write_tokens({{"alice", alice, "admin:*"}, {"dave", dave, "lock:keep"}});
  const auto line = reload();
  const auto lost = waits_lost->answer();
  EXPECT_TRUE(has_status(lost, 403)) << lost;
  EXPECT_NE(lost.find("\"permission_denied\""), std::string::npos) << lost;
  EXPECT_EQ(holder(alice, "lost", "lose"), "") << "dave's grant where he may no longer lock";
  // The rest stays: his session, his lock and his waiter where he still may.
  EXPECT_EQ(call(dave, "POST", "/v1/sessions/" + d + "/keepalive").status, 200);
  EXPECT_EQ(holder(alice, "kept", "keep"), d);
  EXPECT_TRUE(waiters_become(1));
  EXPECT_EQ(json::serialize(line.at("narrowed")), R"(["dave"])") << json::serialize(line);
  EXPECT_EQ(line.at("waiters_answered").to_number<int>(), 1) << json::serialize(line);
  EXPECT_EQ(line.at("sessions_closed").to_number<int>(), 0) << json::serialize(line);
  EXPECT_EQ(line.at("locks_released").to_number<int>(), 1) << json::serialize(line);
  // A new wait there is refused from the start.
  EXPECT_EQ(call(dave, "POST", "/v1/locks/" + prefix_ + "busy/acquire?ns=lose",
                 {{"session_id", d}, {"wait_ms", 1000}})
                .status,
            403);
  waits_kept.reset();  // its client goes: the wait ends
}

// A dlockd that has not seen a removed principal's session (it was opened before a restart, or
// through another dlockd) finds it by its grants: closed all the same. One holding no grant is
// kept (C6), and the reload's line says so.
TEST_P(RevokedPrincipal, ARemovedPrincipalsSessionThisDlockdHasNotSeenIsClosedByItsGrant) {
  const auto alice = auth::random_token();
  const auto bob = auth::random_token();
  write_tokens({{"alice", alice, "admin:*"}, {"bob", bob, "lock:default"}});
  start();
  const auto b = open_session(bob);
  ASSERT_NE(hold(bob, b, "unseen"), 0u);
  dlockd_->kill9();
  dlockd_->start();  // the same storage; its owner cache is empty
  const auto a = open_session(alice);
  auto alice_waits = wait(alice, a, "unseen");
  ASSERT_TRUE(waiters_become(1));

  write_tokens({{"alice", alice, "admin:*"}});
  const auto line = reload();
  const auto answer = alice_waits->answer();
  EXPECT_TRUE(has_status(answer, 200)) << "bob's grant is still held: " << answer;
  EXPECT_EQ(holder(alice, "unseen"), a);
  EXPECT_EQ(line.at("sessions_closed").to_number<int>(), 1) << json::serialize(line);
  EXPECT_EQ(line.at("locks_released").to_number<int>(), 1) << json::serialize(line);
  EXPECT_TRUE(line.contains("kept")) << json::serialize(line);
}

INSTANTIATE_TEST_SUITE_P(Backends, RevokedPrincipal, ::testing::ValuesIn(dlockd_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dlock::testing
