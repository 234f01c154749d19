// End to end through a real dlockd process, on every backend: the whole C3 table (every route
// and error code), concurrency, waiting, hand-over, expiry and shutdown.

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>

#include <atomic>
#include <barrier>
#include <boost/json.hpp>
#include <iostream>
#include <set>
#include <thread>

#include "support/dlockd_backends.h"
#include "support/dlockd_process.h"

namespace dlock {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::DlockdOptions;
using testing::DlockdProcess;
using testing::HttpResult;
// admin.token needs 32+ characters, 8+ distinct (ADR-0016).
constexpr const char* kAdminToken = "e2e-admin-token-0123456789abcdefgh";
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
    const std::string line =
        "dlock_waiters{backend=\"" + GetParam() + "\"} " + std::to_string(value) + "\n";
    return testing::wait_for(
        [&] {
          return call("GET", "/metrics", "", {}, server).body.find(line) != std::string::npos;
        },
        seconds(10));
  }

  std::unique_ptr<DlockdProcess> server_;
};

TEST_P(ServerEndToEnd, SessionLifecycle) {
  const auto created = call("POST", "/v1/sessions", R"({"owner":"alice","ttl_ms":15000})");
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(created.headers.at("content-type"), "application/json");
  EXPECT_EQ(created.json.at("owner").as_string(), "alice");
  EXPECT_EQ(created.json.at("ttl_ms").as_int64(), 15000);
  EXPECT_TRUE(created.json.at("expires_at").as_string().ends_with("Z"));
  const std::string sid(created.json.at("session_id").as_string());
  const auto kept = call("POST", "/v1/sessions/" + sid + "/keepalive");
  EXPECT_EQ(kept.status, 200) << kept.body;
  EXPECT_EQ(kept.json.at("ttl_ms").as_int64(), 15000);
  EXPECT_EQ(call("DELETE", "/v1/sessions/" + sid).status, 204);
  const auto again = call("DELETE", "/v1/sessions/" + sid);
  EXPECT_EQ(again.status, 404);
  EXPECT_EQ(again.error_code(), "session_not_found");
  EXPECT_EQ(call("POST", "/v1/sessions/" + sid + "/keepalive").error_code(), "session_not_found");
  // Default TTL from configuration (30 s), no lock-delay.
  const auto defaulted = call("POST", "/v1/sessions", R"({"owner":"bob"})");
  EXPECT_EQ(defaulted.json.at("ttl_ms").as_int64(), 30000);
  EXPECT_EQ(defaulted.json.at("lock_delay_ms").as_int64(), 0);
}

// C2 "Lock-delay" through the API: a lock whose session expired without a release is refused
// to everyone for the session's lock_delay_ms, then granted (a waiter is woken for it).
TEST_P(ServerEndToEnd, LockDelayKeepsAnExpiredSessionsLockFromEveryoneForTheDelay) {
  const auto opened =
      call("POST", "/v1/sessions", R"({"owner":"alice","ttl_ms":1000,"lock_delay_ms":1500})");
  ASSERT_EQ(opened.status, 201) << opened.body;
  EXPECT_EQ(opened.json.at("lock_delay_ms").as_int64(), 1500);
  const std::string alice(opened.json.at("session_id").as_string());
  const auto bob = open_session("bob");
  const auto key = fresh_key();
  const auto held = acquire(key, alice, 1000);
  ASSERT_EQ(held.status, 200) << held.body;
  ASSERT_TRUE(testing::wait_for([&] { return call("GET", "/v1/locks/" + key).status == 404; },
                                seconds(10)));
  const auto refused = acquire(key, bob);
  EXPECT_EQ(refused.status, 409) << "granted during the lock-delay: " << refused.body;
  const auto waited = acquire(key, bob, 30000, 15000);
  ASSERT_EQ(waited.status, 200) << waited.body;
  EXPECT_GT(token_of(waited), token_of(held));
}

// An extend asks for more than the grant's first TTL. Whatever ttl_ms the answer carries, the
// lock must really be held until the deadline a client computes from it (its send time plus
// ttl_ms): a waiting session is not granted the key before then (docs/adr/0011).
TEST_P(ServerEndToEnd, ExtendAnswersNoMoreThanTheBackendKeeps) {
  const auto alice = open_session("alice");
  const auto bob = open_session("bob");
  const auto key = fresh_key();
  const auto held = acquire(key, alice, 1000);
  ASSERT_EQ(held.status, 200) << held.body;
  const auto sent_at = std::chrono::steady_clock::now();
  const auto extended =
      call("POST", "/v1/locks/" + key + "/extend",
           json::serialize(json::object{
               {"session_id", alice}, {"fencing_token", token_of(held)}, {"ttl_ms", 5000}}));
  ASSERT_EQ(extended.status, 200) << extended.body;
  const auto told = milliseconds(extended.json.at("ttl_ms").as_int64());
  EXPECT_LE(told, milliseconds(5000));
  EXPECT_GE(told, milliseconds(1000)) << "an extend keeps at least the grant's first TTL";
  const auto deadline = sent_at + told;
  // Bob waits for the key: it is his only once alice's lock has really ended.
  const auto waited = acquire(key, bob, 30000, 10000);
  const auto returned = std::chrono::steady_clock::now();
  ASSERT_EQ(waited.status, 200) << "the lock never ended: " << waited.body;
  const auto early = std::chrono::duration_cast<std::chrono::microseconds>(deadline - returned);
  EXPECT_LE(early.count(), 0) << "bob was granted the key " << early.count() / 1000
                              << " ms before the deadline alice was told (ttl_ms " << told.count()
                              << ")";
  EXPECT_GT(token_of(waited), token_of(held));
}

