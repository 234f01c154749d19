#include "server/api.h"

#include <algorithm>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>
#include <charconv>
#include <chrono>
#include <vector>

#include "dlock/errors.h"
#include "server/error_mapping.h"
#include "server/json_util.h"

namespace dlock::server {
namespace {

namespace http = boost::beast::http;
namespace json = boost::json;
using std::chrono::milliseconds;

constexpr std::size_t kMaxKeyBytes = 512;
constexpr std::size_t kMaxOwnerBytes = 256;
constexpr std::size_t kMaxNamespaceBytes = 64;
constexpr std::size_t kMaxListLimit = 1000;

void check_text(const std::string& value, const char* field, std::size_t max_bytes) {
  if (value.empty()) throw InvalidArgumentError(field, std::string(field) + " must not be empty");
  if (value.size() > max_bytes) {
    throw InvalidArgumentError(
        field, std::string(field) + " must be at most " + std::to_string(max_bytes) + " bytes");
  }
  for (const unsigned char c : value) {
    if (c < 0x20 || c == 0x7F) {
      throw InvalidArgumentError(field,
                                 std::string(field) + " must not contain control characters");
    }
  }
}

std::string checked_namespace(const std::string& ns) {
  check_text(ns, "ns", kMaxNamespaceBytes);
  for (const char c : ns) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      throw InvalidArgumentError("ns", "ns may contain only letters, digits, '-', '_' and '.'");
    }
  }
  return ns;
}

std::string checked_session_id(const std::string& session_id) {
  check_text(session_id, "session_id", 128);
  for (const char c : session_id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') {
      throw InvalidArgumentError("session_id", "session_id is malformed");
    }
  }
  return session_id;
}

milliseconds checked_ttl(std::optional<std::int64_t> ttl_ms, milliseconds fallback,
                         const TtlLimits& limits) {
  const milliseconds ttl = ttl_ms ? milliseconds(*ttl_ms) : fallback;
  check_ttl(ttl, limits, "ttl_ms");
  return ttl;
}

std::uint64_t parse_token(const std::string& text) {
  std::uint64_t token = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), token);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    throw InvalidArgumentError("fencing_token", "fencing_token must be a non-negative integer");
  }
  return token;
}

// Compares without an early exit, so response timing does not reveal a prefix of the token.
bool constant_time_equal(std::string_view given, std::string_view expected) {
  unsigned char difference = given.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < given.size(); ++i) {
    difference |= static_cast<unsigned char>(given[i] ^ expected[i % expected.size()]);
  }
  return difference == 0;
}

// "<ns>/<key>" is the store's key; the API shows the key without its namespace.
std::string store_key(const std::string& ns, const std::string& key) { return ns + "/" + key; }
std::string api_key(const std::string& stored) { return stored.substr(stored.find('/') + 1); }

// The lifetime answered for a grant (C3, docs/adr/0011-honest-lock-lifetimes.md): never more
// than was asked, and never more than the store says the lock is certain to live, counted from
// when this request arrived. A client counts it from its send time, which is earlier, so the
// deadline it computes is one the backend keeps -- even where the backend kept less than asked
// (an etcd lease renews for its first TTL, whatever an extend asks).
milliseconds honoured_ttl(const LockHandle& handle, milliseconds asked,
                          SteadyClock::time_point received) {
  const auto kept = std::chrono::floor<milliseconds>(handle.client_deadline - received);
  return std::clamp(kept, milliseconds(0), asked);
}

json::object handle_json(const LockHandle& handle, milliseconds asked,
                         SteadyClock::time_point received) {
  return {{"key", api_key(handle.key)},
          {"fencing_token", handle.fencing_token},
          {"owner", handle.owner_id},
          {"session_id", handle.session_id},
          {"ttl_ms", honoured_ttl(handle, asked, received).count()},
          {"expires_at", format_time(handle.server_expiry)}};
}

json::object info_json(const LockInfo& info) {
  return {{"key", api_key(info.key)},
          {"fencing_token", info.fencing_token},
          {"owner", info.owner_id},
          {"session_id", info.session_id},
          {"acquired_at", format_time(info.acquired_at)},
          {"expires_at", format_time(info.expires_at)}};
}

Response ok(unsigned status, const json::object& body) {
  return json_response(status, json::serialize(body));
}

Response no_content() {
  Response response{http::status::no_content, 11};
  response.set(http::field::server, "dlockd");
  response.prepare_payload();
  return response;
}

// Answers `reply` from a service callback: the value through `render`, an error through the
// one error mapping.
template <typename T, typename Render>
core::LockService::Callback<T> answer(Reply reply, Render render) {
  return [reply = std::move(reply), render = std::move(render)](core::Outcome<T> outcome) {
    if (outcome.error) return reply(error_response(outcome.error));
    try {
      reply(render(std::move(*outcome.value)));
    } catch (...) {
      reply(error_response(std::current_exception()));
    }
  };
}

}  // namespace

