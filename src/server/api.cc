#include "server/api.h"

#include <algorithm>
#include <array>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/parse.hpp>
#include <chrono>
#include <tuple>
#include <vector>

#include "auth/token_table.h"
#include "dlock/errors.h"
#include "server/api_internal.h"
#include "server/api_render.h"
#include "server/error_mapping.h"
#include "server/input_checks.h"
#include "server/json_util.h"
#include "util/store_key.h"

namespace dlock::server {
namespace {

namespace http = boost::beast::http;
namespace json = boost::json;
using api_internal::answer;
using api_internal::audit_who;
using api_internal::AuditWho;
using api_internal::body_namespace;
using api_internal::required;
using std::chrono::milliseconds;

// --- the route table ------------------------------------------------------------------------

struct Route {
  std::optional<http::verb> method;  // nullopt: any method
  std::string_view pattern;          // '/'-separated segments; "{}" matches any one segment
  Api::Handler handler;
};

// The probes' rows (Api::probe_routes()).
constexpr const char* kLivenessRoute = "healthz";
constexpr const char* kReadinessRoute = "readyz";
constexpr const char* kMetricsRoute = "metrics";

// Patterns never overlap for one method. A request no row matches is a 404, except under
// /v1/locks/{key}/..., /v1/semaphores/{name}/... and /v1/elections/{name}/..., a 405 once the
// key is checked (C3).
const std::array kRoutes{
    Route{std::nullopt, kLivenessRoute, &Api::health},
    Route{std::nullopt, kReadinessRoute, &Api::ready},
    Route{http::verb::get, kMetricsRoute, &Api::metrics},
    Route{http::verb::get, "ui", &Api::console_root},
    Route{http::verb::get, "ui/{}", &Api::console},
    Route{http::verb::post, "v1/sessions", &Api::open_session},
    Route{http::verb::post, "v1/sessions/{}/keepalive", &Api::keepalive},
    Route{http::verb::get, "v1/sessions", &Api::list_sessions},
    Route{http::verb::get, "v1/sessions/{}", &Api::read_session},
    Route{http::verb::delete_, "v1/sessions/{}", &Api::close_session},
    Route{http::verb::get, "v1/locks", &Api::list_locks},
    Route{http::verb::post, "v1/admin/locks/{}/revoke", &Api::revoke},
    Route{http::verb::post, "v1/admin/locks/{}/clear-delay", &Api::clear_delay},
    Route{http::verb::get, "v1/locks/{}", &Api::read_lock},
    Route{http::verb::delete_, "v1/locks/{}", &Api::release},
    Route{http::verb::post, "v1/locks/{}/acquire", &Api::acquire},
    Route{http::verb::post, "v1/locks/{}/extend", &Api::extend},
    // Semaphores share the locks' key space (ADR-0020): a name's holders are of one mode.
    Route{http::verb::get, "v1/semaphores/{}", &Api::read_semaphore},
    Route{http::verb::delete_, "v1/semaphores/{}", &Api::release},
    Route{http::verb::post, "v1/semaphores/{}/acquire", &Api::acquire_permit},
    Route{http::verb::post, "v1/semaphores/{}/extend", &Api::extend},
    // An election's leader is an exclusive grant of the name with a value (ADR-0020).
    Route{http::verb::get, "v1/elections/{}", &Api::read_election},
    Route{http::verb::post, "v1/elections/{}/campaign", &Api::campaign},
    Route{http::verb::post, "v1/elections/{}/proclaim", &Api::proclaim},
    Route{http::verb::post, "v1/elections/{}/resign", &Api::resign},
    Route{http::verb::get, "v1/watch", &Api::watch},
};

// Whether `path` has the shape of `pattern`; fills `params` with the segments "{}" matched.
bool matches(std::string_view pattern, const std::vector<std::string>& path,
             std::vector<std::string>& params) {
  params.clear();
  std::size_t index = 0;
  while (true) {
    const auto slash = pattern.find('/');
    const auto segment = pattern.substr(0, slash);
    if (index == path.size()) return false;
    if (segment == "{}") {
      params.push_back(path[index]);
    } else if (segment != path[index]) {
      return false;
    }
    ++index;
    if (slash == std::string_view::npos) return index == path.size();
    pattern.remove_prefix(slash + 1);
  }
}

// Another principal's session is answered as a missing one (ADR-0016), audited and counted (C6)
// by `refused`, which is called only then.
template <typename Refused>
void check_session_owner(std::string_view stored_owner, std::string_view principal,
                         const std::string& session_id, const Refused& refused) {
  if (principal_of_owner(stored_owner) != principal) {
    refused();
    throw SessionNotFoundError("session " + session_id + " not found or expired");
  }
}

Response not_found(const RequestContext& context) {
  return error_response(404, "not_found", "no such route: " + std::string(context.url.path()));
}

// The end of `key`'s running lock-delay among `delays` (list_delays of the key as a prefix,
// whose first entry is the key itself when it is delayed).
std::optional<WallClock::time_point> delay_of(const std::string& key,
                                              const std::vector<KeyDelay>& delays) {
  if (delays.empty() || delays.front().key != key) return std::nullopt;
  return delays.front().until;
}

// An error answer that names a running lock-delay (C3 "Lock-delay").
Response delayed_error(unsigned status, const std::string& code, const std::string& message,
                       WallClock::time_point until) {
  return error_response(status, code, message, "", {{"delayed_until", format_time(until)}});
}

}  // namespace

ProbeRoutes Api::probe_routes() {
  return {std::string("/") + kLivenessRoute, std::string("/") + kReadinessRoute,
          std::string("/") + kMetricsRoute};
}

Api::Api(core::LockService& service, Telemetry& telemetry, const ServerConfig& config)
    : service_(service),
      telemetry_(telemetry),
      config_(config),
      auth_(config, telemetry),
      waiters_per_principal_(config.max_waiters_per_principal, "waiting acquires"),
      waiting_share_(std::max<std::size_t>(1, config.max_connections / 4),
                     "waiting requests (a quarter of server.max.connections)",
                     auth_.enabled() ? "principal" : "address") {
  telemetry_.set_routes(route_labels());
}

Api::Waiter Api::waiter_of(const RequestContext& context) const {
  if (!context.principal) return {context.remote_address, ""};
  return {context.principal->name, context.principal->name};
}

std::vector<std::string> Api::route_labels() {
  std::vector<std::string> labels;
  for (const auto& route : kRoutes) {
    std::string pattern(route.pattern);
    labels.push_back((route.method ? std::string(http::to_string(*route.method)) + " " : "") + "/" +
                     pattern);
  }
  return labels;
}

void Api::handle(Request&& request, Reply reply, const Peer& peer) {
  std::size_t index = kRoutes.size();  // no route (yet): counted as route "other"
  const auto counted = [&]() -> Reply {
    return [this, reply, index](Response response) {
      telemetry_.on_http_request(index, static_cast<int>(response.result_int()));
      reply(std::move(response));
    };
  };
  try {
    route(request, peer, index, counted);
  } catch (...) {
    counted()(error_response(std::current_exception()));
  }
}

void Api::route(const Request& request, const Peer& peer, std::size_t& index,
                const std::function<Reply()>& counted) {
  const auto parsed = boost::urls::parse_origin_form(request.target());
  if (!parsed) {
    throw InvalidArgumentError("path", "malformed request target (bad percent-encoding?)");
  }
  RequestContext context{.request = request,
                         .url = *parsed,
                         .params = {},
                         .body = request.body(),
                         .remote_address = peer.address,
                         .received = SteadyClock::now(),
                         .principal = nullptr,
                         .client_cert_cn = peer.client_cert_cn,
                         .cancellation = peer.cancellation};
  std::vector<std::string> path;
  for (auto segment : context.url.segments()) path.push_back(segment);
  for (index = 0; index < kRoutes.size(); ++index) {
    const auto& route = kRoutes[index];
    if (route.method && *route.method != request.method()) continue;
    if (matches(route.pattern, path, context.params)) break;
  }
  const Reply reply = counted();
  if (!path.empty() && path[0] == "v1") {
    auto identity = auth_.authenticate(request, context.remote_address, context.client_cert_cn);
    if (identity.refusal) return reply(std::move(*identity.refusal));
    context.principal = std::move(identity.principal);
  }
  if (index < kRoutes.size()) return (this->*kRoutes[index].handler)(context, reply);
  if (path.size() < 3 || path[0] != "v1" ||
      (path[1] != "locks" && path[1] != "semaphores" && path[1] != "elections")) {
    return reply(not_found(context));
  }
  checked_key(path[2]);
  reply(error_response(405, "method_not_allowed",
                       std::string(request.method_string()) + " is not allowed on " +
                           std::string(context.url.path())));
}

// --- health and metrics ---------------------------------------------------------------------

void Api::health(const RequestContext&, const Reply& reply) {
  const auto uptime =
      std::chrono::duration_cast<std::chrono::seconds>(SteadyClock::now() - started_);
  reply(ok(200, {{"status", "ok"},
                 {"backend", service_.backend_id()},
                 {"version", build_version()},
                 {"uptime_s", uptime.count()}}));
}

void Api::ready(const RequestContext& context, const Reply& reply) {
  if (!ready_) return reply(error_response(503, to_string(ErrorCode::kUnavailable), "not ready"));
  health(context, reply);
}

void Api::metrics(const RequestContext&, const Reply& reply) {
  // dlock_held_locks: one bounded list of the store at most once a second, in the background, so
  // that a slow or wedged backend never holds up a scrape (C4).
  if (telemetry_.held_count_due()) {
    service_.list("", {}, Telemetry::kHeldCountLimit,
                  [this](core::Outcome<std::vector<LockInfo>> grants) {
                    telemetry_.set_held_locks(grants.error ? nullptr : &*grants.value);
                  });
  }
  Response response{http::status::ok, 11};
  response.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
  response.body() = telemetry_.scrape();
  response.prepare_payload();
  reply(std::move(response));
}

// --- sessions -------------------------------------------------------------------------------

void Api::with_own_session(const RequestContext& context, const std::string& session_id,
                           const Reply& reply, std::function<void()> act) {
  if (!context.principal) return act();
  // A cached owner (the common case: the session was opened or used here before) is checked on
  // this thread; throwing here is answered as from the callback below.
  if (const auto owner = service_.cached_session_owner(session_id)) {
    const auto refused = [&] { auth_.session_owner_refusal(context)(); };
    check_session_owner(*owner, context.principal->name, session_id, refused);
    return act();
  }
  // The store's answer comes after the request's context is gone: who asked is copied now.
  auto refused = auth_.session_owner_refusal(context);
  service_.session_owner(session_id,
                         [reply, session_id, act = std::move(act), refused = std::move(refused),
                          principal = context.principal->name](core::Outcome<std::string> owner) {
                           if (owner.error) return reply(error_response(owner.error));
                           try {
                             check_session_owner(*owner.value, principal, session_id, refused);
                             act();
                           } catch (...) {
                             reply(error_response(std::current_exception()));
                           }
                         });
}

void Api::open_session(const RequestContext& context, const Reply& reply) {
  if (auto denied = auth_.authorize_session(context)) return reply(std::move(*denied));
  const BodyReader reader(context.body, {"owner", "ttl_ms", "lock_delay_ms"});
  const auto owner = checked_owner(required(reader.string("owner"), "owner"));
  const auto ttl =
      checked_ttl(reader.integer("ttl_ms"), config_.default_session_ttl, config_.store.limits);
  const auto lock_delay = checked_lock_delay(reader.integer("lock_delay_ms"), config_.store.limits);
  const bool auth = auth_.enabled();
  service_.open_session(stored_owner(context.principal.get(), owner), ttl,
                        answer<SessionInfo>(reply,
                                            [auth](SessionInfo s) {
                                              return ok(
                                                  201, {{"session_id", s.session_id},
                                                        {"owner", shown_owner(s.owner_id, auth)},
                                                        {"ttl_ms", s.ttl.count()},
                                                        {"lock_delay_ms", s.lock_delay.count()},
                                                        {"expires_at", format_time(s.expires_at)}});
                                            }),
                        context.principal ? context.principal->name : std::string(), lock_delay);
}

void Api::keepalive(const RequestContext& context, const Reply& reply) {
  const auto session_id = checked_session_id(context.params[0]);
  with_own_session(context, session_id, reply, [this, session_id, reply] {
    service_.keepalive(
        session_id, answer<SessionInfo>(reply, [](SessionInfo s) {
          return ok(200, {{"ttl_ms", s.ttl.count()}, {"expires_at", format_time(s.expires_at)}});
        }));
  });
}

void Api::close_session(const RequestContext& context, const Reply& reply) {
  const auto session_id = checked_session_id(context.params[0]);
  with_own_session(context, session_id, reply, [this, session_id, reply, who = audit_who(context)] {
    service_.close_session(session_id, answer<std::vector<LockInfo>>(
                                           reply, [who](const std::vector<LockInfo>& released) {
                                             for (const auto& grant : released) {
                                               audit_release(grant, who.principal, who.remote);
                                             }
                                             return no_content();
                                           }));
  });
}

namespace {

// Sessions as GET /v1/sessions and /v1/sessions/{id} show them (C3 "Sessions").
json::object session_json(const SessionInfo& session, bool auth) {
  json::object body{{"session_id", session.session_id},
                    {"owner", shown_owner(session.owner_id, auth)},
                    {"ttl_ms", session.ttl.count()},
                    {"lock_delay_ms", session.lock_delay.count()},
                    {"expires_at", format_time(session.expires_at)}};
  if (auth) body["principal"] = std::string(principal_of_owner(session.owner_id));
  return body;
}

// Whether the caller sees every session (C6): no authentication, or `admin` on every namespace.
bool sees_every_session(const auth::Principal* caller) {
  if (caller == nullptr) return true;
  for (const auto& permission : caller->permissions) {
    if (permission.role == auth::Role::kAdmin && permission.pattern == "*") return true;
  }
  return false;
}

}  // namespace

// GET /v1/sessions?owner=&principal=&after=&limit=: the live sessions the caller may see (its
// own; every one for an administrator of every namespace; no role needed, as for keepalive), by
// ID, a page at a time: `next` is present when more follow and is the `after` of the next page.
void Api::list_sessions(const RequestContext& context, const Reply& reply) {
  const auto owner = context.query("owner").value_or("");
  if (!owner.empty()) checked_owner(owner);
  const auto after = context.query("after").value_or("");
  if (!after.empty()) {
    try {
      checked_session_id(after);
    } catch (const InvalidArgumentError&) {
      throw InvalidArgumentError("after", "after must be a session ID (the `next` of a page)");
    }
  }
  const auto limit = parse_list_limit(context.query("limit"));
  const auto* caller = context.principal.get();
  const auto principal = context.query("principal");
  if (principal) auth::check_principal_name(*principal);
  std::string prefix;
  if (caller == nullptr) {
    // Without authentication: sessions opened without it (their owner's mark), or those a
    // principal opened while a tokens file was in use.
    if (principal) {
      prefix = *principal + " " + owner;
    } else if (!owner.empty()) {
      prefix = std::string(kUnownedMark) + owner;
    }
  } else if (sees_every_session(caller)) {
    if (principal) {
      prefix = *principal + " " + owner;
    } else if (!owner.empty()) {
      throw InvalidArgumentError("principal", "an owner filter needs the principal it belongs to");
    }
  } else {
    if (principal && *principal != caller->name) {
      return reply(
          error_response(403, "permission_denied",
                         "only an administrator of every namespace lists others' sessions"));
    }
    prefix = caller->name + " " + owner;
  }
  const bool auth = auth_.enabled();
  service_.list_sessions(
      prefix, after, limit + 1,
      answer<std::vector<SessionInfo>>(reply, [auth, limit](std::vector<SessionInfo> sessions) {
        json::object body;
        const bool more = sessions.size() > limit;
        if (more) sessions.resize(limit);
        json::array items;
        for (const auto& session : sessions) items.push_back(session_json(session, auth));
        body["sessions"] = std::move(items);
        if (more) body["next"] = sessions.back().session_id;
        return ok(200, body);
      }));
}

// GET /v1/sessions/{id}: the session, what it holds (every namespace) and what it waits for on
// this dlockd. Another principal's session is 404, as a missing one (C6), but for administrators
// of every namespace.
void Api::read_session(const RequestContext& context, const Reply& reply) {
  const auto session_id = checked_session_id(context.params[0]);
  const auto caller = context.principal;
  const bool auth = auth_.enabled();
  service_.describe_session(
      session_id, answer<core::LockService::SessionView>(
                      reply, [this, caller, auth, session_id](core::LockService::SessionView view) {
                        if (!sees_every_session(caller.get()) &&
                            principal_of_owner(view.session.owner_id) != caller->name) {
                          throw SessionNotFoundError("session not found or expired");
                        }
                        auto body = session_json(view.session, auth);
                        json::array holds;
                        for (const auto& info : view.holds) {
                          auto entry = info_json(info, caller.get(), auth);
                          const auto parts = store_key::split(info.key);
                          entry["ns"] = parts ? std::string(parts->ns) : std::string();
                          holds.push_back(std::move(entry));
                        }
                        json::array waits;
                        for (const auto& wait : service_.waits_of(session_id)) {
                          const auto parts = store_key::split(wait.key);
                          json::object entry{{"ns", parts ? std::string(parts->ns) : std::string()},
                                             {"key", api_key(wait.key)},
                                             {"mode", to_string(wait.request.mode())},
                                             {"position", wait.position},
                                             {"waiting_ms", wait.waiting.count()}};
                          if (wait.request.limit() != 0) entry["limit"] = wait.request.limit();
                          waits.push_back(std::move(entry));
                        }
                        body["holds"] = std::move(holds);
                        body["waits"] = std::move(waits);
                        return ok(200, body);
                      }));
}

// --- locks ----------------------------------------------------------------------------------

namespace {

// One entry of a GET /v1/locks page: a grant, or a key a lock-delay keeps (token 0: before the
// key's grants). Pages follow this order -- key as bytes, then token -- and a page's `next` is its
// last entry, "<token>:<key>" (C3 "Paging").
struct ListEntry {
  std::string key;  // the store key
  FencingToken fencing_token = 0;
  friend bool operator<(const ListEntry& a, const ListEntry& b) {
    return std::tie(a.key, a.fencing_token) < std::tie(b.key, b.fencing_token);
  }
};

// `after` of GET /v1/locks (a page's `next`) as the store key and token it names; {} when absent.
// `ns` empty: every namespace is listed, and the cursor's key carries its namespace ("ns/key").
ListAfter parse_list_after(const std::optional<std::string>& text, const std::string& ns) {
  if (!text || text->empty()) return {};
  const auto colon = text->find(':');
  const auto refuse = [] {
    return InvalidArgumentError("after", "after must be the `next` of a page (<token>:<key>)");
  };
  if (colon == std::string::npos || colon == 0) throw refuse();
  ListAfter after;
  try {
    after.fencing_token = parse_token(text->substr(0, colon), "after");
    const std::string key = text->substr(colon + 1);
    if (!ns.empty()) {
      after.key = store_key::join(ns, checked_key(key));
    } else if (const auto parts = store_key::split(key)) {
      after.key = store_key::join(checked_namespace(parts->ns), checked_key(parts->key));
    } else {
      throw refuse();
    }
  } catch (const InvalidArgumentError&) {
    throw refuse();
  }
  return after;
}

}  // namespace

// GET /v1/locks?prefix=&limit=&after=: the grants and the lock-delays under `prefix`, one page of
// at most `limit` entries in (key, token) order, a delay before its key's grants; `next` is
// present when more follow and is the `after` of the next page. With all_namespaces=true (an
// administrator of every namespace), every namespace's, each entry naming its "ns".
void Api::list_locks(const RequestContext& context, const Reply& reply) {
  const bool every_namespace = parse_bool_query(context.query("all_namespaces"), "all_namespaces");
  if (every_namespace && context.query("ns")) {
    throw InvalidArgumentError("ns", "ns and all_namespaces=true exclude each other");
  }
  const auto ns = every_namespace ? std::string() : context.query_namespace();
  const auto prefix = context.query("prefix").value_or("");
  const auto limit = parse_list_limit(context.query("limit"));
  checked_prefix(prefix);
  if (every_namespace && !prefix.empty()) {
    throw InvalidArgumentError("prefix",
                               "prefix selects keys of one namespace: name it with ns instead of "
                               "all_namespaces=true");
  }
  const auto after = parse_list_after(context.query("after"), ns);
  if (every_namespace) {
    if (!sees_every_session(context.principal.get())) {
      return reply(error_response(
          403, "permission_denied",
          "only an administrator of every namespace (admin:*) lists every namespace"));
    }
  } else if (auto denied = auth_.authorize(context, auth::Role::kRead, ns)) {
    return reply(*denied);
  }
  const bool auth = auth_.enabled();
  const auto stored_prefix = every_namespace ? std::string() : store_key::join(ns, prefix);
  // The grants, then the names a lock-delay keeps (C3 "Lock-delay"): two reads of one more than
  // a page each, merged, so that the page is the first `limit` entries of both after `after`.
  service_.list(
      stored_prefix, after, limit + 1,
      [this, reply, stored_prefix, after, limit, caller = context.principal, auth,
       every_namespace](core::Outcome<std::vector<LockInfo>> listed) {
        if (listed.error) return reply(error_response(listed.error));
        service_.list_delays(
            stored_prefix, after.key, limit + 1,
            answer<std::vector<KeyDelay>>(reply, [this, locks = std::move(*listed.value), limit,
                                                  caller, auth,
                                                  every_namespace](std::vector<KeyDelay> delays) {
              // How many acquires wait for each listed key on this dlockd (C3 "Waiters").
              std::vector<std::string> keys;
              keys.reserve(locks.size());
              for (const auto& lock : locks) keys.push_back(lock.key);
              const auto waiting = service_.waiting_counts(keys);
              // The namespace of an entry, when every namespace is listed.
              const auto with_ns = [every_namespace](json::object item, const std::string& key) {
                if (!every_namespace) return item;
                if (const auto parts = store_key::split(key)) item["ns"] = std::string(parts->ns);
                return item;
              };
              json::array items, delayed;
              std::optional<ListEntry> last;
              auto lock = locks.begin();
              auto delay = delays.begin();
              std::size_t taken = 0;
              for (; taken < limit; ++taken) {
                const bool have_lock = lock != locks.end(), have_delay = delay != delays.end();
                if (!have_lock && !have_delay) break;
                if (have_delay && (!have_lock || ListEntry{delay->key, 0} <
                                                     ListEntry{lock->key, lock->fencing_token})) {
                  delayed.push_back(with_ns(
                      {{"key", api_key(delay->key)}, {"delayed_until", format_time(delay->until)}},
                      delay->key));
                  last = ListEntry{delay->key, 0};
                  ++delay;
                } else {
                  json::object item = info_json(*lock, caller.get(), auth);
                  item["waiting"] = waiting[static_cast<std::size_t>(lock - locks.begin())];
                  items.push_back(with_ns(std::move(item), lock->key));
                  last = ListEntry{lock->key, lock->fencing_token};
                  ++lock;
                }
              }
              json::object body{{"locks", std::move(items)}, {"delays", std::move(delayed)}};
              if (last && (lock != locks.end() || delay != delays.end())) {
                body["next"] = std::to_string(last->fencing_token) + ":" +
                               (every_namespace ? last->key : api_key(last->key));
              }
              return ok(200, body);
            }));
      });
}

// GET /v1/locks/{key}: the holder with the greatest token at the top level (an exclusive lock's
// one grant), its mode, and every holder (several for shared holders, ADR-0020).
void Api::read_lock(const RequestContext& context, const Reply& reply) {
  read_holders(context, reply,
               [](const std::string& key, const std::vector<LockInfo>& holders, HoldersView view) {
                 if (holders.empty()) {
                   if (view.delayed_until) {
                     return delayed_error(404, "lock_not_found",
                                          "no live lock " + api_key(key) +
                                              "; a lock-delay keeps it from new grants until " +
                                              format_time(*view.delayed_until),
                                          *view.delayed_until);
                   }
                   return error_response(404, "lock_not_found", "no live lock " + api_key(key));
                 }
                 auto body = std::move(view.top);
                 body["holders"] = std::move(view.items);
                 body["waiters"] = std::move(view.waiters);
                 return ok(200, body);
               });
}

// GET /v1/semaphores/{name}: the limit the live permits agreed on (absent with none) and every
// holder; 200 with no holders when every permit is free.
void Api::read_semaphore(const RequestContext& context, const Reply& reply) {
  read_holders(context, reply,
               [](const std::string& key, const std::vector<LockInfo>& holders, HoldersView view) {
                 json::object body{{"name", api_key(key)}};
                 if (!holders.empty() && holders.back().limit != 0) {
                   body["limit"] = holders.back().limit;
                 }
                 if (view.delayed_until) body["delayed_until"] = format_time(*view.delayed_until);
                 body["holders"] = std::move(view.items);
                 body["waiters"] = std::move(view.waiters);
                 return ok(200, body);
               });
}

void Api::read_holders(const RequestContext& context, const Reply& reply,
                       const RenderHolders& render) {
  const auto name = checked_key(context.params[0]);
  const auto ns = context.query_namespace();
  const auto key = store_key::join(ns, name);
  if (auto denied = auth_.authorize(context, auth::Role::kRead, ns)) return reply(*denied);
  const bool auth = auth_.enabled();
  service_.read_holders(key, [this, reply, key, ns, caller = context.principal, auth,
                              render](core::Outcome<std::vector<LockInfo>> read) {
    const auto rendered = [=, this](const std::vector<LockInfo>& holders,
                                    std::optional<WallClock::time_point> delayed_until) {
      HoldersView view;
      for (const auto& holder : holders) {
        view.items.push_back(info_json(holder, caller.get(), auth));
      }
      if (!holders.empty()) view.top = info_json(holders.back(), caller.get(), auth);
      view.delayed_until = delayed_until;
      // The queue on this dlockd (C3 "Waiters"): session IDs as for holders (C6).
      std::size_t position = 0;
      for (const auto& waiter : service_.waiters(key)) {
        json::object entry{{"position", ++position},
                           {"owner", shown_owner(waiter.owner_id, auth)},
                           {"mode", to_string(waiter.request.mode())},
                           {"waiting_ms", waiter.waiting.count()}};
        if (waiter.request.limit() != 0) entry["limit"] = waiter.request.limit();
        if (may_see_session(caller.get(), waiter.owner_id, ns)) {
          entry["session_id"] = waiter.session_id;
        }
        view.waiters.push_back(std::move(entry));
      }
      return render(key, holders, std::move(view));
    };
    if (read.error || !read.value->empty()) {
      return answer<std::vector<LockInfo>>(reply, [rendered](std::vector<LockInfo> holders) {
        return rendered(holders, std::nullopt);
      })(std::move(read));
    }
    // Nobody holds it: a running lock-delay is named (C3 "Lock-delay").
    service_.list_delays(
        key, "", 1,
        answer<std::vector<KeyDelay>>(reply, [key, rendered](std::vector<KeyDelay> delays) {
          return rendered({}, delay_of(key, delays));
        }));
  });
}

void Api::release(const RequestContext& context, const Reply& reply) {
  const auto name = checked_key(context.params[0]);
  const auto ns = context.query_namespace();
  const auto key = store_key::join(ns, name);
  const auto session_id = required(context.query("session_id"), "session_id");
  const auto token_text = required(context.query("fencing_token"), "fencing_token");
  const auto checked_session = checked_session_id(session_id);
  const auto token = parse_token(token_text);
  if (auto denied = auth_.authorize(context, auth::Role::kLock, ns)) return reply(*denied);
  with_own_session(context, checked_session, reply,
                   [this, key, checked_session, token, reply, who = audit_who(context), ns, name] {
                     service_.release(key, checked_session, token, answer<bool>(reply, [=](bool) {
                                        audit("release", who.principal, ns, name, token,
                                              who.remote);
                                        return no_content();
                                      }));
                   });
}

void Api::acquire(const RequestContext& context, const Reply& reply) {
  const BodyReader reader(context.body, {"session_id", "ttl_ms", "wait_ms", "ns", "lease", "mode"});
  const auto mode = checked_lock_mode(reader.string("mode"));
  grant(context, reply, reader, [mode](const LockLease& lease) {
    return mode == HoldMode::kShared ? GrantRequest::shared(lease) : GrantRequest::exclusive(lease);
  });
}

void Api::acquire_permit(const RequestContext& context, const Reply& reply) {
  const BodyReader reader(context.body,
                          {"session_id", "limit", "ttl_ms", "wait_ms", "ns", "lease"});
  const auto limit = checked_permits(reader.integer("limit"));
  grant(context, reply, reader,
        [limit](const LockLease& lease) { return GrantRequest::permit(limit, lease); });
}

void Api::grant(const RequestContext& context, const Reply& reply, const BodyReader& reader,
                const RequestFor& request_for) {
  const auto name = checked_key(context.params[0]);
  const auto ns = body_namespace(reader, context);
  const auto key = store_key::join(ns, name);
  const auto session_id = checked_session_id(required(reader.string("session_id"), "session_id"));
  const GrantRequest request =
      request_for(checked_lease(reader.string("lease"), reader.integer("ttl_ms"),
                                config_.default_lock_ttl, config_.store.limits));
  const bool campaign = request.kind() == GrantRequest::Kind::kLeader;
  // What the answer's ttl_ms is clamped to; a session-bound grant answers its session's.
  const auto ttl = request.lease().session_bound() ? milliseconds::max() : request.lease().ttl();
  const auto wait = checked_wait(reader.integer("wait_ms"), config_.max_wait);
  if (auto denied = auth_.authorize(context, auth::Role::kLock, ns)) return reply(*denied);
  const auto received = context.received;
  const bool auth = auth_.enabled();
  const auto who = audit_who(context);
  const auto cancellation = context.cancellation;
  const auto waiter = waiter_of(context);
  with_own_session(context, session_id, reply, [=, this] {
    auto render = [=, this](std::optional<LockHandle> handle) {
      if (!handle) {
        return error_response(409, "held",
                              campaign ? "election " + api_key(key) + " has another leader"
                              : request.mode() == HoldMode::kPermit
                                  ? "every permit of " + api_key(key) + " is taken"
                                  : "lock " + api_key(key) + " is held by another session");
      }
      audit(campaign ? "campaign" : "grant", who.principal, ns, name, handle->fencing_token,
            who.remote, {}, log_enabled("info") ? grant_fields(*handle) : json::object{});
      if (campaign) {
        telemetry_.on_leader(handle->key, handle->fencing_token);
        return ok(200, leader_json(*handle, std::string(*request.leader_value()), received, auth));
      }
      return ok(200, handle_json(*handle, ttl, received, auth, request.limit()));
    };
    // "held" because of a lock-delay says so, and until when (C3 "Lock-delay"): one more read,
    // on this answer only. If that read fails, the answer is the plain "held".
    core::LockService::Callback<std::optional<LockHandle>> done =
        [this, key, reply, answered = answer<std::optional<LockHandle>>(reply, render)](
            core::Outcome<std::optional<LockHandle>> outcome) {
          if (outcome.error || outcome.value->has_value()) return answered(std::move(outcome));
          service_.list_delays(
              key, "", 1, [key, reply, answered](core::Outcome<std::vector<KeyDelay>> delays) {
                const auto until = delays.error ? std::nullopt : delay_of(key, *delays.value);
                if (!until) return answered({std::optional<LockHandle>{}, nullptr});
                reply(delayed_error(409, "held",
                                    api_key(key) + " is in a lock-delay until " +
                                        format_time(*until) +
                                        " (a grant of it ended without a release)",
                                    *until));
              });
        };
    // A waiting acquire counts against its share of the connections and its principal's
    // auth.max.waiters.per.principal (C6).
    if (wait.count() > 0) done = count_waiter(waiter, std::move(done));
    // A wait ends when its client's connection closes; a grant its client never receives is
    // given back (ADR-0007 "A wait belongs to its connection").
    service_.acquire(key, session_id, request, wait, std::move(done), cancellation);
  });
}

void Api::extend(const RequestContext& context, const Reply& reply) {
  const auto name = checked_key(context.params[0]);
  const BodyReader reader(context.body, {"session_id", "fencing_token", "ttl_ms", "ns"});
  const auto ns = body_namespace(reader, context);
  const auto key = store_key::join(ns, name);
  const auto session_id = checked_session_id(required(reader.string("session_id"), "session_id"));
  const auto token = required(reader.unsigned_integer("fencing_token"), "fencing_token");
  const auto ttl =
      checked_ttl(reader.integer("ttl_ms"), config_.default_lock_ttl, config_.store.limits);
  if (auto denied = auth_.authorize(context, auth::Role::kLock, ns)) return reply(*denied);
  const auto received = context.received;
  const bool auth = auth_.enabled();
  with_own_session(context, session_id, reply, [=, this] {
    service_.extend(key, session_id, token, ttl,
                    answer<LockHandle>(reply, [ttl, received, auth](LockHandle handle) {
                      return ok(200, handle_json(handle, ttl, received, auth));
                    }));
  });
}

// --- admin ----------------------------------------------------------------------------------

bool Api::admin_refused(const RequestContext& context, const Reply& reply) {
  if (auth_.enabled()) return false;
  if (!config_.admin_enabled) {
    reply(error_response(403, "forbidden", "the admin API is disabled (admin.enabled)"));
    return true;
  }
  if (auto refused = auth_.check_admin_token(context.request, context.remote_address)) {
    reply(std::move(*refused));
    return true;
  }
  return false;
}

// With authentication on, revoke and clear-delay need `admin` on the namespace (the admin.token
// principal has admin:*); without it, the caller presented admin.token (admin_refused).
void Api::revoke(const RequestContext& context, const Reply& reply) {
  if (admin_refused(context, reply)) return;
  const auto name = checked_key(context.params[0]);
  const auto ns = context.query_namespace();
  const auto key = store_key::join(ns, name);
  if (auto denied = auth_.authorize(context, auth::Role::kAdmin, ns)) return reply(*denied);
  const bool auth = auth_.enabled();
  const auto who = audit_who(context);
  service_.revoke(key, answer<LockOutcome>(reply, [=, this](LockOutcome outcome) {
                    json::object body{{"revoked", outcome.revoked}};
                    if (outcome.fencing_token) body["fencing_token"] = *outcome.fencing_token;
                    if (outcome.owner_id) body["owner"] = shown_owner(*outcome.owner_id, auth);
                    if (outcome.fencing_token) telemetry_.on_revoke(key, *outcome.fencing_token);
                    audit("revoke", who.principal, ns, name, outcome.fencing_token, who.remote, {},
                          revoke_fields(outcome));
                    return ok(200, body);
                  }));
}

// Ends the lock-delays running on a key (C3 "Lock-delay"): the key is granted at once.
void Api::clear_delay(const RequestContext& context, const Reply& reply) {
  if (admin_refused(context, reply)) return;
  const auto name = checked_key(context.params[0]);
  const auto ns = context.query_namespace();
  const auto key = store_key::join(ns, name);
  if (auto denied = auth_.authorize(context, auth::Role::kAdmin, ns)) return reply(*denied);
  const auto who = audit_who(context);
  service_.clear_delay(key, answer<bool>(reply, [=](bool cleared) {
                         audit("clear_delay", who.principal, ns, name, std::nullopt, who.remote, {},
                               {{"cleared", cleared}});
                         return ok(200, {{"cleared", cleared}});
                       }));
}

}  // namespace dlock::server