// A session lives at least as long as the ttl_ms its creation and each keepalive answered,
// counted from the request's send time: acquires with it keep succeeding until then.
TEST_P(ServerEndToEnd, SessionAnswersNoMoreThanTheBackendKeeps) {
  const auto created_at = std::chrono::steady_clock::now();
  const auto created = call("POST", "/v1/sessions", R"({"owner":"carol","ttl_ms":1000})");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string sid(created.json.at("session_id").as_string());
  EXPECT_LE(created.json.at("ttl_ms").as_int64(), 1000);
  const auto kept_at = std::chrono::steady_clock::now();
  const auto kept = call("POST", "/v1/sessions/" + sid + "/keepalive");
  ASSERT_EQ(kept.status, 200) << kept.body;
  EXPECT_LE(kept.json.at("ttl_ms").as_int64(), 1000);
  const auto deadline = std::max(created_at + milliseconds(created.json.at("ttl_ms").as_int64()),
                                 kept_at + milliseconds(kept.json.at("ttl_ms").as_int64()));
  int acquires = 0;
  while (true) {
    const auto result = acquire(fresh_key(), sid, 1000);
    const auto returned = std::chrono::steady_clock::now();
    if (returned >= deadline) break;
    ASSERT_EQ(result.status, 200)
        << "the session ended "
        << std::chrono::duration_cast<std::chrono::microseconds>(deadline - returned).count() / 1000
        << " ms before the deadline it was told: " << result.body;
    ++acquires;
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_GT(acquires, 0);
}

TEST_P(ServerEndToEnd, AcquireExtendReadListRelease) {
  const auto sid = open_session("alice");
  const auto key = "payouts%2F" + fresh_key();  // one percent-encoded segment with a '/'
  const auto first = acquire(key, sid, 20000);
  ASSERT_EQ(first.status, 200) << first.body;
  const std::string plain_key(first.json.at("key").as_string());
  EXPECT_EQ(plain_key.rfind("payouts/", 0), 0u);
  EXPECT_EQ(first.json.at("owner").as_string(), "alice");
  EXPECT_EQ(first.json.at("session_id").as_string(), sid);
  EXPECT_EQ(first.json.at("ttl_ms").as_int64(), 20000);
  const auto second = acquire(key, sid);
  ASSERT_EQ(second.status, 200);
  EXPECT_GT(token_of(second), token_of(first)) << "re-entrant acquire must mint a greater token";
  const auto token = std::to_string(token_of(second));

  const auto extend_sent = std::chrono::steady_clock::now();
  const auto extended =
      call("POST", "/v1/locks/" + key + "/extend",
           R"({"session_id":")" + sid + R"(","fencing_token":)" + token + R"(,"ttl_ms":40000})");
  const auto extend_took =
      std::chrono::ceil<std::chrono::milliseconds>(std::chrono::steady_clock::now() - extend_sent)
          .count();
  ASSERT_EQ(extended.status, 200) << extended.body;
  EXPECT_EQ(token_of(extended), token_of(second));
  // The answer is what the backend keeps (C3): an etcd grant's lease renews for the 30 s it was
  // granted with, whatever the extend asks; the relational stores lengthen the lock. dlockd
  // counts what it answers from the request's arrival, and the lease from just before it renewed
  // it, so on etcd the answer is 30 s plus at most the time the request spent inside dlockd.
  const auto answered = extended.json.at("ttl_ms").as_int64();
  if (GetParam() == "etcd") {
    EXPECT_GE(answered, 30000);
    EXPECT_LE(answered, 30000 + extend_took) << "the extend took " << extend_took << " ms";
  } else {
    EXPECT_EQ(answered, 40000);
  }

  const auto read = call("GET", "/v1/locks/" + key);
  ASSERT_EQ(read.status, 200);
  EXPECT_EQ(token_of(read), token_of(second));
  EXPECT_TRUE(read.json.as_object().contains("acquired_at"));
  const auto listed = call("GET", "/v1/locks?prefix=payouts%2F&limit=1000");
  ASSERT_EQ(listed.status, 200);
  bool found = false;
  for (const auto& item : listed.json.at("locks").as_array()) {
    found = found || item.at("key").as_string() == plain_key;
  }
  EXPECT_TRUE(found) << listed.body;

  const auto stale = release(key, sid, token_of(first));
  EXPECT_EQ(stale.status, 409);
  EXPECT_EQ(stale.error_code(), "lock_lost");
  EXPECT_EQ(
      call("DELETE", "/v1/locks/" + key + "?session_id=" + sid + "&fencing_token=" + token).status,
      204);
  EXPECT_EQ(call("GET", "/v1/locks/" + key).error_code(), "lock_not_found");
  EXPECT_EQ(call("POST", "/v1/locks/" + key + "/extend",
                 R"({"session_id":")" + sid + R"(","fencing_token":)" + token + "}")
                .error_code(),
            "lock_lost");
}

TEST_P(ServerEndToEnd, HeldIs409AndUnknownSessionIs404) {
  const auto alice = open_session("alice");
  const auto bob = open_session("bob");
  const auto key = fresh_key();
  ASSERT_EQ(acquire(key, alice).status, 200);
  const auto held = acquire(key, bob);
  EXPECT_EQ(held.status, 409);
  EXPECT_EQ(held.error_code(), "held");
  const auto unknown = acquire(fresh_key(), "0123456789abcdef");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.error_code(), "session_not_found");
  // Namespaces scope keys: the same key in another namespace is free.
  const auto other_ns = call("POST", "/v1/locks/" + key + "/acquire",
                             R"({"session_id":")" + bob + R"(","ns":"tenant-2"})");
  EXPECT_EQ(other_ns.status, 200) << other_ns.body;
}

