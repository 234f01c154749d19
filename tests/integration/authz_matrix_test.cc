// The authorization matrix of contract C6 end to end, through a real dlockd with a tokens file,
// on every backend: principals (reader on a, locker on a, locker on b*, admin, an unknown token,
// no token) x routes (open session, acquire, extend, release, keepalive, close, get, list,
// revoke, clear-delay, and the holder and election routes) x namespace (allowed or not) x session
// (the caller's own or another principal's) -> the expected status; that nothing changes when a
// request is refused; that lock reads show session_id only to the session's principal and to
// admins; and the failure throttle, which never refuses a valid token.

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <thread>

#include "auth/crypto.h"
#include "auth/permissions.h"
#include "auth/tokens_file.h"
#include "support/dlockd_backends.h"
#include "support/dlockd_process.h"
#include "support/subprocess.h"

namespace dlock {
namespace {

using testing::DlockdOptions;
using testing::DlockdProcess;
using testing::HttpResult;
namespace json = boost::json;

// A caller of the matrix: its name, its bearer token ("" = no header) and its permissions.
struct Caller {
  std::string name;
  std::string token;
  std::string permissions;  // "" for the unknown token and for no token
  bool listed = true;       // in the tokens file
};

// The semaphore routes and the shared acquire (ADR-0020) are rows of their own: the same roles
// and the same ownership checks as the lock routes they mirror.
enum class Route {
  kOpen,
  kAcquire,
  kExtend,
  kRelease,
  kKeepalive,
  kClose,
  kGet,
  kList,
  kRevoke,
  kClearDelay,
  kSharedAcquire,
  kPermitAcquire,
  kPermitExtend,
  kPermitRelease,
  kSemaphoreGet,
  kCampaign,
  kProclaim,
  kResign,
  kElectionGet,
  kSessionList,
  kSessionGet,
  kWatch,
  kListEveryNamespace
};
constexpr Route kRoutes[] = {Route::kOpen,
                             Route::kAcquire,
                             Route::kExtend,
                             Route::kRelease,
                             Route::kKeepalive,
                             Route::kClose,
                             Route::kGet,
                             Route::kList,
                             Route::kRevoke,
                             Route::kClearDelay,
                             Route::kSharedAcquire,
                             Route::kPermitAcquire,
                             Route::kPermitExtend,
                             Route::kPermitRelease,
                             Route::kSemaphoreGet,
                             Route::kCampaign,
                             Route::kProclaim,
                             Route::kResign,
                             Route::kElectionGet,
                             Route::kSessionList,
                             Route::kSessionGet,
                             Route::kWatch,
                             Route::kListEveryNamespace};

const char* name_of(Route route) {
  static const char* kNames[] = {"open",          "acquire",        "extend",
                                 "release",       "keepalive",      "close",
                                 "get",           "list",           "revoke",
                                 "clear-delay",   "shared-acquire", "permit-acquire",
                                 "permit-extend", "permit-release", "semaphore-get",
                                 "campaign",      "proclaim",       "resign",
                                 "election-get",  "session-list",   "session-get",
                                 "watch",         "list-all"};
  return kNames[static_cast<int>(route)];
}

// The holder-set rows: with the unknown token they are run by a test of their own (a fresh dlockd),
// since one address may fail authentication only 10 times in a burst (C6).
bool holder_route(Route route) {
  return route >= Route::kSharedAcquire && route < Route::kSessionList;
}
// The session views (C3 "Sessions") and the watch: a third group, for the same reason.
bool session_view_route(Route route) { return route >= Route::kSessionList; }

bool uses_namespace(Route route) {
  return route != Route::kOpen && route != Route::kKeepalive && route != Route::kClose &&
         route != Route::kSessionList && route != Route::kSessionGet &&
         route != Route::kListEveryNamespace;
}
bool uses_session(Route route) {
  return route == Route::kAcquire || route == Route::kExtend || route == Route::kRelease ||
         route == Route::kKeepalive || route == Route::kClose || route == Route::kSharedAcquire ||
         route == Route::kPermitAcquire || route == Route::kPermitExtend ||
         route == Route::kPermitRelease || route == Route::kCampaign || route == Route::kProclaim ||
         route == Route::kResign || route == Route::kSessionGet;
}

class AuthzMatrix : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("authz");
    callers_ = {
        {"reader", auth::random_token(), "read:a"},    {"locker-a", auth::random_token(), "lock:a"},
        {"locker-b", auth::random_token(), "lock:b*"}, {"ops", auth::random_token(), "admin:*"},
        {"stranger", auth::random_token(), "", false}, {"nobody", "", "", false}};
    victim_ = {"victim", auth::random_token(), "lock:*"};
    std::ofstream file(dir_ + "/tokens");
    for (const auto& caller : callers_) {
      if (!caller.listed) continue;
      file << auth::tokens_file_line(caller.name, caller.token,
                                     auth::parse_permissions(caller.permissions))
           << "\n";
    }
    file << auth::tokens_file_line(victim_.name, victim_.token,
                                   auth::parse_permissions(victim_.permissions))
         << "\n";
    file.close();
    DlockdOptions options = testing::dlockd_options(GetParam(), "dlock_authz");
    options.log_level = "info";
    options.extra_args = {"--auth-tokens-file", dir_ + "/tokens"};
    server_ = std::make_unique<DlockdProcess>(options);
    run_ = std::to_string(::getpid()) + "-" + std::to_string(++runs_);
  }

  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  HttpResult call(const Caller& caller, const std::string& method, const std::string& target,
                  const json::object& body = {}) {
    std::map<std::string, std::string> headers;
    if (!caller.token.empty()) headers["Authorization"] = "Bearer " + caller.token;
    return testing::http_call(server_->address(), method, target,
                              body.empty() ? "" : json::serialize(body), headers);
  }