Api::Api(core::LockService& service, Telemetry& telemetry, const ServerConfig& config)
    : service_(service), telemetry_(telemetry), config_(config) {}

void Api::handle(Request&& request, Reply reply) {
  auto counted = [this, reply = std::move(reply)](Response response) {
    telemetry_.on_http_request(static_cast<int>(response.result_int()));
    reply(std::move(response));
  };
  try {
    route(request, counted);
  } catch (...) {
    counted(error_response(std::current_exception()));
  }
}

void Api::route(const Request& request, const Reply& reply) {
  const auto parsed = boost::urls::parse_origin_form(request.target());
  if (!parsed) {
    throw InvalidArgumentError("path", "malformed request target (bad percent-encoding?)");
  }
  const boost::urls::url_view url = *parsed;
  std::vector<std::string> path;
  for (auto segment : url.segments()) path.push_back(segment);
  const auto query = [&](const char* name) -> std::optional<std::string> {
    const auto found = url.params().find(name);
    if (found == url.params().end()) return std::nullopt;
    return std::string((*found).value);
  };
  const auto method = request.method();
  const auto& body = request.body();
  // Before any store call: the lifetimes answered count from here (honoured_ttl).
  const auto received = SteadyClock::now();

  if (path.size() == 1 && (path[0] == "healthz" || path[0] == "readyz")) {
    if (path[0] == "readyz" && !ready_) {
      return reply(error_response(503, "unavailable", "not ready"));
    }
    return reply(ok(200, {{"status", "ok"}, {"backend", service_.backend_id()}}));
  }
  if (path.size() == 1 && path[0] == "metrics" && method == http::verb::get) {
    Response response{http::status::ok, 11};
    response.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
    response.body() = telemetry_.scrape();
    response.prepare_payload();
    return reply(std::move(response));
  }
  if (path.empty() || path[0] != "v1") {
    return reply(error_response(404, "not_found", "no such route: " + std::string(url.path())));
  }
  path.erase(path.begin());

  // --- sessions ---
  if (path.size() == 1 && path[0] == "sessions" && method == http::verb::post) {
    const BodyReader reader(body, {"owner", "ttl_ms"});
    const auto owner = reader.string("owner");
    if (!owner) throw InvalidArgumentError("owner", "owner is required");
    check_text(*owner, "owner", kMaxOwnerBytes);
    const auto ttl =
        checked_ttl(reader.integer("ttl_ms"), config_.default_session_ttl, config_.store.limits);
    return service_.open_session(*owner, ttl, answer<SessionInfo>(reply, [](SessionInfo s) {
      return ok(201, {{"session_id", s.session_id},
                      {"owner", s.owner_id},
                      {"ttl_ms", s.ttl.count()},
                      {"expires_at", format_time(s.expires_at)}});
    }));
  }
  if (path.size() == 3 && path[0] == "sessions" && path[2] == "keepalive" &&
      method == http::verb::post) {
    return service_.keepalive(
        checked_session_id(path[1]), answer<SessionInfo>(reply, [](SessionInfo s) {
          return ok(200, {{"ttl_ms", s.ttl.count()}, {"expires_at", format_time(s.expires_at)}});
        }));
  }
  if (path.size() == 2 && path[0] == "sessions" && method == http::verb::delete_) {
    return service_.close_session(
        checked_session_id(path[1]),
        answer<std::vector<LockInfo>>(reply, [](std::vector<LockInfo>) { return no_content(); }));
  }

  // --- locks ---
  if (path.size() == 1 && path[0] == "locks" && method == http::verb::get) {
    const auto ns = checked_namespace(query("ns").value_or("default"));
    const auto prefix = query("prefix").value_or("");
    std::size_t limit = 100;
    if (const auto text = query("limit")) {
      const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), limit);
      if (error != std::errc() || end != text->data() + text->size() || limit == 0 ||
          limit > kMaxListLimit) {
        throw InvalidArgumentError(
            "limit", "limit must be an integer from 1 to " + std::to_string(kMaxListLimit));
      }
    }
    if (prefix.size() > kMaxKeyBytes) throw InvalidArgumentError("prefix", "prefix too long");
    return service_.list(store_key(ns, prefix), limit,
                         answer<std::vector<LockInfo>>(reply, [](std::vector<LockInfo> locks) {
                           json::array items;
                           for (const auto& info : locks) items.push_back(info_json(info));
                           return ok(200, {{"locks", std::move(items)}});
                         }));
  }
  const bool admin = path.size() == 4 && path[0] == "admin" && path[1] == "locks" &&
                     path[3] == "revoke" && method == http::verb::post;
  if (admin) return revoke(request, path[2], query("ns"), reply);
  if (path.size() < 2 || path[0] != "locks") {
    return reply(error_response(404, "not_found", "no such route: " + std::string(url.path())));
  }
  check_text(path[1], "key", kMaxKeyBytes);

  if (path.size() == 2 && method == http::verb::get) {
    const auto key = store_key(checked_namespace(query("ns").value_or("default")), path[1]);
    return service_.read(key, answer<std::optional<LockInfo>>(reply, [key](auto info) {
                           if (!info)
                             return error_response(404, "lock_not_found",
                                                   "no live lock " + api_key(key));
                           return ok(200, info_json(*info));
                         }));
  }
  if (path.size() == 2 && method == http::verb::delete_) {
    const auto key = store_key(checked_namespace(query("ns").value_or("default")), path[1]);
    const auto session_id = query("session_id");
    if (!session_id) throw InvalidArgumentError("session_id", "session_id is required");
    const auto token = query("fencing_token");
    if (!token) throw InvalidArgumentError("fencing_token", "fencing_token is required");
    return service_.release(key, checked_session_id(*session_id), parse_token(*token),
                            answer<bool>(reply, [](bool) { return no_content(); }));
  }
  if (path.size() == 3 && path[2] == "acquire" && method == http::verb::post) {
    const BodyReader reader(body, {"session_id", "ttl_ms", "wait_ms", "ns"});
    const auto key = store_key(
        checked_namespace(reader.string("ns").value_or(query("ns").value_or("default"))), path[1]);
    const auto session_id = reader.string("session_id");
    if (!session_id) throw InvalidArgumentError("session_id", "session_id is required");
    const auto ttl =
        checked_ttl(reader.integer("ttl_ms"), config_.default_lock_ttl, config_.store.limits);
    const auto wait = milliseconds(reader.integer("wait_ms").value_or(0));
    if (wait.count() < 0 || wait > config_.max_wait) {
      throw InvalidArgumentError(
          "wait_ms", "wait_ms must be between 0 and " + std::to_string(config_.max_wait.count()));
    }
    return service_.acquire(key, checked_session_id(*session_id), ttl, wait,
                            answer<std::optional<LockHandle>>(
                                reply, [key, ttl, received](std::optional<LockHandle> handle) {
                                  if (!handle) {
                                    return error_response(409, "held",
                                                          "lock " + api_key(key) +
                                                              " is held by another "
                                                              "session");
                                  }
                                  return ok(200, handle_json(*handle, ttl, received));
                                }));
  }
  if (path.size() == 3 && path[2] == "extend" && method == http::verb::post) {
    const BodyReader reader(body, {"session_id", "fencing_token", "ttl_ms", "ns"});
    const auto key = store_key(
        checked_namespace(reader.string("ns").value_or(query("ns").value_or("default"))), path[1]);
    const auto session_id = reader.string("session_id");
    if (!session_id) throw InvalidArgumentError("session_id", "session_id is required");
    const auto token = reader.unsigned_integer("fencing_token");
    if (!token) throw InvalidArgumentError("fencing_token", "fencing_token is required");
    const auto ttl =
        checked_ttl(reader.integer("ttl_ms"), config_.default_lock_ttl, config_.store.limits);
    return service_.extend(key, checked_session_id(*session_id), *token, ttl,
                           answer<LockHandle>(reply, [ttl, received](LockHandle handle) {
                             return ok(200, handle_json(handle, ttl, received));
                           }));
  }
  reply(error_response(
      405, "method_not_allowed",
      std::string(request.method_string()) + " is not allowed on " + std::string(url.path())));
}

void Api::revoke(const Request& request, const std::string& key_segment,
                 const std::optional<std::string>& ns, const Reply& reply) {
  if (!config_.admin_enabled) {
    return reply(error_response(403, "forbidden", "the admin API is disabled (admin.enabled)"));
  }
  const auto authorization = request[http::field::authorization];
  const std::string expected = "Bearer " + config_.admin_token;
  if (authorization.empty()) {
    return reply(error_response(401, "unauthorized", "admin token required"));
  }
  if (!constant_time_equal(authorization, expected)) {
    return reply(error_response(403, "forbidden", "admin token rejected"));
  }
  check_text(key_segment, "key", kMaxKeyBytes);
  const auto key = store_key(checked_namespace(ns.value_or("default")), key_segment);
  service_.revoke(key, answer<LockOutcome>(reply, [key](LockOutcome outcome) {
                    json::object body{{"revoked", outcome.revoked}};
                    if (outcome.fencing_token) body["fencing_token"] = *outcome.fencing_token;
                    if (outcome.owner_id) body["owner"] = *outcome.owner_id;
                    log_event("info", "revoke", {{"key", key}, {"revoked", outcome.revoked}});
                    return ok(200, body);
                  }));
}

}  // namespace dlock::server