TEST_P(ServerEndToEnd, BadInputIs400NamingTheField) {
  const auto sid = open_session("alice");
  const auto key = fresh_key();
  struct Case {
    std::string method, target, body, field;
  };
  const std::vector<Case> cases = {
      {"POST", "/v1/sessions", "{not json", "body"},
      {"POST", "/v1/sessions", "[1,2]", "body"},
      {"POST", "/v1/sessions", "{}", "owner"},
      {"POST", "/v1/sessions", R"({"owner":7})", "owner"},
      {"POST", "/v1/sessions", R"({"owner":"a","ttl_ms":10})", "ttl_ms"},
      {"POST", "/v1/sessions", R"({"owner":"a","ttl_ms":"5s"})", "ttl_ms"},
      {"POST", "/v1/sessions", R"({"owner":"a","colour":"red"})", "colour"},
      {"POST", "/v1/sessions", R"({"owner":"a","lock_delay_ms":-1})", "lock_delay_ms"},
      {"POST", "/v1/sessions", R"({"owner":"a","lock_delay_ms":60001})", "lock_delay_ms"},
      {"POST", "/v1/sessions", R"({"owner":"a","lock_delay_ms":"2s"})", "lock_delay_ms"},
      {"POST", "/v1/locks/" + key + "/acquire", "{}", "session_id"},
      {"POST", "/v1/locks/" + key + "/acquire", R"({"session_id":")" + sid + R"(","ttl_ms":999})",
       "ttl_ms"},
      {"POST", "/v1/locks/" + key + "/acquire",
       R"({"session_id":")" + sid + R"(","ttl_ms":99999999999})", "ttl_ms"},
      {"POST", "/v1/locks/" + key + "/acquire",
       R"({"session_id":")" + sid + R"(","wait_ms":999999999})", "wait_ms"},
      {"POST", "/v1/locks/" + key + "/acquire", R"({"session_id":")" + sid + R"(","ns":"a b"})",
       "ns"},
      {"POST", "/v1/locks/" + key + "/acquire", R"({"session_id":"bad id!"})", "session_id"},
      {"POST", "/v1/locks/" + key + "/extend", R"({"session_id":")" + sid + R"("})",
       "fencing_token"},
      {"POST", "/v1/locks/" + key + "/extend",
       R"({"session_id":")" + sid + R"(","fencing_token":-3})", "fencing_token"},
      {"DELETE", "/v1/locks/" + key + "?session_id=" + sid + "&fencing_token=abc", "",
       "fencing_token"},
      {"DELETE", "/v1/locks/" + key + "?fencing_token=1", "", "session_id"},
      {"GET", "/v1/locks?limit=0", "", "limit"},
      {"GET", "/v1/locks?limit=lots", "", "limit"},
      {"GET", "/v1/locks/bad%zzkey", "", "path"},
      {"GET", "/v1/locks/bad%01key", "", "key"},
  };
  for (const auto& c : cases) {
    const auto result = call(c.method, c.target, c.body);
    EXPECT_EQ(result.status, 400) << c.method << " " << c.target << " " << c.body << " -> "
                                  << result.body;
    EXPECT_EQ(result.error_code(), "invalid_argument") << result.body;
    EXPECT_EQ(result.json.is_object() && result.json.as_object().contains("error")
                  ? std::string(result.json.at("error").at("field").as_string())
                  : "",
              c.field)
        << c.target << " " << c.body;
  }
  const auto large = call("POST", "/v1/sessions", std::string(70 * 1024, ' '));
  EXPECT_EQ(large.status, 413);
  EXPECT_EQ(large.error_code(), "payload_too_large");
  EXPECT_EQ(call("GET", "/v1/nothing-here").status, 404);
  EXPECT_EQ(call("PUT", "/v1/locks/" + key + "/acquire").status, 405);
  // The server is still fine afterwards.
  EXPECT_EQ(call("GET", "/healthz").status, 200);
}