  std::string open_session(const Caller& caller) {
    const auto result = call(caller, "POST", "/v1/sessions", {{"owner", caller.name + "-app"}});
    EXPECT_EQ(result.status, 201) << caller.name << " " << result.body;
    return result.status == 201 ? std::string(result.json.at("session_id").as_string()) : "";
  }

  // A lock on a fresh key in `ns` held by `session` of `caller`: {key, fencing token}.
  std::pair<std::string, std::uint64_t> hold(const Caller& caller, const std::string& session,
                                             const std::string& ns) {
    const std::string key = "k-" + run_ + "-" + std::to_string(++keys_);
    const auto result = call(caller, "POST", "/v1/locks/" + key + "/acquire?ns=" + ns,
                             {{"session_id", session}, {"ttl_ms", 60000}});
    EXPECT_EQ(result.status, 200) << result.body;
    return {key,
            result.status == 200 ? result.json.at("fencing_token").to_number<std::uint64_t>() : 0};
  }

  // Leadership of a fresh election in `ns` for `session` of `caller`: {name, fencing token}.
  std::pair<std::string, std::uint64_t> lead(const Caller& caller, const std::string& session,
                                             const std::string& ns) {
    const std::string name = "e-" + run_ + "-" + std::to_string(++keys_);
    const auto result = call(caller, "POST", "/v1/elections/" + name + "/campaign?ns=" + ns,
                             {{"session_id", session}, {"value", caller.name}});
    EXPECT_EQ(result.status, 200) << result.body;
    return {name,
            result.status == 200 ? result.json.at("fencing_token").to_number<std::uint64_t>() : 0};
  }

  // The live lock as the victim sees it (its own: with session_id), or nullopt.
  std::optional<json::object> lock_of(const std::string& key, const std::string& ns) {
    const auto result = call(victim_, "GET", "/v1/locks/" + key + "?ns=" + ns);
    if (result.status != 200) return std::nullopt;
    return result.json.as_object();
  }

