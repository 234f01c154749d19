// End to end through a real dlockd process, on every backend: the C3 routes and their error
// codes (sessions, locks, input checks, admin, metrics and health). The rest of the suite is in
// server_e2e_waiting_test.cc and server_e2e_lifecycle_test.cc (fixture: server_e2e_fixture.h).

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <boost/json.hpp>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "integration/server_e2e_fixture.h"

namespace dlock::e2e {
namespace {

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

// Many keepalives, from many connections at once: each answers its session's full TTL and an
// expiry after its request was sent. On etcd all but the first go through the asynchronous
// heartbeat (docs/adr/0024): answered on the keep-alive stream's reader thread, no worker.
TEST_P(ServerEndToEnd, ConcurrentKeepalivesEachRenewTheirSession) {
  std::vector<std::string> sids;
  for (int n = 0; n < 8; ++n) {
    const auto created =
        call("POST", "/v1/sessions", R"({"owner":"k)" + std::to_string(n) + R"(","ttl_ms":20000})");
    ASSERT_EQ(created.status, 201) << created.body;
    sids.emplace_back(created.json.at("session_id").as_string());
  }
  ASSERT_EQ(call("POST", "/v1/sessions/" + sids[0] + "/keepalive").status, 200);
  std::vector<std::thread> threads;
  std::atomic<int> renewed{0};
  for (const auto& sid : sids) {
    threads.emplace_back([&, sid] {
      for (int round = 0; round < 10; ++round) {
        const auto kept = call("POST", "/v1/sessions/" + sid + "/keepalive");
        if (kept.status == 200 && kept.json.at("ttl_ms").as_int64() == 20000) ++renewed;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(renewed.load(), 80);
  // A closed session is not found, however many keepalives it had.
  EXPECT_EQ(call("DELETE", "/v1/sessions/" + sids[3]).status, 204);
  EXPECT_EQ(call("POST", "/v1/sessions/" + sids[3] + "/keepalive").error_code(),
            "session_not_found");
  EXPECT_EQ(call("POST", "/v1/sessions/" + sids[4] + "/keepalive").status, 200);
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
    // Pacing between acquires until the told deadline.
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_GT(acquires, 0);
}

// A query value percent-encoded (every byte but unreserved ones).
std::string query_encoded(const std::string& text) {
  static const char* const kHex = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

// Cursor paging of GET /v1/locks (C3 "Paging", issue 41): walking the pages by `next` lists every
// grant and every lock-delay once, in (key, token) order, a page at most `limit` entries of both,
// and `next` exactly when more follow -- also when a page ends inside a key's shared holders or
// only delays remain.
TEST_P(ServerEndToEnd, LocksAreListedInPagesWithNothingRepeatedOrSkipped) {
  const auto prefix = fresh_key() + "-";
  const auto alice = open_session("alice"), bob = open_session("bob"),
             carol = open_session("carol");
  const auto delaying = call("POST", "/v1/sessions", R"({"owner":"dave","lock_delay_ms":30000})");
  ASSERT_EQ(delaying.status, 201) << delaying.body;
  const auto dave = std::string(delaying.json.at("session_id").as_string());
  ASSERT_EQ(acquire(prefix + "a", alice).status, 200);
  for (const auto& session : {alice, bob, carol}) {
    const auto shared = call("POST", "/v1/locks/" + prefix + "b/acquire",
                             R"({"session_id":")" + session + R"(","mode":"shared"})");
    ASSERT_EQ(shared.status, 200) << shared.body;
  }
  for (const auto* name : {"c", "e", "f"}) {  // delays, the last two after every grant
    ASSERT_EQ(acquire(prefix + name, dave).status, 200);
    ASSERT_EQ(call("POST", "/v1/admin/locks/" + prefix + name + "/revoke", "",
                   {{"Authorization", std::string("Bearer ") + kAdminToken}})
                  .status,
              200);
  }
  ASSERT_EQ(acquire(prefix + "d", bob).status, 200);

  // (key, token) of every entry, a delay as token 0: the whole listing, then page by page.
  using Entry = std::pair<std::string, std::uint64_t>;
  const auto entries_of = [](const json::value& page) {
    std::vector<Entry> entries;
    for (const auto& lock : page.at("locks").as_array()) {
      entries.emplace_back(std::string(lock.at("key").as_string()),
                           lock.at("fencing_token").to_number<std::uint64_t>());
    }
    for (const auto& delay : page.at("delays").as_array()) {
      entries.emplace_back(std::string(delay.at("key").as_string()), 0);
    }
    std::sort(entries.begin(), entries.end());
    return entries;
  };
  const auto whole = call("GET", "/v1/locks?limit=1000&prefix=" + prefix);
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_FALSE(whole.json.as_object().contains("next")) << whole.body;
  const auto all = entries_of(whole.json);
  ASSERT_EQ(all.size(), 8u) << whole.body;  // a, three holders of b, c, d, e, f
  for (const int limit : {1, 2, 3}) {
    std::vector<Entry> walked;
    std::string after;
    for (int page = 0; page < 20; ++page) {
      const auto listed =
          call("GET", "/v1/locks?limit=" + std::to_string(limit) + "&prefix=" + prefix +
                          (after.empty() ? "" : "&after=" + query_encoded(after)));
      ASSERT_EQ(listed.status, 200) << listed.body;
      const auto entries = entries_of(listed.json);
      ASSERT_LE(entries.size(), static_cast<std::size_t>(limit)) << listed.body;
      walked.insert(walked.end(), entries.begin(), entries.end());
      if (!listed.json.as_object().contains("next")) break;
      EXPECT_EQ(entries.size(), static_cast<std::size_t>(limit)) << "`next` on a short page";
      after = std::string(listed.json.at("next").as_string());
    }
    EXPECT_EQ(walked, all) << "pages of " << limit << " repeated, skipped or reordered an entry";
  }
  EXPECT_EQ(call("GET", "/v1/locks?after=zz").json.at("error").at("field").as_string(), "after");
  EXPECT_EQ(call("GET", "/v1/locks?after=1:").status, 400);
  EXPECT_EQ(call("GET", "/v1/locks?after=x:k").status, 400);

  // Every namespace (all_namespaces=true): the same walk, each entry naming its namespace, the
  // cursor carrying it; nothing repeated or skipped.
  const auto other = call("POST", "/v1/locks/" + prefix + "a/acquire?ns=zz-other",
                          R"({"session_id":")" + alice + R"("})");
  ASSERT_EQ(other.status, 200) << other.body;
  std::vector<Entry> expected;
  for (const auto& [key, token] : all) expected.emplace_back("default/" + key, token);
  expected.emplace_back("zz-other/" + prefix + "a", token_of(other));
  std::vector<Entry> walked;
  std::string after;
  for (int page = 0; page < 10000; ++page) {
    const auto listed = call("GET", "/v1/locks?all_namespaces=true&limit=3" +
                                        (after.empty() ? "" : "&after=" + query_encoded(after)));
    ASSERT_EQ(listed.status, 200) << listed.body;
    for (const char* member : {"locks", "delays"}) {
      for (const auto& entry : listed.json.at(member).as_array()) {
        const std::string key(entry.at("key").as_string());
        if (key.rfind(prefix, 0) != 0) continue;  // another test's
        walked.emplace_back(std::string(entry.at("ns").as_string()) + "/" + key,
                            entry.as_object().contains("fencing_token")
                                ? entry.at("fencing_token").to_number<std::uint64_t>()
                                : 0);
      }
    }
    if (!listed.json.as_object().contains("next")) break;
    after = std::string(listed.json.at("next").as_string());
  }
  std::sort(walked.begin(), walked.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(walked, expected) << "every namespace's pages repeated or skipped an entry";
  EXPECT_EQ(call("GET", "/v1/locks?all_namespaces=true&ns=a").json.at("error").at("field"), "ns");
  EXPECT_EQ(call("GET", "/v1/locks?all_namespaces=true&prefix=a").json.at("error").at("field"),
            "prefix");
  EXPECT_EQ(call("GET", "/v1/locks?all_namespaces=1").json.at("error").at("field"),
            "all_namespaces");
  EXPECT_EQ(call("GET", "/v1/locks?all_namespaces=true&after=1:nons").status, 400);
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

// Milliseconds since the epoch of a C3 time ("2026-12-06T08:18:51.267Z").
std::int64_t unix_ms(const json::value& time) {
  std::tm parts{};
  int ms = 0;
  const std::string text(time.as_string());
  std::sscanf(text.c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &parts.tm_year, &parts.tm_mon, &parts.tm_mday,
              &parts.tm_hour, &parts.tm_min, &parts.tm_sec, &ms);
  parts.tm_year -= 1900;
  parts.tm_mon -= 1;
  return static_cast<std::int64_t>(timegm(&parts)) * 1000 + ms;
}

// Lock-delay is visible (C3 "Lock-delay", issue 36 item 8): after a revoke, the key's GET (404)
// and the list name the delay's end, a refused acquire says why, and an administrator's
// clear-delay frees the key at once -- for a waiting acquire too.
TEST_P(ServerEndToEnd, LockDelayIsShownAndAnAdministratorClearsIt) {
  const auto opened =
      call("POST", "/v1/sessions",
           json::serialize(json::object{{"owner", "alice"}, {"lock_delay_ms", 60000}}));
  ASSERT_EQ(opened.status, 201) << opened.body;
  const std::string alice(opened.json.at("session_id").as_string());
  const auto bob = open_session("bob");
  const auto key = fresh_key();
  const std::map<std::string, std::string> admin{
      {"Authorization", std::string("Bearer ") + kAdminToken}};
  ASSERT_EQ(acquire(key, alice).status, 200);
  ASSERT_EQ(call("POST", "/v1/admin/locks/" + key + "/revoke", "", admin).status, 200);

  const auto read = call("GET", "/v1/locks/" + key);
  EXPECT_EQ(read.status, 404);
  EXPECT_EQ(read.error_code(), "lock_not_found");
  ASSERT_TRUE(read.json.at("error").as_object().contains("delayed_until")) << read.body;
  const auto until = read.json.at("error").at("delayed_until");
  const auto listed = call("GET", "/v1/locks?prefix=" + key);
  ASSERT_EQ(listed.status, 200) << listed.body;
  EXPECT_TRUE(listed.json.at("locks").as_array().empty());
  ASSERT_EQ(listed.json.at("delays").as_array().size(), 1u) << listed.body;
  EXPECT_EQ(listed.json.at("delays").at(0).at("key").as_string(), key);
  // etcd reads the end off the delay's lease (whole seconds, rounded up) at every read.
  const auto same_end = [&](const json::value& other) {
    return GetParam() == "etcd" ? std::abs(unix_ms(other) - unix_ms(until)) <= 2000
                                : other == until;
  };
  EXPECT_TRUE(same_end(listed.json.at("delays").at(0).at("delayed_until"))) << listed.body;
  EXPECT_GT(unix_ms(until), unix_ms(opened.json.at("expires_at")) - 5000)
      << "the delay of 60 s ends before the revoke: " << read.body;
  const auto refused = acquire(key, bob);
  EXPECT_EQ(refused.status, 409);
  EXPECT_EQ(refused.error_code(), "held");
  EXPECT_TRUE(same_end(refused.json.at("error").at("delayed_until"))) << refused.body;
  EXPECT_NE(refused.body.find("lock-delay"), std::string::npos) << refused.body;

  const auto target = "/v1/admin/locks/" + key + "/clear-delay";
  EXPECT_EQ(call("POST", target).status, 401);
  EXPECT_EQ(call("POST", target, "", {{"Authorization", "Bearer wrong"}}).status, 403);
  HttpResult waited;
  std::thread waiter([&] { waited = acquire(key, bob, 30000, 20000); });
  EXPECT_TRUE(wait_for_waiters(1)) << "the waiting acquire was never queued";
  const auto cleared = call("POST", target, "", admin);
  ASSERT_EQ(cleared.status, 200) << cleared.body;
  EXPECT_TRUE(cleared.json.at("cleared").as_bool());
  waiter.join();
  EXPECT_EQ(waited.status, 200) << "the waiter was not granted once the delay was cleared: "
                                << waited.body;
  EXPECT_EQ(call("GET", "/v1/locks?prefix=" + key).json.at("delays").as_array().size(), 0u);
  EXPECT_FALSE(call("POST", target, "", admin).json.at("cleared").as_bool());
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

// The figure of a /metrics line starting with `series` (name and labels), or -1 without one.
double metric_value(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

// C4: dlock_held_locks counts the store's live grants by mode (refreshed at most once a second,
// in the background of a scrape); dlock_lock_hold_seconds observes a grant when it ends; the
// caps the alert rules divide by are exported.
TEST_P(ServerEndToEnd, HeldLocksHoldDurationsAndCaps) {
  const auto sid = open_session("alice");
  const auto key = fresh_key();
  const auto granted = acquire(key, sid);
  ASSERT_EQ(granted.status, 200) << granted.body;
  const std::string labels = "{backend=\"" + GetParam() + "\",mode=\"exclusive\"}";
  std::string text;
  EXPECT_TRUE(testing::wait_for(
      [&] {
        text = call("GET", "/metrics").body;
        return metric_value(text, "dlock_held_locks" + labels) >= 1;
      },
      seconds(10)))
      << text;
  const auto held_before = metric_value(text, "dlock_lock_hold_seconds_count" + labels);
  EXPECT_EQ(metric_value(text, R"(dlock_limit{limit="server.max.sessions"})"), 100000) << text;
  // Real time: the hold's length is what dlock_lock_hold_seconds measures.
  std::this_thread::sleep_for(milliseconds(300));
  ASSERT_EQ(release(key, sid, token_of(granted)).status, 204);
  text = call("GET", "/metrics").body;
  EXPECT_EQ(metric_value(text, "dlock_lock_hold_seconds_count" + labels), held_before + 1) << text;
  EXPECT_GE(metric_value(text, "dlock_lock_hold_seconds_sum" + labels), 0.3) << text;
  EXPECT_EQ(metric_value(text, "dlock_lock_holds_unmeasured_total{backend=\"" + GetParam() + "\"}"),
            0)
      << text;
}

INSTANTIATE_TEST_SUITE_P(Backends, ServerEndToEnd, ::testing::ValuesIn(testing::dlockd_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dlock::e2e