// Keys, owners and namespaces are echoed in JSON answers and logs: bytes that are not UTF-8
// (%FF, the overlong %C0%AF) are 400 naming the field, and listing the namespace still works.
TEST_P(ServerEndToEnd, TextThatIsNotUtf8Is400NamingTheField) {
  const auto sid = open_session("alice");
  struct Case {
    std::string method, target, body, field;
  };
  const std::vector<Case> cases = {
      {"GET", "/v1/locks/%FF", "", "key"},
      {"GET", "/v1/locks/a%C0%AFb", "", "key"},
      {"POST", "/v1/locks/x%ED%A0%80/acquire", R"({"session_id":")" + sid + R"("})", "key"},
      {"POST", "/v1/locks/%F4%90%80%80/acquire", R"({"session_id":")" + sid + R"("})", "key"},
      {"DELETE", "/v1/locks/%E2%82?session_id=" + sid + "&fencing_token=1", "", "key"},
      {"GET", "/v1/locks/k?ns=%FF", "", "ns"},
      {"GET", "/v1/locks?prefix=%C0%AF", "", "prefix"},
  };
  for (const auto& c : cases) {
    const auto result = call(c.method, c.target, c.body);
    EXPECT_EQ(result.status, 400) << c.method << " " << c.target << " -> " << result.body;
    ASSERT_TRUE(result.json.is_object()) << "not JSON: " << result.body;
    EXPECT_EQ(std::string(result.json.at("error").at("field").as_string()), c.field) << c.target;
  }
  // A route that echoes the path in its error answers valid JSON even for bytes like these.
  for (const auto& [method, target] :
       {std::pair<std::string, std::string>{"GET", "/v1/%FF/x"}, {"PUT", "/v1/locks/k/%C0%AF"}}) {
    const auto result = call(method, target);
    EXPECT_TRUE(result.status == 404 || result.status == 405) << target << " " << result.status;
    EXPECT_TRUE(result.json.is_object()) << "not JSON: " << result.body;
  }
  // Valid multi-byte UTF-8 is a key like any other.
  const auto key = fresh_key() + "-%C3%A9%E2%82%AC%F0%9F%94%92";
  EXPECT_EQ(acquire(key, sid).status, 200);
  const auto listed = call("GET", "/v1/locks");
  EXPECT_EQ(listed.status, 200);
  EXPECT_TRUE(listed.json.is_object()) << listed.body;
}

TEST_P(ServerEndToEnd, AdminRevokeNeedsTheToken) {
  const auto sid = open_session("alice");
  const auto key = fresh_key();
  const auto granted = acquire(key, sid);
  ASSERT_EQ(granted.status, 200);
  const auto target = "/v1/admin/locks/" + key + "/revoke";
  EXPECT_EQ(call("POST", target).status, 401);
  EXPECT_EQ(call("POST", target).error_code(), "unauthorized");
  EXPECT_EQ(call("POST", target, "", {{"Authorization", "Bearer wrong"}}).status, 403);
  const auto revoked =
      call("POST", target, "", {{"Authorization", std::string("Bearer ") + kAdminToken}});
  ASSERT_EQ(revoked.status, 200) << revoked.body;
  EXPECT_TRUE(revoked.json.at("revoked").as_bool());
  EXPECT_EQ(token_of(revoked), token_of(granted));
  EXPECT_EQ(revoked.json.at("owner").as_string(), "alice");
  EXPECT_EQ(call("GET", "/v1/locks/" + key).status, 404);
  const auto nothing =
      call("POST", target, "", {{"Authorization", std::string("Bearer ") + kAdminToken}});
  EXPECT_FALSE(nothing.json.at("revoked").as_bool());

  DlockdProcess no_admin(options());
  EXPECT_EQ(
      call("POST", target, "", {{"Authorization", std::string("Bearer ") + kAdminToken}}, &no_admin)
          .status,
      403);
}

TEST_P(ServerEndToEnd, ThirtyTwoClientsRaceOneKeyOneGrantPerRound) {
  constexpr int kClients = 32;
  constexpr int kRounds = 5;
  std::vector<std::string> sessions;
  for (int i = 0; i < kClients; ++i)
    sessions.push_back(open_session("client-" + std::to_string(i)));
  const auto key = fresh_key();
  std::uint64_t last = 0;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<HttpResult> results(kClients);
    std::barrier start(kClients);
    std::vector<std::thread> threads;
    for (int i = 0; i < kClients; ++i) {
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        results[i] = acquire(key, sessions[i]);
      });
    }
    for (auto& thread : threads) thread.join();
    int granted = -1;
    for (int i = 0; i < kClients; ++i) {
      if (results[i].status == 200) {
        EXPECT_EQ(granted, -1) << "round " << round << ": two grants";
        granted = i;
      } else {
        EXPECT_EQ(results[i].status, 409) << results[i].body;
        EXPECT_EQ(results[i].error_code(), "held");
      }
    }
    ASSERT_NE(granted, -1) << "round " << round << ": nobody got the lock";
    const auto token = token_of(results[granted]);
    EXPECT_GT(token, last);
    last = token;
    ASSERT_EQ(release(key, sessions[granted], token).status, 204);
  }
}