  static bool allows(const Caller& caller, const std::string& role, const std::string& ns) {
    if (caller.permissions.empty()) return false;
    const auth::Role wanted = role == "read"   ? auth::Role::kRead
                              : role == "lock" ? auth::Role::kLock
                                               : auth::Role::kAdmin;
    for (const auto& permission : auth::parse_permissions(caller.permissions)) {
      if (permission.allows(wanted, ns)) return true;
    }
    return false;
  }

  // The status C6 expects, and checks that a refused request changed nothing.
  int expected(const Caller& caller, Route route, const std::string& ns, bool own) {
    if (!caller.listed) return 401;
    switch (route) {
      case Route::kOpen:
        return allows(caller, "lock", "a") || allows(caller, "lock", "b") ? 201 : 403;
      case Route::kGet:
      case Route::kList:
      case Route::kSemaphoreGet:
      case Route::kElectionGet:
      case Route::kWatch:
        return allows(caller, "read", ns) ? 200 : 403;
      case Route::kRevoke:
      case Route::kClearDelay:
        return allows(caller, "admin", ns) ? 200 : 403;
      case Route::kKeepalive:
        return own ? 200 : 404;
      case Route::kSessionList:  // its own sessions, or every one for admin:* (no role needed)
        return 200;
      case Route::kSessionGet:
        return own || caller.permissions == "admin:*" ? 200 : 404;
      case Route::kListEveryNamespace:  // admin:* only (C3 GET /v1/locks?all_namespaces=true)
        return caller.permissions == "admin:*" ? 200 : 403;
      case Route::kClose:
        return own ? 204 : 404;
      case Route::kAcquire:
      case Route::kExtend:
      case Route::kRelease:
      case Route::kSharedAcquire:
      case Route::kPermitAcquire:
      case Route::kPermitExtend:
      case Route::kPermitRelease:
      case Route::kCampaign:
      case Route::kProclaim:
      case Route::kResign:
        if (!allows(caller, "lock", ns)) return 403;
        if (!own) return 404;
        return route == Route::kRelease || route == Route::kPermitRelease || route == Route::kResign
                   ? 204
                   : 200;
    }
    return 0;
  }

