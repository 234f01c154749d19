// util::BackendWrapper forwards every SPI call to its target unchanged, and util::ValidatingBackend
// refuses each bad argument naming its field before the target is called (lock_store.h, "Who
// checks what"). The target is a fake that records the calls it receives.

#include "util/validating_backend.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "util/backend_wrapper.h"
#include "util/limits.h"

namespace dlock::util {
namespace {

using std::chrono::milliseconds;

// The limits the wrapper checks against: not the defaults, so a check that used other limits
// than the store's would show.
const TtlLimits kLimits{milliseconds(2000), milliseconds(60000), milliseconds(5000)};

std::string describe(const LockLease& lease) {
  return lease.session_bound() ? "session" : "ttl=" + std::to_string(lease.ttl().count());
}

std::string describe(const GrantRequest& request) {
  std::string text = to_string(request.mode());
  if (request.kind() == GrantRequest::Kind::kPermit)
    text += " of " + std::to_string(request.limit());
  if (const auto value = request.leader_value()) text += " leader '" + std::string(*value) + "'";
  return text + " " + describe(request.lease());
}

std::string describe(const GrantRef& grant) {
  return grant.key + "," + grant.owner_id + "," + grant.session_id + ",#" +
         std::to_string(grant.fencing_token);
}

// A Backend that records each call with its arguments and answers from them, so that what a
// caller gets back shows which arguments the call was made with.
class RecordingBackend final : public Backend {
 public:
  std::vector<std::string> calls;

  std::optional<LockHandle> try_grant(std::string_view key, std::string_view owner_id,
                                      std::string_view session_id,
                                      const GrantRequest& request) override {
    record("try_grant", std::string(key) + "," + std::string(owner_id) + "," +
                            std::string(session_id) + "," + describe(request));
    LockHandle handle{std::string(key), std::string(owner_id), std::string(session_id), 7};
    handle.mode = request.mode();
    handle.session_bound = request.lease().session_bound();
    return handle;
  }
  LockInfo proclaim(const GrantRef& grant, std::string_view value) override {
    record("proclaim", describe(grant) + "," + std::string(value));
    LockInfo info{grant.key, grant.owner_id, grant.session_id, grant.fencing_token};
    info.value = std::string(value);
    return info;
  }
  std::vector<LockInfo> read_holders(std::string_view key) override {
    record("read_holders", key);
    return {info_of(key), info_of(key)};
  }
  std::optional<LockInfo> read(std::string_view key) override {
    record("read", key);
    return info_of(key);
  }
  std::vector<LockInfo> list(std::string_view prefix, const ListAfter& after,
                             std::size_t limit) override {
    record("list", std::string(prefix) + "," + after.key + "," +
                       std::to_string(after.fencing_token) + "," + std::to_string(limit));
    return {info_of(prefix)};
  }
  std::vector<KeyDelay> list_delays(std::string_view prefix, std::string_view after,
                                    std::size_t limit) override {
    record("list_delays",
           std::string(prefix) + "," + std::string(after) + "," + std::to_string(limit));
    return {KeyDelay{std::string(prefix), {}}};
  }
  bool clear_delay(std::string_view key) override {
    record("clear_delay", key);
    return true;
  }
  LockHandle extend(const GrantRef& grant, milliseconds ttl) override {
    record("extend", describe(grant) + "," + std::to_string(ttl.count()));
    return LockHandle{grant.key, grant.owner_id, grant.session_id, grant.fencing_token};
  }
  bool delete_if_owner(const GrantRef& grant) override {
    record("delete_if_owner", describe(grant));
    return true;
  }
  std::optional<LockHandle> handover(const GrantRef& from, std::string_view next_owner_id,
                                     std::string_view next_session_id, LockLease lease) override {
    record("handover", describe(from) + "," + std::string(next_owner_id) + "," +
                           std::string(next_session_id) + "," + describe(lease));
    return LockHandle{from.key, std::string(next_owner_id), std::string(next_session_id), 8};
  }
  LockOutcome revoke(std::string_view key) override {
    record("revoke", key);
    return LockOutcome{true, 9, std::string(key)};
  }
  ReapReport reap_expired() override {
    record("reap_expired", "");
    return ReapReport{{info_of("reaped/k")}, {"s9"}};
  }
  ReleaseSubscriptionPtr watch_releases(std::string_view key,
                                        ReleaseCallback on_released) override {
    record("watch_releases", key);
    on_released(7);
    return std::make_unique<ReleaseSubscription>();
  }
  std::string_view backend_id() const override { return "recording"; }