TEST_P(ServerEndToEnd, WaiterIsGrantedOnReleaseWithAGreaterToken) {
  const auto alice = open_session("alice");
  const auto bob = open_session("bob");
  const auto key = fresh_key();
  const auto held = acquire(key, alice);
  ASSERT_EQ(held.status, 200);
  HttpResult waited;
  std::thread waiter([&] { waited = acquire(key, bob, 30000, 20000); });
  ASSERT_TRUE(wait_for_waiters(1));
  ASSERT_EQ(release(key, alice, token_of(held)).status, 204);
  waiter.join();
  ASSERT_EQ(waited.status, 200) << waited.body;
  EXPECT_EQ(waited.json.at("session_id").as_string(), bob);
  EXPECT_GT(token_of(waited), token_of(held));
}

// "lease": "session" (C3, ADR-0018): no TTL of its own, the session's lifetime answered; closing
// the session releases it to a waiting session-bound acquire, which gets a greater token; extend
// changes nothing and answers the session's lifetime.
TEST_P(ServerEndToEnd, SessionBoundLockLivesAndDiesWithItsSession) {
  const auto alice = open_session("alice", 60000);
  const auto bob = open_session("bob", 60000);
  const auto key = fresh_key();
  const auto target = "/v1/locks/" + key + "/acquire";
  const auto both =
      call("POST", target, R"({"session_id":")" + alice + R"(","lease":"session","ttl_ms":5000})");
  EXPECT_EQ(both.status, 400);
  EXPECT_EQ(both.json.at("error").at("field").as_string(), "ttl_ms");
  const auto bogus = call("POST", target, R"({"session_id":")" + alice + R"(","lease":"forever"})");
  EXPECT_EQ(bogus.status, 400);
  EXPECT_EQ(bogus.json.at("error").at("field").as_string(), "lease");

  const auto held = call("POST", target, R"({"session_id":")" + alice + R"(","lease":"session"})");
  ASSERT_EQ(held.status, 200) << held.body;
  EXPECT_EQ(held.json.at("lease").as_string(), "session");
  EXPECT_GT(held.json.at("ttl_ms").as_int64(), 50000);
  EXPECT_LE(held.json.at("ttl_ms").as_int64(), 60000);
  EXPECT_EQ(call("GET", "/v1/locks/" + key).json.at("lease").as_string(), "session");

  HttpResult waited;
  std::thread waiter([&] {
    waited = call("POST", target,
                  R"({"session_id":")" + bob + R"(","lease":"session","wait_ms":20000})");
  });
  ASSERT_TRUE(wait_for_waiters(1));
  EXPECT_EQ(call("DELETE", "/v1/sessions/" + alice).status, 204);
  waiter.join();
  ASSERT_EQ(waited.status, 200) << waited.body;
  EXPECT_EQ(waited.json.at("session_id").as_string(), bob);
  EXPECT_EQ(waited.json.at("lease").as_string(), "session");
  EXPECT_GT(token_of(waited), token_of(held));

  const auto extended = call("POST", "/v1/locks/" + key + "/extend",
                             R"({"session_id":")" + bob + R"(","fencing_token":)" +
                                 std::to_string(token_of(waited)) + R"(,"ttl_ms":5000})");
  ASSERT_EQ(extended.status, 200) << extended.body;
  EXPECT_EQ(token_of(extended), token_of(waited));
  EXPECT_EQ(extended.json.at("lease").as_string(), "session");
  EXPECT_GT(extended.json.at("ttl_ms").as_int64(), 50000) << "the session's, not the 5 s asked";
}

TEST_P(ServerEndToEnd, HolderReacquiresWhileOthersWait) {
  const auto alice = open_session("alice");
  const auto bob = open_session("bob");
  const auto key = fresh_key();
  const auto held = acquire(key, alice);
  ASSERT_EQ(held.status, 200);
  HttpResult waited;
  std::thread waiter([&] { waited = acquire(key, bob, 30000, 20000); });
  ASSERT_TRUE(wait_for_waiters(1));
  // Re-entrant: the holder does not queue behind a waiter that waits for its own lock.
  const auto again = acquire(key, alice);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_GT(token_of(again), token_of(held));
  ASSERT_EQ(release(key, alice, token_of(again)).status, 204);
  waiter.join();
  ASSERT_EQ(waited.status, 200) << waited.body;
  EXPECT_GT(token_of(waited), token_of(again));
}