  // One cell: sets up what it needs, makes the request, checks the status and that nothing
  // the caller may not do happened to the victim's session and lock.
  void cell(const Caller& caller, Route route, const std::string& ns, bool own) {
    const std::string session = !uses_session(route) ? ""
                                : own                ? open_session(caller)
                                                     : victim_session_;
    const auto [victim_key, victim_token] = hold(victim_, victim_session_, ns);
    std::string key = victim_key;
    std::uint64_t token = victim_token;
    if (own &&
        (route == Route::kExtend || route == Route::kRelease || route == Route::kPermitExtend ||
         route == Route::kPermitRelease) &&
        allows(caller, "lock", ns)) {
      std::tie(key, token) = hold(caller, session, ns);
    }
    if (own && (route == Route::kProclaim || route == Route::kResign) &&
        allows(caller, "lock", ns)) {
      std::tie(key, token) = lead(caller, session, ns);
    }
    // The victim leads an election of its own, which every reader may see (but not its session).
    if (route == Route::kElectionGet)
      std::tie(key, std::ignore) = lead(victim_, victim_session_, ns);
    const std::string fresh = "f-" + run_ + "-" + std::to_string(++keys_);
    HttpResult result;
    switch (route) {
      case Route::kOpen:
        result = call(caller, "POST", "/v1/sessions", {{"owner", "x"}});
        break;
      case Route::kAcquire:
        result = call(caller, "POST", "/v1/locks/" + fresh + "/acquire?ns=" + ns,
                      {{"session_id", session}});
        break;
      case Route::kExtend:
        result = call(caller, "POST", "/v1/locks/" + key + "/extend?ns=" + ns,
                      {{"session_id", session}, {"fencing_token", token}, {"ttl_ms", 90000}});
        break;
      case Route::kRelease:
        result = call(caller, "DELETE",
                      "/v1/locks/" + key + "?ns=" + ns + "&session_id=" + session +
                          "&fencing_token=" + std::to_string(token));
        break;
      case Route::kKeepalive:
        result = call(caller, "POST", "/v1/sessions/" + session + "/keepalive");
        break;
      case Route::kClose:
        result = call(caller, "DELETE", "/v1/sessions/" + session);
        break;
      case Route::kGet:
        result = call(caller, "GET", "/v1/locks/" + key + "?ns=" + ns);
        break;
      case Route::kList:
        result = call(caller, "GET", "/v1/locks?ns=" + ns + "&prefix=" + key);
        break;
      case Route::kRevoke:
        result = call(caller, "POST", "/v1/admin/locks/" + key + "/revoke?ns=" + ns);
        break;
      case Route::kSessionList:
        result = call(caller, "GET", "/v1/sessions?limit=1000");
        break;
      case Route::kSessionGet:
        result = call(caller, "GET", "/v1/sessions/" + session);
        break;
      case Route::kClearDelay:  // of the victim's live lock: nothing to clear, nothing changes
        result = call(caller, "POST", "/v1/admin/locks/" + key + "/clear-delay?ns=" + ns);
        break;
      case Route::kSharedAcquire:
        result = call(caller, "POST", "/v1/locks/" + fresh + "/acquire?ns=" + ns,
                      {{"session_id", session}, {"mode", "shared"}});
        break;
      case Route::kPermitAcquire:
        result = call(caller, "POST", "/v1/semaphores/" + fresh + "/acquire?ns=" + ns,
                      {{"session_id", session}, {"limit", 2}});
        break;
      case Route::kPermitExtend:  // the token names the grant, whichever route carries it
        result = call(caller, "POST", "/v1/semaphores/" + key + "/extend?ns=" + ns,
                      {{"session_id", session}, {"fencing_token", token}, {"ttl_ms", 90000}});
        break;
      case Route::kPermitRelease:
        result = call(caller, "DELETE",
                      "/v1/semaphores/" + key + "?ns=" + ns + "&session_id=" + session +
                          "&fencing_token=" + std::to_string(token));
        break;
      case Route::kSemaphoreGet:
        result = call(caller, "GET", "/v1/semaphores/" + key + "?ns=" + ns);
        break;
      case Route::kCampaign:
        result = call(caller, "POST", "/v1/elections/" + fresh + "/campaign?ns=" + ns,
                      {{"session_id", session}, {"value", "x"}});
        break;
      case Route::kProclaim:  // another's: the victim's lock, which a proclaim would make a leader
        result = call(caller, "POST", "/v1/elections/" + key + "/proclaim?ns=" + ns,
                      {{"session_id", session}, {"fencing_token", token}, {"value", "x"}});
        break;
      case Route::kResign:
        result = call(caller, "POST", "/v1/elections/" + key + "/resign?ns=" + ns,
                      {{"session_id", session}, {"fencing_token", token}});
        break;
      case Route::kElectionGet:
        result = call(caller, "GET", "/v1/elections/" + key + "?ns=" + ns);
        break;
      case Route::kWatch:
        result = call(caller, "GET", "/v1/watch?ns=" + ns + "&key=" + key);
        break;
      case Route::kListEveryNamespace:
        result = call(caller, "GET", "/v1/locks?all_namespaces=true&limit=1000");
        break;
    }
    const int want = expected(caller, route, ns, own);
    const std::string where =
        caller.name + " " + name_of(route) + " ns=" + ns + (own ? " own" : " other's") + " session";
    ++cells_;
    ++cells_per_backend_[GetParam()];
    EXPECT_EQ(result.status, want) << where << ": " << result.body;
    if (want == 401) {
      EXPECT_EQ(result.error_code(), "unauthenticated") << where;
      EXPECT_EQ(result.headers["www-authenticate"], "Bearer") << where;
    }
    if (want == 403) {
      EXPECT_EQ(result.error_code(), "permission_denied") << where;
    }
    if (want == 404) {
      EXPECT_EQ(result.error_code(), "session_not_found") << where;
    }
    if (want == 200 && (route == Route::kGet || route == Route::kList ||
                        route == Route::kSemaphoreGet || route == Route::kElectionGet)) {
      const auto& lock = route == Route::kGet || route == Route::kElectionGet
                             ? result.json.as_object()
                         : route == Route::kList ? result.json.at("locks").at(0).as_object()
                                                 : result.json.at("holders").at(0).as_object();
      // The victim's lock: its session ID only for the victim and for admins (C6).
      EXPECT_EQ(lock.contains("session_id"), allows(caller, "admin", ns)) << where;
      const auto& owner =
          route == Route::kElectionGet ? lock.at("leader").at("owner") : lock.at("owner");
      EXPECT_EQ(owner.as_string(), "victim-app") << where;
    }
    if (want == 200 && route == Route::kListEveryNamespace) {
      // The victim's lock is listed with its namespace, and its session to the admin (C6).
      bool found = false;
      for (const auto& listed : result.json.at("locks").as_array()) {
        if (listed.at("key").as_string() != victim_key) continue;
        found = true;
        EXPECT_EQ(listed.at("ns").as_string(), ns) << where;
        EXPECT_TRUE(listed.as_object().contains("session_id")) << where;
        EXPECT_EQ(listed.at("waiting").to_number<int>(), 0) << where;
      }
      EXPECT_TRUE(found) << where << ": " << result.body;
    }
    if (want == 200 && route == Route::kSessionList) {
      // Its own sessions only; every one (the victim's too) for admin:* (C6).
      bool victims = false;
      for (const auto& listed : result.json.at("sessions").as_array()) {
        const auto& principal = listed.at("principal").as_string();
        EXPECT_TRUE(principal == caller.name || caller.permissions == "admin:*")
            << where << ": listed " << principal << "'s session";
        victims = victims || listed.at("session_id").as_string() == victim_session_;
      }
      EXPECT_EQ(victims, caller.permissions == "admin:*") << where;
    }
    if (route != Route::kRevoke || want != 200) {
      const auto lock = lock_of(victim_key, ns);
      ASSERT_TRUE(lock.has_value()) << where << ": the victim's lock is gone";
      EXPECT_EQ(lock->at("fencing_token").to_number<std::uint64_t>(), victim_token) << where;
      EXPECT_EQ(lock->at("session_id").as_string(), victim_session_) << where;
      EXPECT_FALSE(lock->contains("value")) << where << ": another's proclaim changed the lock";
    }
    EXPECT_EQ(call(victim_, "POST", "/v1/sessions/" + victim_session_ + "/keepalive").status, 200)
        << where << ": the victim's session is gone";
  }

