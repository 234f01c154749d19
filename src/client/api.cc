// One function per C3 route: build the request, send it through the retry loop, decode the
// answer or map the error. Statuses other than the route's success are always thrown, except
// the two decisions that are values: 409 "held" on acquire and 404 "lock_not_found" on get.
// The election routes other than the campaign (an acquire) are in elections.cc.

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "client/client_core.h"
#include "client/error_mapping.h"
#include "client/json_codec.h"
#include "client/url.h"

namespace dlock::client::detail {
namespace {

std::string lock_target(const std::string& key, const std::string& action, const std::string& ns,
                        std::vector<std::pair<std::string, std::string>> query = {},
                        HoldMode mode = HoldMode::kExclusive) {
  query.emplace_back("ns", ns);
  // A permit's routes are the semaphore's (Lock::extend in dlock/client.h says why).
  const char* collection = mode == HoldMode::kPermit ? "/v1/semaphores/" : "/v1/locks/";
  return collection + percent_encode(key) + action + query_string(query);
}

// The "holders" (or "locks") array of an answer, each entry a LockInfo.
std::vector<LockInfo> decode_lock_infos(const boost::json::object& object, const char* member,
                                        const std::string& what) {
  const auto* entries = object.if_contains(member);
  if (entries == nullptr || !entries->is_array()) {
    throw InternalError(what + ": server response has no \"" + member + "\" array");
  }
  std::vector<LockInfo> out;
  for (const boost::json::value& entry : entries->get_array()) {
    if (!entry.is_object()) {
      throw InternalError(what + ": a \"" + member + "\" entry is not an object");
    }
    out.push_back(decode_lock_info(entry.get_object()));
  }
  return out;
}

HttpRequest post(std::string target, const boost::json::object& body) {
  return HttpRequest{Method::kPost, std::move(target), boost::json::serialize(body), {}};
}

// Throws the mapped error unless the status is `expected`.
void expect_status(const HttpResponse& response, int expected, const std::string& what) {
  if (response.status != expected) throw_api_error(parse_api_error(response), what);
}

std::int64_t millis(std::chrono::milliseconds duration) { return duration.count(); }

}  // namespace

SessionInfo ClientCore::open_session(const std::string& owner, std::chrono::milliseconds ttl,
                                     std::chrono::milliseconds lock_delay,
                                     const CallContext& context) {
  const std::string what = "open session";
  if (lock_delay.count() < 0) {
    throw InvalidArgumentError("lock_delay_ms", what + ": lock_delay must not be negative");
  }
  boost::json::object body{{"owner", owner}};
  if (ttl.count() > 0) body["ttl_ms"] = millis(ttl);
  if (lock_delay.count() > 0) body["lock_delay_ms"] = millis(lock_delay);
  // A repeat after a lost answer would open a second session: not sent again (CallContext).
  CallContext once = context;
  once.repeat_safe = false;
  const Exchange exchange = call(post("/v1/sessions", body), once, what);
  expect_status(exchange.response, 201, what);
  SessionInfo info = decode_session(parse_object(exchange.response.body, what));
  if (info.session_id.empty()) throw InternalError(what + ": server sent no session_id");
  if (info.owner_id.empty()) info.owner_id = owner;
  info.ttl = trusted_ttl(ttl, info.ttl);
  return info;
}

std::pair<SessionInfo, SteadyClock::time_point> ClientCore::keepalive(const std::string& session_id,
                                                                      const CallContext& context) {
  const std::string what = "keepalive session " + session_id;
  const Exchange exchange =
      call(post("/v1/sessions/" + percent_encode(session_id) + "/keepalive", {}), context, what);
  expect_status(exchange.response, 200, what);
  SessionInfo info = decode_session(parse_object(exchange.response.body, what));
  info.session_id = session_id;
  return {info, exchange.sent_at};
}

void ClientCore::close_session(const std::string& session_id, const CallContext& context) {
  const std::string what = "close session " + session_id;
  const Exchange exchange =
      call(HttpRequest{Method::kDelete, "/v1/sessions/" + percent_encode(session_id), {}, {}},
           context, what);
  expect_status(exchange.response, 204, what);
}

std::optional<Grant> ClientCore::acquire(const std::string& key, const std::string& session_id,
                                         LockLease lease, std::chrono::milliseconds wait,
                                         const std::string& ns, const CallContext& context,
                                         HoldSpec hold) {
  const bool campaign = hold.leader_value.has_value();
  const std::string what = (campaign ? "campaign " : "acquire ") + key;
  if (hold.mode == HoldMode::kPermit && hold.limit == 0) {
    throw InvalidArgumentError("limit", what + ": a semaphore needs a limit of at least 1");
  }
  // A session-bound lock asks for no TTL: the answered one (the session's) is the one to trust.
  const std::chrono::milliseconds ttl =
      lease.session_bound() ? std::chrono::milliseconds(0) : lease.ttl();
  const SteadyClock::time_point wait_until = clock.now() + wait;
  for (int round = 0;; ++round) {
    // Recomputed before every attempt, so retries after a 503 never wait past our deadline.
    std::chrono::milliseconds asked_wait{0};
    CallContext attempt_context = context;
    attempt_context.before_attempt = [&](HttpRequest& request) {
      asked_wait =
          std::max(std::chrono::milliseconds(0),
                   std::chrono::duration_cast<std::chrono::milliseconds>(wait_until - clock.now()));
      boost::json::object body{{"session_id", session_id}};
      if (campaign) {
        // A leader is session-bound by definition: no lease, TTL or mode to ask for.
        body["value"] = *hold.leader_value;
        if (asked_wait.count() > 0) body["wait_ms"] = millis(asked_wait);
        request.body = boost::json::serialize(body);
        return asked_wait;
      }
      if (lease.session_bound()) body["lease"] = "session";
      if (ttl.count() > 0) body["ttl_ms"] = millis(ttl);
      if (asked_wait.count() > 0) body["wait_ms"] = millis(asked_wait);
      // Exclusive is the server's default: its requests stay as they were before modes.
      if (hold.mode == HoldMode::kShared) body["mode"] = to_string(HoldMode::kShared);
      if (hold.mode == HoldMode::kPermit) body["limit"] = hold.limit;
      request.body = boost::json::serialize(body);
      return asked_wait;
    };
    const std::string target = campaign ? election_target(key, "/campaign", ns)
                                        : lock_target(key, "/acquire", ns, {}, hold.mode);
    const Exchange exchange =
        call(HttpRequest{Method::kPost, target, {}, {}}, attempt_context, what);
    const HttpResponse& response = exchange.response;
    if (response.status == 200) {
      const boost::json::object object = parse_object(response.body, what);
      Grant grant;
      LockHandle& handle = grant.handle;
      grant.ttl = trusted_ttl(ttl, millis_member(object, "ttl_ms"));
      handle.key = string_member(object, "key", /*required=*/false);
      if (handle.key.empty()) handle.key = key;
      handle.owner_id = string_member(object, "owner", /*required=*/false);
      handle.session_id = session_id;
      handle.fencing_token = uint_member(object, "fencing_token");
      // The deadline counts from when the granting request was *sent*, never from when the
      // answer arrived, so the client stops believing no later than the server expires it.
      handle.client_deadline = lease_deadline(exchange.sent_at, grant.ttl);
      handle.server_expiry = time_member(object, "expires_at");
      handle.session_bound = string_member(object, "lease", /*required=*/false) == "session";
      // A server that predates modes sends none: then it granted what it knows, the mode asked.
      handle.mode = mode_member(object, hold.mode);
      grant.limit = handle.mode == HoldMode::kPermit ? limit_member(object, hold.limit) : 0;
      if (campaign) {
        // The owner and the value led with are the "leader" object's (the value sent, from a
        // server that echoes none).
        grant.value = *hold.leader_value;
        if (object.contains("leader")) {
          const LeaderInfo leader = decode_leader_info(object, key);
          handle.owner_id = leader.owner;
          grant.value = leader.value;
        }
      }
      return grant;
    }
    const ApiError error = parse_api_error(response);
    if (response.status != 409 || error.code != "held") throw_api_error(error, what);
    // Held. The server may cap the wait below what we asked; keep asking until ours is spent.
    const auto left = wait_until - clock.now();
    if (left <= std::chrono::milliseconds(20)) return std::nullopt;
    const auto answered_after = clock.now() - exchange.sent_at;
    if (answered_after < asked_wait / 2) {
      // It answered early without waiting (a server that ignores wait_ms): pace the retries
      // instead of spinning on the key.
      const auto pause = std::min<std::chrono::milliseconds>(
          backoff_delay(backoff, round, random_bits()),
          std::chrono::duration_cast<std::chrono::milliseconds>(left));
      if (!clock.sleep(pause, context.stop)) return std::nullopt;
    }
  }
}

ExtendResult ClientCore::extend(const std::string& key, const std::string& session_id,
                                FencingToken token, std::chrono::milliseconds ttl,
                                const std::string& ns, const CallContext& context, HoldMode mode) {
  const std::string what = "extend " + key;
  boost::json::object body{{"session_id", session_id}, {"fencing_token", token}};
  if (ttl.count() > 0) body["ttl_ms"] = millis(ttl);
  const Exchange exchange =
      call(post(lock_target(key, "/extend", ns, {}, mode), body), context, what);
  expect_status(exchange.response, 200, what);
  const boost::json::object object = parse_object(exchange.response.body, what);
  ExtendResult result;
  result.fencing_token = uint_member(object, "fencing_token");
  if (result.fencing_token != token) {
    // Extend must never change the token (INV-04); a different one means another grant.
    throw LockLostError(what + ": server answered with token " +
                        std::to_string(result.fencing_token) + ", ours is " +
                        std::to_string(token));
  }
  result.ttl = trusted_ttl(ttl, millis_member(object, "ttl_ms"));
  result.client_deadline = lease_deadline(exchange.sent_at, result.ttl);
  result.server_expiry = time_member(object, "expires_at");
  return result;
}

void ClientCore::release(const std::string& key, const std::string& session_id, FencingToken token,
                         const std::string& ns, const CallContext& context, HoldMode mode) {
  const std::string what = "release " + key;
  const std::string target = lock_target(
      key, "", ns, {{"session_id", session_id}, {"fencing_token", std::to_string(token)}}, mode);
  const Exchange exchange = call(HttpRequest{Method::kDelete, target, {}, {}}, context, what);
  expect_status(exchange.response, 204, what);
}

// GET /v1/locks/{key}: the answer, or empty when the key is free (lock_not_found).
std::optional<boost::json::object> ClientCore::read_lock(const std::string& key,
                                                         const std::string& ns,
                                                         const CallContext& context) {
  const std::string what = "get " + key;
  const Exchange exchange =
      call(HttpRequest{Method::kGet, lock_target(key, "", ns), {}, {}}, context, what);
  if (exchange.response.status == 404) {
    const ApiError error = parse_api_error(exchange.response);
    if (error.code == "lock_not_found") return std::nullopt;
    throw_api_error(error, what);
  }
  expect_status(exchange.response, 200, what);
  return parse_object(exchange.response.body, what);
}

std::optional<LockInfo> ClientCore::get(const std::string& key, const std::string& ns,
                                        const CallContext& context) {
  const auto object = read_lock(key, ns, context);
  if (!object) return std::nullopt;
  return decode_lock_info(*object);
}

std::vector<LockInfo> ClientCore::holders(const std::string& key, const std::string& ns,
                                          const CallContext& context) {
  const auto object = read_lock(key, ns, context);
  if (!object) return {};
  // A server that predates holder sets answers the one grant alone.
  if (!object->contains("holders")) return {decode_lock_info(*object)};
  return decode_lock_infos(*object, "holders", "get " + key);
}

SessionPage ClientCore::list_sessions(const std::string& owner, const std::string& principal,
                                      std::size_t limit, const std::string& after,
                                      const CallContext& context) {
  const std::string what = "list sessions";
  const std::string target =
      "/v1/sessions" + query_string({{"owner", owner},
                                     {"principal", principal},
                                     {"limit", limit > 0 ? std::to_string(limit) : std::string()},
                                     {"after", after}});
  const Exchange exchange = call(HttpRequest{Method::kGet, target, {}, {}}, context, what);
  expect_status(exchange.response, 200, what);
  const auto object = parse_object(exchange.response.body, what);
  SessionPage page;
  page.next = string_member(object, "next", /*required=*/false);
  const auto* sessions = object.if_contains("sessions");
  if (sessions == nullptr || !sessions->is_array()) {
    throw InternalError(what + ": server response has no \"sessions\" array");
  }
  for (const auto& entry : sessions->as_array()) {
    if (!entry.is_object()) continue;
    page.sessions.push_back(
        {decode_session(entry.as_object()), string_member(entry.as_object(), "principal", false)});
  }
  return page;
}

namespace {

// The "waiters" of a GET /v1/locks/{key} or /v1/semaphores/{name} answer (C3 "Waiters").
std::vector<Waiter> decode_waiters(const boost::json::object& object) {
  std::vector<Waiter> decoded;
  const auto* waiters = object.if_contains("waiters");
  if (waiters == nullptr || !waiters->is_array()) return decoded;
  for (const auto& entry : waiters->as_array()) {
    if (!entry.is_object()) continue;
    const auto& waiter = entry.as_object();
    Waiter one;
    one.position = static_cast<std::size_t>(uint_member(waiter, "position"));
    one.owner_id = string_member(waiter, "owner", /*required=*/false);
    one.mode = mode_member(waiter, HoldMode::kExclusive);
    one.limit = limit_member(waiter, 0);
    one.waiting = millis_member(waiter, "waiting_ms");
    one.session_id = string_member(waiter, "session_id", /*required=*/false);
    decoded.push_back(std::move(one));
  }
  return decoded;
}

}  // namespace

SessionDetail ClientCore::session_detail(const std::string& session_id,
                                         const CallContext& context) {
  const std::string what = "get session " + session_id;
  const Exchange exchange =
      call(HttpRequest{Method::kGet, "/v1/sessions/" + percent_encode(session_id), {}, {}}, context,
           what);
  expect_status(exchange.response, 200, what);
  const auto object = parse_object(exchange.response.body, what);
  SessionDetail detail;
  detail.listed = {decode_session(object), string_member(object, "principal", false)};
  if (detail.listed.session.session_id.empty()) detail.listed.session.session_id = session_id;
  if (const auto* holds = object.if_contains("holds"); holds && holds->is_array()) {
    for (const auto& entry : holds->as_array()) {
      if (!entry.is_object()) continue;
      detail.holds.push_back({string_member(entry.as_object(), "ns", /*required=*/false),
                              decode_lock_info(entry.as_object())});
    }
  }
  if (const auto* waits = object.if_contains("waits"); waits && waits->is_array()) {
    for (const auto& entry : waits->as_array()) {
      if (!entry.is_object()) continue;
      const auto& wait = entry.as_object();
      SessionDetail::Wait one;
      one.ns = string_member(wait, "ns", /*required=*/false);
      one.key = string_member(wait, "key", /*required=*/false);
      one.mode = mode_member(wait, HoldMode::kExclusive);
      one.limit = limit_member(wait, 0);
      one.position = static_cast<std::size_t>(uint_member(wait, "position"));
      one.waiting = millis_member(wait, "waiting_ms");
      detail.waits.push_back(std::move(one));
    }
  }
  return detail;
}

KeyState ClientCore::state(const std::string& key, const std::string& ns,
                           const CallContext& context) {
  const auto object = read_lock(key, ns, context);
  KeyState state;
  if (!object) return state;
  state.holders = object->contains("holders") ? decode_lock_infos(*object, "holders", "get " + key)
                                              : std::vector<LockInfo>{decode_lock_info(*object)};
  state.waiters = decode_waiters(*object);
  return state;
}

SemaphoreInfo ClientCore::semaphore(const std::string& name, const std::string& ns,
                                    const CallContext& context) {
  const std::string what = "get semaphore " + name;
  const Exchange exchange =
      call(HttpRequest{Method::kGet, lock_target(name, "", ns, {}, HoldMode::kPermit), {}, {}},
           context, what);
  expect_status(exchange.response, 200, what);
  const boost::json::object object = parse_object(exchange.response.body, what);
  SemaphoreInfo info;
  info.name = string_member(object, "name", /*required=*/false);
  if (info.name.empty()) info.name = name;
  info.limit = limit_member(object, 0);
  info.holders = decode_lock_infos(object, "holders", what);
  info.waiters = decode_waiters(object);
  return info;
}

std::vector<LockInfo> ClientCore::list(const std::string& prefix, std::size_t limit,
                                       const std::string& ns, const CallContext& context) {
  return list_page(prefix, limit, "", ns, context).locks;
}

LockPage ClientCore::list_page(const std::string& prefix, std::size_t limit,
                               const std::string& after, const std::string& ns,
                               const CallContext& context, bool every_namespace) {
  const std::string what = "list";
  const std::string target =
      "/v1/locks" + query_string({{"prefix", prefix},
                                  {"limit", limit > 0 ? std::to_string(limit) : std::string()},
                                  {"after", after},
                                  {"ns", ns},
                                  {"all_namespaces", every_namespace ? "true" : ""}});
  const Exchange exchange = call(HttpRequest{Method::kGet, target, {}, {}}, context, what);
  expect_status(exchange.response, 200, what);
  const auto object = parse_object(exchange.response.body, what);
  LockPage page;
  page.locks = decode_lock_infos(object, "locks", what);
  page.next = string_member(object, "next", /*required=*/false);
  for (const auto& entry : object.at("locks").as_array()) {
    const auto& lock = entry.as_object();
    page.waiting.push_back(
        lock.contains("waiting") ? static_cast<std::size_t>(uint_member(lock, "waiting")) : 0);
    page.namespaces.push_back(string_member(lock, "ns", /*required=*/false));
  }
  if (const auto* delays = object.if_contains("delays"); delays && delays->is_array()) {
    for (const auto& delay : delays->as_array()) {
      if (!delay.is_object()) continue;
      const auto& entry = delay.as_object();
      page.delays.push_back(
          {string_member(entry, "key", /*required=*/false), time_member(entry, "delayed_until")});
    }
  }
  return page;
}

LockOutcome ClientCore::revoke(const std::string& key, const std::string& ns,
                               const CallContext& context) {
  const std::string what = "revoke " + key;
  HttpRequest request = post(lock_target(key, "/revoke", ns), {});
  request.target = "/v1/admin" + request.target.substr(3);
  if (!options.admin_token.empty()) {
    request.headers.emplace_back("Authorization", "Bearer " + options.admin_token);
  }
  // A repeat after a lost answer could revoke a grant made after the first revoke.
  CallContext once = context;
  once.repeat_safe = false;
  const Exchange exchange = call(request, once, what);
  expect_status(exchange.response, 200, what);
  return decode_outcome(parse_object(exchange.response.body, what));
}

}  // namespace dlock::client::detail