TEST_P(ServerEndToEnd, WaiterCapAnswers429AndTheServerCarriesOn) {
  DlockdProcess capped(options({"--server-max-waiters", "1"}));
  const auto alice = open_session("alice", 60000, &capped);
  const auto bob = open_session("bob", 60000, &capped);
  const auto carol = open_session("carol", 60000, &capped);
  const auto key = fresh_key();
  const auto held = acquire(key, alice, 30000, 0, &capped);
  ASSERT_EQ(held.status, 200);
  HttpResult waited;
  std::thread waiter([&] { waited = acquire(key, bob, 30000, 20000, &capped); });
  ASSERT_TRUE(wait_for_waiters(1, &capped));
  const auto refused = acquire(key, carol, 30000, 5000, &capped);
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(refused.error_code(), "too_many_requests");
  EXPECT_EQ(refused.headers.count("retry-after"), 1u);
  EXPECT_EQ(call("GET", "/healthz", "", {}, &capped).status, 200);
  ASSERT_EQ(release(key, alice, token_of(held), &capped).status, 204);
  waiter.join();
  EXPECT_EQ(waited.status, 200) << waited.body;
}

// The value of a counter or gauge line "name{backend=\"...\"} value" in /metrics.
double metric(const std::string& text, const std::string& name) {
  const auto at = text.find("\n" + name + "{");
  if (at == std::string::npos) return -1;
  const auto space = text.find(' ', at + 1);
  return std::stod(text.substr(space + 1, text.find('\n', space) - space - 1));
}

TEST_P(ServerEndToEnd, HotKeyWaitersDoNotHerdTheBackend) {
  constexpr int kWaiters = 16;
  const auto alice = open_session("alice");
  std::vector<std::string> sessions;
  for (int i = 0; i < kWaiters; ++i) sessions.push_back(open_session("w" + std::to_string(i)));
  const auto key = fresh_key();
  const auto held = acquire(key, alice);
  ASSERT_EQ(held.status, 200);
  const double before =
      metric(call("GET", "/metrics").body, "dlock_backend_acquire_attempts_total");
  ASSERT_GE(before, 0);
  // Each waiter releases as soon as it is granted, handing the lock down the queue.
  std::vector<std::uint64_t> tokens(kWaiters, 0);
  std::vector<int> release_status(kWaiters, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      const auto granted = acquire(key, sessions[i], 30000, 30000);
      if (granted.status != 200) return;
      tokens[i] = token_of(granted);
      // The granted token must be the live grant: releasing it works.
      release_status[i] = release(key, sessions[i], tokens[i]).status;
    });
  }
  ASSERT_TRUE(wait_for_waiters(kWaiters));
  ASSERT_EQ(release(key, alice, token_of(held)).status, 204);
  for (auto& thread : threads) thread.join();
  std::set<std::uint64_t> distinct(tokens.begin(), tokens.end());
  EXPECT_EQ(distinct.size(), static_cast<std::size_t>(kWaiters)) << "every waiter granted once";
  EXPECT_EQ(distinct.count(0), 0u);
  for (int i = 0; i < kWaiters; ++i) {
    EXPECT_EQ(release_status[i], 204) << "waiter " << i << " was answered a superseded token";
  }
  const double attempts =
      metric(call("GET", "/metrics").body, "dlock_backend_acquire_attempts_total") - before;
  // One attempt by the first head while held, then one hand-over per release: about one
  // backend write per grant, not one per waiter per release.
  EXPECT_LE(attempts, kWaiters + 3) << "backend writes for " << kWaiters << " grants";
  EXPECT_GE(attempts, kWaiters);
}

// A holder keeps extending past its first expiry while bob waits. The lock's reported expiry
// must follow the extends (on etcd the grant's record keeps its first expiry: an extend renews
// the lease without rewriting the key, ADR-0011), or the waiter is woken for a retry every
// 10 ms -- one backend write each -- for as long as the holder extends.
TEST_P(ServerEndToEnd, ExtendedHolderDoesNotMakeItsWaitersPoll) {
  const auto alice = open_session("alice");
  const auto bob = open_session("bob");
  const auto key = fresh_key();
  const auto held = acquire(key, alice, 1000);
  ASSERT_EQ(held.status, 200) << held.body;
  HttpResult waited;
  std::thread waiter([&] { waited = acquire(key, bob, 30000, 20000); });
  ASSERT_TRUE(wait_for_waiters(1));
  const double before =
      metric(call("GET", "/metrics").body, "dlock_backend_acquire_attempts_total");
  // Four extends 500 ms apart: the lock lives about 2.5 s, 1.5 s past its first expiry.
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(milliseconds(500));
    const auto extended =
        call("POST", "/v1/locks/" + key + "/extend",
             json::serialize(json::object{
                 {"session_id", alice}, {"fencing_token", token_of(held)}, {"ttl_ms", 1000}}));
    ASSERT_EQ(extended.status, 200) << extended.body;
  }
  const double during =
      metric(call("GET", "/metrics").body, "dlock_backend_acquire_attempts_total") - before;
  waiter.join();
  ASSERT_EQ(waited.status, 200) << waited.body;
  std::cout << GetParam() << ": " << during << " backend acquire attempts while extended\n";
  EXPECT_LE(during, 10) << "backend acquire attempts for one waiter while the holder extended";
}