  // The matrix's size: this test's cells and the backend's so far (the three cell tests
  // together are the whole matrix of C6).
  void report_cells() {
    EXPECT_GT(cells_, 0);
    std::cout << "authorization matrix (" << GetParam() << "): " << cells_ << " cells in "
              << ::testing::UnitTest::GetInstance()->current_test_info()->name() << ", "
              << cells_per_backend_[GetParam()] << " on this backend so far\n";
    RecordProperty("cells", cells_);
  }

  std::string dir_;
  std::vector<Caller> callers_;
  Caller victim_;
  std::string victim_session_;
  std::unique_ptr<DlockdProcess> server_;
  std::string run_;
  int keys_ = 0;
  int cells_ = 0;
  static inline int runs_ = 0;
  static inline std::map<std::string, int> cells_per_backend_;
};

TEST_P(AuthzMatrix, EveryPrincipalRouteNamespaceAndSession) {
  victim_session_ = open_session(victim_);
  ASSERT_FALSE(victim_session_.empty());
  // The known callers; the unknown token and the missing header are the tests below.
  for (const auto& caller : callers_) {
    if (!caller.listed) continue;
    for (const Route route : kRoutes) {
      for (const std::string ns : {"a", "bx"}) {
        if (!uses_namespace(route) && ns != "a") continue;
        for (const bool own : {true, false}) {
          if (!uses_session(route) && !own) continue;
          // A caller that cannot open sessions has none of its own.
          if (uses_session(route) && own && expected(caller, Route::kOpen, "", true) != 201) {
            continue;
          }
          cell(caller, route, ns, own);
        }
      }
    }
  }
  report_cells();
}