  using SessionRegistry::open_session;
  SessionInfo open_session(std::string_view owner_id, milliseconds ttl,
                           milliseconds lock_delay) override {
    record("open_session", std::string(owner_id) + "," + std::to_string(ttl.count()) + "," +
                               std::to_string(lock_delay.count()));
    return SessionInfo{"s-new", std::string(owner_id), ttl, {}, lock_delay};
  }
  SessionInfo heartbeat(std::string_view session_id) override {
    record("heartbeat", session_id);
    return session_of(session_id);
  }
  bool try_heartbeat_async(std::string_view session_id, HeartbeatDone& done) override {
    record("try_heartbeat_async", session_id);
    done(session_of(session_id), nullptr);
    return true;
  }
  std::optional<SessionInfo> get_session(std::string_view session_id) override {
    record("get_session", session_id);
    return session_of(session_id);
  }
  std::vector<SessionInfo> list_sessions(std::string_view owner_prefix, std::string_view after,
                                         std::size_t limit) override {
    record("list_sessions",
           std::string(owner_prefix) + "," + std::string(after) + "," + std::to_string(limit));
    return {session_of(after)};
  }
  std::vector<LockInfo> session_grants(std::string_view session_id) override {
    record("session_grants", session_id);
    return {info_of(session_id)};
  }
  std::vector<LockInfo> close_session(std::string_view session_id) override {
    record("close_session", session_id);
    return {info_of(session_id), info_of(session_id)};
  }