TEST_P(ServerEndToEnd, WaiterIsGrantedAtHolderExpiry) {
  const auto alice = open_session("alice");
  const auto bob = open_session("bob");
  const auto key = fresh_key();
  const auto held = acquire(key, alice, 1000);
  ASSERT_EQ(held.status, 200);
  const auto waited = acquire(key, bob, 30000, 20000);
  ASSERT_EQ(waited.status, 200) << waited.body;
  EXPECT_GT(token_of(waited), token_of(held));
}

TEST_P(ServerEndToEnd, WaiterGivesUpAfterWaitMsWith409) {
  const auto alice = open_session("alice");
  const auto bob = open_session("bob");
  const auto key = fresh_key();
  ASSERT_EQ(acquire(key, alice).status, 200);
  const auto waited = acquire(key, bob, 30000, 300);
  EXPECT_EQ(waited.status, 409);
  EXPECT_EQ(waited.error_code(), "held");
  EXPECT_TRUE(wait_for_waiters(0));
}

TEST_P(ServerEndToEnd, SessionExpiryReleasesItsLocks) {
  const auto alice = open_session("alice", 1000);  // never kept alive
  const auto bob = open_session("bob");
  const auto key = fresh_key();
  const auto held = acquire(key, alice, 60000);
  ASSERT_EQ(held.status, 200);
  const auto waited = acquire(key, bob, 30000, 20000);
  ASSERT_EQ(waited.status, 200) << waited.body;
  EXPECT_GT(token_of(waited), token_of(held));
  EXPECT_EQ(call("POST", "/v1/sessions/" + alice + "/keepalive").error_code(), "session_not_found");
}

TEST_P(ServerEndToEnd, TwoServersOnOneDatabaseHandOverToEachOthersWaiters) {
  if (GetParam() == "sqlite") {
    GTEST_SKIP() << "the embedded store is served by one dlockd";
  }
  DlockdProcess other(options());
  const auto alice = open_session("alice");
  const auto bob = open_session("bob", 60000, &other);
  const auto key = fresh_key();
  const auto held = acquire(key, alice);
  ASSERT_EQ(held.status, 200);
  HttpResult waited;
  std::thread waiter([&] { waited = acquire(key, bob, 30000, 20000, &other); });
  ASSERT_TRUE(wait_for_waiters(1, &other));
  ASSERT_EQ(release(key, alice, token_of(held)).status, 204);
  waiter.join();
  ASSERT_EQ(waited.status, 200) << waited.body;
  EXPECT_GT(token_of(waited), token_of(held));
}

TEST_P(ServerEndToEnd, ShutdownAnswersWaitersWith503AndExitsCleanly) {
  const auto alice = open_session("alice");
  const auto bob = open_session("bob");
  const auto key = fresh_key();
  ASSERT_EQ(acquire(key, alice).status, 200);
  HttpResult waited;
  std::thread waiter([&] { waited = acquire(key, bob, 30000, 20000); });
  ASSERT_TRUE(wait_for_waiters(1));
  server_->process().signal(SIGTERM);
  waiter.join();
  EXPECT_EQ(waited.status, 503) << waited.body;
  EXPECT_EQ(waited.error_code(), "unavailable");
  EXPECT_EQ(waited.headers.count("retry-after"), 1u);
  EXPECT_EQ(server_->process().wait(seconds(15)), 0);
}

TEST_P(ServerEndToEnd, KillNineLosesNoAcknowledgedGrant) {
  const auto sid = open_session("alice");
  const auto key = fresh_key();
  const auto granted = acquire(key, sid, 60000);
  ASSERT_EQ(granted.status, 200);
  server_->process().kill_now();
  DlockdProcess restarted(server_->options());
  const auto read = call("GET", "/v1/locks/" + key, "", {}, &restarted);
  ASSERT_EQ(read.status, 200) << read.body;
  EXPECT_EQ(token_of(read), token_of(granted));
  const auto again = acquire(key, sid, 30000, 0, &restarted);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_GT(token_of(again), token_of(granted));
}