// The unknown token and the missing header, each route once, on a dlockd of their own: the
// unknown token drains the address's failure throttle (a burst of 10, C6), so the lock and
// session routes and the holder routes are two tests.
TEST_P(AuthzMatrix, UnknownAndMissingTokensOnTheLockAndSessionRoutes) {
  victim_session_ = open_session(victim_);
  ASSERT_FALSE(victim_session_.empty());
  for (const auto& caller : callers_) {
    if (caller.listed) continue;
    for (const Route route : kRoutes) {
      if (!holder_route(route) && !session_view_route(route)) cell(caller, route, "a", false);
    }
  }
  report_cells();
}

TEST_P(AuthzMatrix, UnknownAndMissingTokensOnTheHolderRoutes) {
  victim_session_ = open_session(victim_);
  ASSERT_FALSE(victim_session_.empty());
  for (const auto& caller : callers_) {
    if (caller.listed) continue;
    for (const Route route : kRoutes) {
      if (holder_route(route)) cell(caller, route, "a", false);
    }
  }
  report_cells();
}

TEST_P(AuthzMatrix, UnknownAndMissingTokensOnTheSessionViews) {
  victim_session_ = open_session(victim_);
  ASSERT_FALSE(victim_session_.empty());
  for (const auto& caller : callers_) {
    if (caller.listed) continue;
    for (const Route route : kRoutes) {
      if (session_view_route(route)) cell(caller, route, "a", false);
    }
  }
  report_cells();
}

// ADR-0016 for a session this dlockd has not seen (here: opened before a restart; another dlockd
// on the same backend alike): its owner is asked of the store, not taken from dlockd's cache,
// and another principal's use of it is still answered as a missing session; the session's own
// principal may still use it.
TEST_P(AuthzMatrix, ASessionThisServerHasNotSeenIsCheckedAgainstTheStore) {
  const Caller& intruder = callers_[1];  // locker-a: lock:a
  ASSERT_EQ(intruder.name, "locker-a");
  const auto session = open_session(victim_);
  ASSERT_FALSE(session.empty());
  server_->kill9();
  server_->start();  // same storage, nothing cached
  const std::string key = "k-" + run_ + "-unseen";
  const auto refused = call(intruder, "POST", "/v1/locks/" + key + "/acquire?ns=a",
                            {{"session_id", session}, {"ttl_ms", 60000}});
  EXPECT_EQ(refused.status, 404) << refused.body;
  EXPECT_EQ(refused.error_code(), "session_not_found") << refused.body;
  EXPECT_FALSE(lock_of(key, "a"));
  const auto own = call(victim_, "POST", "/v1/locks/" + key + "/acquire?ns=a",
                        {{"session_id", session}, {"ttl_ms", 60000}});
  EXPECT_EQ(own.status, 200) << own.body;
}

