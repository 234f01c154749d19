#include "server/api_render.h"

#include <algorithm>
#include <boost/json/serialize.hpp>

#include "server/authorization.h"
#include "server/error_mapping.h"
#include "server/json_util.h"
#include "util/store_key.h"

namespace dlock::server {

namespace http = boost::beast::http;
namespace json = boost::json;
using std::chrono::milliseconds;

milliseconds honoured_ttl(const LockHandle& handle, milliseconds asked,
                          SteadyClock::time_point received) {
  const auto kept = std::chrono::floor<milliseconds>(handle.client_deadline - received);
  return std::clamp(kept, milliseconds(0), handle.session_bound ? milliseconds::max() : asked);
}

namespace {

const char* lease_name(bool session_bound) { return session_bound ? "session" : "ttl"; }

}  // namespace

std::string api_key(const std::string& stored) { return std::string(store_key::api_key(stored)); }

json::object handle_json(const LockHandle& handle, milliseconds asked,
                         SteadyClock::time_point received, bool auth_enabled, std::uint32_t limit) {
  json::object body{{"key", api_key(handle.key)},
                    {"fencing_token", handle.fencing_token},
                    {"owner", shown_owner(handle.owner_id, auth_enabled)},
                    {"session_id", handle.session_id},
                    {"ttl_ms", honoured_ttl(handle, asked, received).count()},
                    {"expires_at", format_time(handle.server_expiry)},
                    {"lease", lease_name(handle.session_bound)},
                    {"mode", to_string(handle.mode)}};
  if (limit != 0) body["limit"] = limit;
  return body;
}

json::object info_json(const LockInfo& info, const auth::Principal* caller, bool auth_enabled) {
  json::object body{{"key", api_key(info.key)},
                    {"fencing_token", info.fencing_token},
                    {"owner", shown_owner(info.owner_id, auth_enabled)},
                    {"acquired_at", format_time(info.acquired_at)},
                    {"expires_at", format_time(info.expires_at)},
                    {"lease", lease_name(info.session_bound)},
                    {"mode", to_string(info.mode)}};
  if (info.limit != 0) body["limit"] = info.limit;
  if (info.value) body["value"] = *info.value;
  const auto parts = store_key::split(info.key);
  if (may_see_session(caller, info.owner_id, parts ? parts->ns : "")) {
    body["session_id"] = info.session_id;
  }
  return body;
}

json::object leader_json(const LockHandle& handle, const std::string& value,
                         SteadyClock::time_point received, bool auth_enabled) {
  return {{"name", api_key(handle.key)},
          {"leader", {{"owner", shown_owner(handle.owner_id, auth_enabled)}, {"value", value}}},
          {"fencing_token", handle.fencing_token},
          {"session_id", handle.session_id},
          {"ttl_ms", honoured_ttl(handle, milliseconds::max(), received).count()},
          {"expires_at", format_time(handle.server_expiry)},
          {"lease", lease_name(handle.session_bound)}};
}

json::object leader_info_json(const LockInfo& info, const auth::Principal* caller,
                              bool auth_enabled) {
  const auto shown = info_json(info, caller, auth_enabled);
  json::object body{
      {"name", api_key(info.key)},
      {"leader",
       {{"owner", shown_owner(info.owner_id, auth_enabled)}, {"value", info.value.value_or("")}}},
      {"fencing_token", info.fencing_token},
      {"acquired_at", format_time(info.acquired_at)},
      {"expires_at", format_time(info.expires_at)},
      {"lease", lease_name(info.session_bound)}};
  if (const auto* session = shown.if_contains("session_id")) body["session_id"] = *session;
  return body;
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

}  // namespace dlock::server