// Takes the backend away under a running dlockd: a locked database file, a crashed
// PostgreSQL, a killed etcd member. Undone on destruction.
class BackendOutage {
 public:
  BackendOutage(const std::string& backend, const DlockdOptions& options) : backend_(backend) {
    if (backend_ == "sqlite") {
      sqlite3_open(options.sqlite_path.c_str(), &blocker_);
      EXPECT_EQ(sqlite3_exec(blocker_, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
#ifdef DLOCK_WITH_PG
    } else if (backend_ == "pg") {
      testing::shared_postgres().crash();
#endif
#ifdef DLOCK_WITH_ETCD
    } else if (backend_ == "etcd") {
      testing::shared_etcd().kill(0);
#endif
    }
  }
  BackendOutage(const BackendOutage&) = delete;
  BackendOutage& operator=(const BackendOutage&) = delete;
  ~BackendOutage() {
    if (blocker_ != nullptr) {
      sqlite3_exec(blocker_, "ROLLBACK", nullptr, nullptr, nullptr);
      sqlite3_close(blocker_);
#ifdef DLOCK_WITH_PG
    } else if (backend_ == "pg") {
      testing::shared_postgres().start();
#endif
#ifdef DLOCK_WITH_ETCD
    } else if (backend_ == "etcd") {
      testing::shared_etcd().start(0);
#endif
    }
  }

 private:
  std::string backend_;
  sqlite3* blocker_ = nullptr;
};

TEST_P(ServerEndToEnd, BackendOutageIs503NeverHeld) {
  DlockdProcess server(options({"--backend-timeout", "1s"}));
  const auto alice = open_session("alice", 60000, &server);
  const auto bob = open_session("bob", 60000, &server);
  const auto key = fresh_key();
  ASSERT_EQ(acquire(key, alice, 60000, 0, &server).status, 200);
  {
    BackendOutage outage(GetParam(), server.options());
    // A held key and a free key alike: the answer is "unavailable", never "held".
    for (const auto& target : {key, fresh_key()}) {
      const auto result = acquire(target, bob, 30000, 0, &server);
      EXPECT_EQ(result.status, 503) << target << ": " << result.body;
      EXPECT_TRUE(result.error_code() == "unavailable" || result.error_code() == "not_leader")
          << result.body;
      EXPECT_EQ(result.headers.count("retry-after"), 1u);
    }
  }
  // dlockd recovers by itself once the backend is back.
  const auto free_key = fresh_key();
  EXPECT_TRUE(
      testing::wait_for([&] { return acquire(free_key, bob, 30000, 0, &server).status == 200; },
                        seconds(60), milliseconds(200)));
}

TEST_P(ServerEndToEnd, MetricsAndHealth) {
  const auto sid = open_session("alice");
  ASSERT_EQ(acquire(fresh_key(), sid).status, 200);
  const auto metrics = call("GET", "/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("dlock_lock_acquire_seconds_bucket{backend=\"" + GetParam() +
                              "\",outcome=\"granted\""),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("dlock_sessions{"), std::string::npos);
  EXPECT_EQ(call("GET", "/healthz").status, 200);
  EXPECT_EQ(call("GET", "/readyz").status, 200);
}

INSTANTIATE_TEST_SUITE_P(Backends, ServerEndToEnd, ::testing::ValuesIn(testing::dlockd_backends()),
                         [](const auto& info) { return info.param; });

// A waiter whose session ends while it waits is answered at once with 404 session_not_found (as
// any request of an ended session is, C3) and leaves the queue; the key is never granted to it.
class EndedSessionWaiter : public ServerEndToEnd {
 protected:
  void expect_dropped_at_once(const std::string& alice, const std::string& bob,
                              const std::function<void()>& end_bobs_session,
                              std::chrono::milliseconds promptly) {
    const auto key = fresh_key();
    const auto held = acquire(key, alice);
    ASSERT_EQ(held.status, 200);
    HttpResult waited;
    std::atomic<bool> answered{false};
    std::thread waiter([&] {
      waited = acquire(key, bob, 30000, 25000);
      answered = true;
    });
    ASSERT_TRUE(wait_for_waiters(1));
    end_bobs_session();
    EXPECT_TRUE(testing::wait_for([&] { return answered.load(); }, promptly))
        << "the waiter of an ended session stayed queued";
    EXPECT_TRUE(wait_for_waiters(0));
    ASSERT_EQ(release(key, alice, token_of(held)).status, 204);
    waiter.join();
    EXPECT_EQ(waited.status, 404) << waited.body;
    EXPECT_EQ(waited.error_code(), "session_not_found");
    EXPECT_EQ(call("GET", "/v1/locks/" + key).error_code(), "lock_not_found");  // nobody's
  }
};

TEST_P(EndedSessionWaiter, ClosedSessionsWaiterIsAnsweredAtOnceAndNeverGranted) {
  const auto alice = open_session("alice");
  const auto bob = open_session("bob");
  expect_dropped_at_once(
      alice, bob, [&] { ASSERT_EQ(call("DELETE", "/v1/sessions/" + bob).status, 204); },
      seconds(3));
}

TEST_P(EndedSessionWaiter, ExpiredSessionsWaiterIsAnsweredAtOnceAndNeverGranted) {
  const auto alice = open_session("alice");
  const auto bob = open_session("bob", 1000);  // never kept alive
  // Expiry (1 s) + the reaper's interval (1 s), far below the 25 s wait.
  expect_dropped_at_once(
      alice, bob, [] {}, seconds(8));
}

INSTANTIATE_TEST_SUITE_P(Backends, EndedSessionWaiter,
                         ::testing::ValuesIn(testing::dlockd_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dlock