// The web console's files (/ui/, docs/console.md) are public, as /healthz is: they hold no data
// and no secret, so every caller gets them, an unknown token or none too, under the console's
// CSP. Only /v1 authenticates: a bad token sent with them drains no throttle bucket. The /v1
// calls the page then makes are the rows of the matrix above.
TEST_P(AuthzMatrix, ConsoleFilesArePublicAndAuthenticateNobody) {
  for (const auto& caller : callers_) {
    for (const std::string target : {"/ui/", "/ui/app.js", "/ui/console.css"}) {
      const auto got = call(caller, "GET", target);
      EXPECT_EQ(got.status, 200) << caller.name << " " << target;
      ASSERT_TRUE(got.headers.count("content-security-policy")) << caller.name << " " << target;
      EXPECT_NE(got.headers.at("content-security-policy").find("frame-ancestors 'none'"),
                std::string::npos);
    }
  }
  const Caller& stranger = callers_[4];
  ASSERT_EQ(stranger.name, "stranger");
  for (int i = 0; i < 12; ++i) EXPECT_EQ(call(stranger, "GET", "/ui/").status, 200);
  EXPECT_EQ(call(stranger, "GET", "/v1/locks?ns=a").status, 401);  // not 429: nothing counted
  EXPECT_EQ(call(callers_[5], "GET", "/v1/locks?ns=a").status, 401);
}

// Readers see a lock's session_id only when it is their own session or they are admins on the
// namespace; the owner shown is the client's label, never the principal.
TEST_P(AuthzMatrix, ReadsHideOtherPrincipalsSessionIds) {
  const auto& locker = callers_[1];  // locker-a
  const auto session = open_session(locker);
  const auto [key, token] = hold(locker, session, "a");
  for (const auto& caller : callers_) {
    if (!caller.listed || !allows(caller, "read", "a")) continue;
    const auto got = call(caller, "GET", "/v1/locks/" + key + "?ns=a");
    ASSERT_EQ(got.status, 200) << caller.name << " " << got.body;
    const bool shown = caller.name == "locker-a" || caller.name == "ops";
    EXPECT_EQ(got.json.as_object().contains("session_id"), shown) << caller.name;
    if (shown) {
      EXPECT_EQ(got.json.at("session_id").as_string(), session) << caller.name;
    }
    EXPECT_EQ(got.json.at("owner").as_string(), "locker-a-app");
    const auto listed = call(caller, "GET", "/v1/locks?ns=a&prefix=" + key);
    ASSERT_EQ(listed.status, 200) << listed.body;
    EXPECT_EQ(listed.json.at("locks").at(0).as_object().contains("session_id"), shown)
        << caller.name;
  }
}

// The waiters of a key (C3 "Waiters") follow the same rule as its holders: a waiter's session
// ID only for its own principal and for admins.
TEST_P(AuthzMatrix, WaitersShowSessionIdsOnlyToTheirPrincipalAndAdmins) {
  victim_session_ = open_session(victim_);
  const auto [key, token] = hold(victim_, victim_session_, "a");
  const auto& locker = callers_[1];  // locker-a
  const auto session = open_session(locker);
  HttpResult waited;
  std::thread waiter([&, key = key] {
    waited = call(locker, "POST", "/v1/locks/" + key + "/acquire?ns=a",
                  {{"session_id", session}, {"wait_ms", 20000}});
  });
  const auto& ops = callers_[3];
  ASSERT_TRUE(testing::wait_for(
      [&] {
        const auto got = call(ops, "GET", "/v1/locks/" + key + "?ns=a");
        return got.status == 200 && got.json.at("waiters").as_array().size() == 1;
      },
      std::chrono::seconds(10)))
      << "the waiting acquire never showed";
  for (const auto& caller : callers_) {
    if (!caller.listed || !allows(caller, "read", "a")) continue;
    const auto got = call(caller, "GET", "/v1/locks/" + key + "?ns=a");
    ASSERT_EQ(got.status, 200) << caller.name << " " << got.body;
    const auto& entry = got.json.at("waiters").at(0).as_object();
    const bool shown = caller.name == "locker-a" || caller.name == "ops";
    EXPECT_EQ(entry.contains("session_id"), shown) << caller.name << " " << got.body;
    EXPECT_EQ(entry.at("owner").as_string(), "locker-a-app") << caller.name;
  }
  EXPECT_EQ(call(victim_, "DELETE",
                 "/v1/locks/" + key + "?ns=a&session_id=" + victim_session_ +
                     "&fencing_token=" + std::to_string(token))
                .status,
            204);
  waiter.join();
  EXPECT_EQ(waited.status, 200) << waited.body;
}