 private:
  void record(const std::string& method, std::string_view arguments) {
    calls.push_back(method + "(" + std::string(arguments) + ")");
  }
  static LockInfo info_of(std::string_view key) { return LockInfo{std::string(key), "o", "s", 5}; }
  static SessionInfo session_of(std::string_view session_id) {
    return SessionInfo{std::string(session_id), "owner", milliseconds(3000), {}, milliseconds(0)};
  }
};

std::string describe(const LockHandle& handle) {
  return describe(handle.ref()) + "," + to_string(handle.mode) +
         (handle.session_bound ? ",session" : "");
}
std::string describe(const LockInfo& info) {
  return info.key + "," + info.owner_id + "," + info.session_id + ",#" +
         std::to_string(info.fencing_token) + "," + info.value.value_or("-");
}
std::string describe(const SessionInfo& session) {
  return session.session_id + "," + session.owner_id + "," + std::to_string(session.ttl.count()) +
         "," + std::to_string(session.lock_delay.count());
}
std::string describe(const KeyDelay& delay) { return delay.key; }
std::string describe(bool answer) { return answer ? "true" : "false"; }
template <class T>
std::string describe(const std::optional<T>& value) {
  return value ? describe(*value) : "none";
}
template <class T>
std::string describe(const std::vector<T>& values) {
  std::string text = "[";
  for (const auto& value : values) text += describe(value) + ";";
  return text + "]";
}

const GrantRef kRef{"ns/k", "alice", "s1", 42};
const std::string kLongest(limits::kMaxStoreFieldBytes, 'x');
const std::string kTooLong(limits::kMaxStoreFieldBytes + 1, 'x');

// One call of the SPI with good arguments (at the edges of what is allowed), answering a
// description of what it got back.
struct Call {
  std::string method;
  std::function<std::string(Backend&)> run;
};

std::vector<Call> good_calls() {
  return {
      {"try_grant",
       [](Backend& b) {
         return describe(
             b.try_grant("ns/k", "alice", "s1", GrantRequest::exclusive(kLimits.min_ttl)));
       }},
      {"try_grant",
       [](Backend& b) {
         return describe(
             b.try_grant(kLongest, kLongest, kLongest, GrantRequest::shared(LockLease::session())));
       }},
      {"try_grant",
       [](Backend& b) {
         return describe(
             b.try_grant("ns/k", "alice", "s1",
                         GrantRequest::permit(limits::kMaxSemaphoreLimit, kLimits.max_ttl)));
       }},
      {"try_grant",
       [](Backend& b) {
         return describe(
             b.try_grant("ns/k", "alice", "s1", GrantRequest::permit(1, milliseconds(3000))));
       }},
      {"try_grant",
       [](Backend& b) {
         return describe(
             b.try_grant("ns/k", "alice", "s1",
                         GrantRequest::leader(std::string(limits::kMaxLeaderValueBytes, 'v'),
                                              LockLease::session())));
       }},
      {"proclaim", [](Backend& b) { return describe(b.proclaim(kRef, "value")); }},
      {"read_holders", [](Backend& b) { return describe(b.read_holders("ns/k")); }},
      {"read", [](Backend& b) { return describe(b.read(kLongest)); }},
      {"list",
       [](Backend& b) {
         return describe(b.list("", ListAfter{"ns/a", 3}, 10));
       }},
      {"list_delays", [](Backend& b) { return describe(b.list_delays("ns/", "ns/a", 5)); }},
      {"clear_delay", [](Backend& b) { return describe(b.clear_delay("ns/k")); }},
      {"extend", [](Backend& b) { return describe(b.extend(kRef, kLimits.max_ttl)); }},
      {"delete_if_owner", [](Backend& b) { return describe(b.delete_if_owner(kRef)); }},
      {"handover",
       [](Backend& b) { return describe(b.handover(kRef, "bob", "s2", LockLease::session())); }},
      {"handover",
       [](Backend& b) { return describe(b.handover(kRef, "bob", "s2", kLimits.min_ttl)); }},
      {"revoke",
       [](Backend& b) {
         const auto outcome = b.revoke("ns/k");
         return describe(outcome.revoked) + "," + std::to_string(outcome.fencing_token.value_or(0));
       }},
      {"reap_expired",
       [](Backend& b) {
         const auto report = b.reap_expired();
         return describe(report.expired_locks) + "," + report.expired_sessions.at(0);
       }},
      {"watch_releases",
       [](Backend& b) {
         FencingToken fired = 0;
         const auto subscription =
             b.watch_releases("ns/k", [&](FencingToken granted) { fired = granted; });
         return std::to_string(fired) + "," + describe(subscription != nullptr);
       }},
      {"backend_id", [](Backend& b) { return std::string(b.backend_id()); }},
      {"open_session",
       [](Backend& b) {
         return describe(b.open_session("alice", kLimits.max_ttl, kLimits.max_lock_delay));
       }},
      {"open_session",
       [](Backend& b) { return describe(b.open_session(kLongest, kLimits.min_ttl)); }},
      {"heartbeat", [](Backend& b) { return describe(b.heartbeat("s1")); }},
      {"try_heartbeat_async",
       [](Backend& b) {
         std::string answered = "not called";
         SessionRegistry::HeartbeatDone done = [&](std::optional<SessionInfo> info,
                                                   std::exception_ptr) {
           answered = describe(info);
         };
         const bool started = b.try_heartbeat_async("s1", done);
         return describe(started) + "," + answered;
       }},
      {"get_session", [](Backend& b) { return describe(b.get_session("s1")); }},
      {"list_sessions", [](Backend& b) { return describe(b.list_sessions("al", "s0", 7)); }},
      {"session_grants", [](Backend& b) { return describe(b.session_grants("s1")); }},
      {"close_session", [](Backend& b) { return describe(b.close_session("s1")); }},
  };
}

// Every virtual of LockStore and SessionRegistry: the calls above must cover each.
const std::set<std::string> kEveryMethod = {"try_grant",
                                            "proclaim",
                                            "read_holders",
                                            "read",
                                            "list",
                                            "list_delays",
                                            "clear_delay",
                                            "extend",
                                            "delete_if_owner",
                                            "handover",
                                            "revoke",
                                            "reap_expired",
                                            "watch_releases",
                                            "backend_id",
                                            "open_session",
                                            "heartbeat",
                                            "try_heartbeat_async",
                                            "get_session",
                                            "list_sessions",
                                            "session_grants",
                                            "close_session"};

// Runs every good call through `wrap(target)` and directly on a fake of its own: the target
// receives exactly the call the direct fake does, and the caller gets the same answer back.
void expect_every_call_forwarded(
    const std::function<std::unique_ptr<Backend>(std::unique_ptr<RecordingBackend>)>& wrap) {
  std::set<std::string> covered;
  for (const auto& call : good_calls()) {
    SCOPED_TRACE(call.method);
    covered.insert(call.method);
    RecordingBackend direct;
    const std::string direct_answer = call.run(direct);
    auto owned = std::make_unique<RecordingBackend>();
    RecordingBackend& target = *owned;
    const auto wrapper = wrap(std::move(owned));
    const std::string wrapped_answer = call.run(*wrapper);
    EXPECT_EQ(target.calls, direct.calls) << "not forwarded, or forwarded with other arguments";
    EXPECT_EQ(wrapped_answer, direct_answer) << "the target's answer did not come back unchanged";
  }
  EXPECT_EQ(covered, kEveryMethod);
}

TEST(BackendWrapper, EveryCallIsForwardedToTheTargetUnchanged) {
  expect_every_call_forwarded([](std::unique_ptr<RecordingBackend> target) {
    return std::make_unique<BackendWrapper>(std::move(target));
  });
}

TEST(ValidatingBackend, GoodArgumentsReachTheStoreUnchanged) {
  expect_every_call_forwarded([](std::unique_ptr<RecordingBackend> target) {
    return std::make_unique<ValidatingBackend>(std::move(target), kLimits);
  });
}

// One bad argument of one call, and the field the refusal must name.
struct BadCall {
  std::string what;
  std::string field;
  std::function<void(Backend&)> run;
};

GrantRef ref_with(std::string GrantRef::*member, std::string value) {
  GrantRef grant = kRef;
  grant.*member = std::move(value);
  return grant;
}

std::vector<BadCall> bad_calls() {
  const auto exclusive = GrantRequest::exclusive(milliseconds(3000));
  std::vector<BadCall> bad = {
      // try_grant
      {"try_grant: empty key", "key",
       [=](Backend& b) { b.try_grant("", "alice", "s1", exclusive); }},
      {"try_grant: key too long", "key",
       [=](Backend& b) { b.try_grant(kTooLong, "alice", "s1", exclusive); }},
      {"try_grant: empty owner", "owner",
       [=](Backend& b) { b.try_grant("ns/k", "", "s1", exclusive); }},
      {"try_grant: owner too long", "owner",
       [=](Backend& b) { b.try_grant("ns/k", kTooLong, "s1", exclusive); }},
      {"try_grant: empty session_id", "session_id",
       [=](Backend& b) { b.try_grant("ns/k", "alice", "", exclusive); }},
      {"try_grant: session_id too long", "session_id",
       [=](Backend& b) { b.try_grant("ns/k", "alice", kTooLong, exclusive); }},
      {"try_grant: ttl below the store's minimum", "ttl_ms",
       [](Backend& b) {
         b.try_grant("ns/k", "alice", "s1",
                     GrantRequest::exclusive(kLimits.min_ttl - milliseconds(1)));
       }},
      {"try_grant: ttl above the store's maximum", "ttl_ms",
       [](Backend& b) {
         b.try_grant("ns/k", "alice", "s1",
                     GrantRequest::exclusive(kLimits.max_ttl + milliseconds(1)));
       }},
      {"try_grant: negative ttl", "ttl_ms",
       [](Backend& b) {
         b.try_grant("ns/k", "alice", "s1", GrantRequest::exclusive(milliseconds(-5)));
       }},
      {"try_grant: shared holder's ttl", "ttl_ms",
       [](Backend& b) {
         b.try_grant("ns/k", "alice", "s1", GrantRequest::shared(milliseconds(1)));
       }},
      {"try_grant: leader's ttl", "ttl_ms",
       [](Backend& b) {
         b.try_grant("ns/k", "alice", "s1", GrantRequest::leader("v", milliseconds(1)));
       }},
      {"try_grant: permit limit 0", "limit",
       [](Backend& b) {
         b.try_grant("ns/k", "alice", "s1", GrantRequest::permit(0, milliseconds(3000)));
       }},
      {"try_grant: permit limit above the most", "limit",
       [](Backend& b) {
         b.try_grant("ns/k", "alice", "s1",
                     GrantRequest::permit(limits::kMaxSemaphoreLimit + 1, milliseconds(3000)));
       }},
      {"try_grant: empty leader value", "value",
       [](Backend& b) {
         b.try_grant("ns/k", "alice", "s1", GrantRequest::leader("", LockLease::session()));
       }},
      {"try_grant: leader value too long", "value",
       [](Backend& b) {
         b.try_grant("ns/k", "alice", "s1",
                     GrantRequest::leader(std::string(limits::kMaxLeaderValueBytes + 1, 'v'),
                                          LockLease::session()));
       }},
      {"try_grant: leader value with NUL", "value",
       [](Backend& b) {
         b.try_grant("ns/k", "alice", "s1",
                     GrantRequest::leader(std::string("a\0b", 3), LockLease::session()));
       }},
      // proclaim
      {"proclaim: empty value", "value", [](Backend& b) { b.proclaim(kRef, ""); }},
      {"proclaim: value too long", "value",
       [](Backend& b) { b.proclaim(kRef, std::string(limits::kMaxLeaderValueBytes + 1, 'v')); }},
      {"proclaim: value with NUL", "value",
       [](Backend& b) { b.proclaim(kRef, std::string("a\0b", 3)); }},
      // extend
      {"extend: ttl below the store's minimum", "ttl_ms",
       [](Backend& b) { b.extend(kRef, kLimits.min_ttl - milliseconds(1)); }},
      {"extend: ttl above the store's maximum", "ttl_ms",
       [](Backend& b) { b.extend(kRef, kLimits.max_ttl + milliseconds(1)); }},
      // handover
      {"handover: empty next owner", "owner",
       [](Backend& b) { b.handover(kRef, "", "s2", LockLease::session()); }},
      {"handover: next owner too long", "owner",
       [](Backend& b) { b.handover(kRef, kTooLong, "s2", LockLease::session()); }},
      {"handover: empty next session_id", "session_id",
       [](Backend& b) { b.handover(kRef, "bob", "", LockLease::session()); }},
      {"handover: next session_id too long", "session_id",
       [](Backend& b) { b.handover(kRef, "bob", kTooLong, LockLease::session()); }},
      {"handover: lease ttl below the store's minimum", "ttl_ms",
       [](Backend& b) { b.handover(kRef, "bob", "s2", kLimits.min_ttl - milliseconds(1)); }},
      {"handover: lease ttl above the store's maximum", "ttl_ms",
       [](Backend& b) { b.handover(kRef, "bob", "s2", kLimits.max_ttl + milliseconds(1)); }},
      // open_session
      {"open_session: empty owner", "owner",
       [](Backend& b) { b.open_session("", milliseconds(3000)); }},
      {"open_session: owner too long", "owner",
       [](Backend& b) { b.open_session(kTooLong, milliseconds(3000)); }},
      {"open_session: ttl below the store's minimum", "ttl_ms",
       [](Backend& b) { b.open_session("alice", kLimits.min_ttl - milliseconds(1)); }},
      {"open_session: ttl above the store's maximum", "ttl_ms",
       [](Backend& b) { b.open_session("alice", kLimits.max_ttl + milliseconds(1)); }},
      {"open_session: negative lock-delay", "lock_delay_ms",
       [](Backend& b) { b.open_session("alice", milliseconds(3000), milliseconds(-1)); }},
      {"open_session: lock-delay above the store's maximum", "lock_delay_ms",
       [](Backend& b) {
         b.open_session("alice", milliseconds(3000), kLimits.max_lock_delay + milliseconds(1));
       }},
  };
  // Every call that takes a key.
  const std::vector<std::pair<std::string, std::function<void(Backend&, const std::string&)>>>
      by_key = {
          {"read_holders", [](Backend& b, const std::string& key) { b.read_holders(key); }},
          {"read", [](Backend& b, const std::string& key) { b.read(key); }},
          {"clear_delay", [](Backend& b, const std::string& key) { b.clear_delay(key); }},
          {"revoke", [](Backend& b, const std::string& key) { b.revoke(key); }},
          {"watch_releases",
           [](Backend& b, const std::string& key) { b.watch_releases(key, [](FencingToken) {}); }},
      };
  for (const auto& [method, run] : by_key) {
    bad.push_back({method + ": empty key", "key", [run = run](Backend& b) { run(b, ""); }});
    bad.push_back(
        {method + ": key too long", "key", [run = run](Backend& b) { run(b, kTooLong); }});
  }
  // Every call that takes a session ID.
  const std::vector<std::pair<std::string, std::function<void(Backend&, const std::string&)>>>
      by_session = {
          {"heartbeat", [](Backend& b, const std::string& id) { b.heartbeat(id); }},
          {"get_session", [](Backend& b, const std::string& id) { b.get_session(id); }},
          {"session_grants", [](Backend& b, const std::string& id) { b.session_grants(id); }},
          {"close_session", [](Backend& b, const std::string& id) { b.close_session(id); }},
      };
  for (const auto& [method, run] : by_session) {
    bad.push_back(
        {method + ": empty session_id", "session_id", [run = run](Backend& b) { run(b, ""); }});
    bad.push_back({method + ": session_id too long", "session_id",
                   [run = run](Backend& b) { run(b, kTooLong); }});
  }
  // Every call that takes a grant reference: each of its fields.
  const std::vector<std::pair<std::string, std::function<void(Backend&, const GrantRef&)>>> by_ref =
      {
          {"proclaim", [](Backend& b, const GrantRef& grant) { b.proclaim(grant, "v"); }},
          {"extend",
           [](Backend& b, const GrantRef& grant) { b.extend(grant, milliseconds(3000)); }},
          {"delete_if_owner", [](Backend& b, const GrantRef& grant) { b.delete_if_owner(grant); }},
          {"handover",
           [](Backend& b, const GrantRef& grant) {
             b.handover(grant, "bob", "s2", LockLease::session());
           }},
      };
  const std::vector<std::pair<std::string, std::string GrantRef::*>> fields = {
      {"key", &GrantRef::key},
      {"owner", &GrantRef::owner_id},
      {"session_id", &GrantRef::session_id}};
  for (const auto& [method, run] : by_ref) {
    for (const auto& [field, member] : fields) {
      for (const auto& value : {std::string(), kTooLong}) {
        bad.push_back(
            {method + ": grant's " + field + (value.empty() ? " empty" : " too long"), field,
             [run = run, grant = ref_with(member, value)](Backend& b) { run(b, grant); }});
      }
    }
  }
  return bad;
}

TEST(ValidatingBackend, EachBadArgumentIsRefusedNamingItsFieldBeforeTheStore) {
  for (const auto& call : bad_calls()) {
    SCOPED_TRACE(call.what);
    auto owned = std::make_unique<RecordingBackend>();
    RecordingBackend& target = *owned;
    ValidatingBackend wrapper(std::move(owned), kLimits);
    try {
      call.run(wrapper);
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgumentError& error) {
      EXPECT_EQ(error.field(), call.field);
    }
    EXPECT_TRUE(target.calls.empty()) << "the store was called: " << target.calls.front();
  }
}

// An async heartbeat the wrapper would refuse is not started (the caller's heartbeat then
// throws), and the store never sees it.
TEST(ValidatingBackend, AsyncHeartbeatOfABadSessionIdIsNotStarted) {
  for (const auto& session_id : {std::string(), kTooLong}) {
    auto owned = std::make_unique<RecordingBackend>();
    RecordingBackend& target = *owned;
    ValidatingBackend wrapper(std::move(owned), kLimits);
    bool answered = false;
    SessionRegistry::HeartbeatDone done = [&](std::optional<SessionInfo>, std::exception_ptr) {
      answered = true;
    };
    EXPECT_FALSE(wrapper.try_heartbeat_async(session_id, done));
    EXPECT_FALSE(answered);
    EXPECT_TRUE(static_cast<bool>(done)) << "done was taken although nothing was started";
    EXPECT_THROW(wrapper.heartbeat(session_id), InvalidArgumentError);
    EXPECT_TRUE(target.calls.empty());
  }
}

}  // namespace
}  // namespace dlock::util