// The watch (C3 "Watch") shows an event's session ID as a lock read does: only to the session's
// principal and to admins on the namespace; and only events of the namespace asked.
TEST_P(AuthzMatrix, WatchShowsSessionIdsOnlyToTheirPrincipalAndAdmins) {
  const auto& locker = callers_[1];  // locker-a
  const auto& ops = callers_[3];
  const auto start = call(ops, "GET", "/v1/watch?ns=a&prefix=");
  ASSERT_EQ(start.status, 200) << start.body;
  const std::string after(start.json.at("next").as_string());
  const auto session = open_session(locker);
  const auto [key, token] = hold(locker, session, "a");
  hold(victim_, open_session(victim_), "bx");  // another namespace: in no answer below
  for (const auto& caller : callers_) {
    if (!caller.listed || !allows(caller, "read", "a")) continue;
    const auto got = call(caller, "GET", "/v1/watch?ns=a&prefix=&after=" + after);
    ASSERT_EQ(got.status, 200) << caller.name << " " << got.body;
    const auto& events = got.json.at("events").as_array();
    ASSERT_EQ(events.size(), 1u) << caller.name << " " << got.body;
    const auto& event = events.at(0).as_object();
    EXPECT_EQ(event.at("kind").as_string(), "grant") << caller.name;
    EXPECT_EQ(event.at("key").as_string(), key) << caller.name;
    EXPECT_EQ(event.at("fencing_token").to_number<std::uint64_t>(), token) << caller.name;
    EXPECT_EQ(event.at("owner").as_string(), "locker-a-app") << caller.name;
    const bool shown = caller.name == "locker-a" || caller.name == "ops";
    EXPECT_EQ(event.contains("session_id"), shown) << caller.name << " " << got.body;
  }
}

// Ten bad tokens from one address, then every further bad token from it is 429 with
// Retry-After; a correct token from that address is still served, a missing header is still 401
// (C6 throttle: only failures are throttled); /healthz, /readyz and /metrics need no token.
TEST_P(AuthzMatrix, BadTokensAreThrottledAndOpenRoutesStayOpen) {
  const Caller nobody{"nobody", "", "", false};
  EXPECT_EQ(call(nobody, "GET", "/healthz").status, 200);
  EXPECT_EQ(call(nobody, "GET", "/readyz").status, 200);
  const auto metrics = call(nobody, "GET", "/metrics");
  EXPECT_EQ(metrics.status, 200);
  const Caller guesser{"guesser", auth::random_token(), "", false};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(call(guesser, "GET", "/v1/locks?ns=a").status, 401);
  const auto throttled = call(guesser, "GET", "/v1/locks?ns=a");
  EXPECT_EQ(throttled.status, 429);
  EXPECT_FALSE(throttled.headers.at("retry-after").empty());
  // Same address (every caller here is 127.0.0.1): ops' valid token is not throttled.
  EXPECT_EQ(call(callers_[3], "GET", "/v1/locks?ns=a").status, 200);
  EXPECT_EQ(call(nobody, "GET", "/v1/locks?ns=a").status, 401);
  EXPECT_EQ(call(guesser, "GET", "/v1/locks?ns=a").status, 429);
  const auto counted = call(nobody, "GET", "/metrics").body;
  EXPECT_NE(counted.find("dlock_auth_denied_total{reason=\"unknown\"} 10"), std::string::npos)
      << counted;
  EXPECT_NE(counted.find("dlock_auth_denied_total{reason=\"throttled\"} 2"), std::string::npos)
      << counted;
}

INSTANTIATE_TEST_SUITE_P(Backends, AuthzMatrix, ::testing::ValuesIn(testing::dlockd_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dlock
