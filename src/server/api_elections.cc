// The election routes (C3 "Elections", docs/adr/0020-more-primitives-design.md): an election's
// leader is an exclusive, session-bound grant of the name with a value. Campaign is an acquire
// (api.cc's grant, with the value), resign a release; proclaim and the observing read are here.

#include <boost/json/object.hpp>
#include <chrono>
#include <optional>
#include <string>

#include "dlock/errors.h"
#include "server/api.h"
#include "server/api_internal.h"
#include "server/api_render.h"
#include "util/store_key.h"

namespace dlock::server {
namespace {

using api_internal::answer;
using api_internal::audit_who;
using api_internal::body_namespace;
using api_internal::required;

Response no_leader(const std::string& key) {
  return error_response(404, "no_leader", "election " + api_key(key) + " has no leader");
}

}  // namespace

void Api::campaign(const RequestContext& context, const Reply& reply) {
  const BodyReader reader(context.body, {"session_id", "value", "wait_ms", "ns"});
  auto value = checked_leader_value(reader.string("value"));
  // A leader lives as long as its session (C3 "Elections"): a campaign's body has no lease.
  grant(context, reply, reader, [&value](const LockLease&) {
    return GrantRequest::leader(std::move(value), LockLease::session());
  });
}

void Api::proclaim(const RequestContext& context, const Reply& reply) {
  const auto name = checked_key(context.params[0]);
  const BodyReader reader(context.body, {"session_id", "fencing_token", "value", "ns"});
  const auto ns = body_namespace(reader, context);
  const auto key = store_key::join(ns, name);
  const auto session_id = checked_session_id(required(reader.string("session_id"), "session_id"));
  const auto token = required(reader.unsigned_integer("fencing_token"), "fencing_token");
  auto value = checked_leader_value(reader.string("value"));
  if (auto denied = auth_.authorize(context, auth::Role::kLock, ns)) return reply(*denied);
  const bool auth = auth_.enabled();
  const auto who = audit_who(context);
  with_own_session(context, session_id, reply, [=, this, value = std::move(value)] {
    service_.proclaim(key, session_id, token, value, answer<LockInfo>(reply, [=](LockInfo info) {
                        audit("proclaim", who.principal, ns, name, token, who.remote);
                        // The caller's own session, which a read without a caller hides.
                        auto body = leader_info_json(info, nullptr, auth);
                        body["session_id"] = info.session_id;
                        return ok(200, body);
                      }));
  });
}

void Api::resign(const RequestContext& context, const Reply& reply) {
  const auto name = checked_key(context.params[0]);
  const BodyReader reader(context.body, {"session_id", "fencing_token", "ns"});
  const auto ns = body_namespace(reader, context);
  const auto key = store_key::join(ns, name);
  const auto session_id = checked_session_id(required(reader.string("session_id"), "session_id"));
  const auto token = required(reader.unsigned_integer("fencing_token"), "fencing_token");
  if (auto denied = auth_.authorize(context, auth::Role::kLock, ns)) return reply(*denied);
  const auto who = audit_who(context);
  with_own_session(context, session_id, reply, [=, this] {
    service_.release(key, session_id, token, answer<bool>(reply, [=](bool) {
                       audit("resign", who.principal, ns, name, token, who.remote);
                       return no_content();
                     }));
  });
}

// GET /v1/elections/{name}: the leader now, or — with after_token (and after_value) — once a
// leader newer than the caller's last answer leads, waiting at most wait_ms (an observer).
void Api::read_election(const RequestContext& context, const Reply& reply) {
  const auto name = checked_key(context.params[0]);
  const auto ns = context.query_namespace();
  const auto key = store_key::join(ns, name);
  const auto after_text = context.query("after_token");
  const auto after_token =
      after_text ? std::optional<FencingToken>(parse_token(*after_text, "after_token"))
                 : std::nullopt;
  const auto after_value_text = context.query("after_value");
  const auto after_value =
      after_value_text
          ? std::optional<std::string>(checked_leader_value(after_value_text, "after_value"))
          : std::nullopt;
  if (after_value && !after_token) {
    throw InvalidArgumentError("after_value", "after_value needs after_token");
  }
  const auto wait = parse_query_wait(context.query("wait_ms"), config_.max_wait);
  if (auto denied = auth_.authorize(context, auth::Role::kRead, ns)) return reply(*denied);
  const bool auth = auth_.enabled();
  // A leader is a live exclusive grant with a value; one newer than the caller's last answer
  // has a greater token, or the same token and another value.
  auto newer = [after_token, after_value](const std::optional<LockInfo>& info) {
    if (!after_token) return true;
    if (!info || !info->value) return false;
    if (info->fencing_token > *after_token) return true;
    return info->fencing_token == *after_token && after_value && *info->value != *after_value;
  };
  auto done = answer<std::optional<LockInfo>>(
      reply, [key, caller = context.principal, auth](std::optional<LockInfo> info) {
        if (!info || !info->value) return no_leader(key);
        return ok(200, leader_info_json(*info, caller.get(), auth));
      });
  // A waiting observer counts as a waiting acquire does (C6).
  if (wait.count() > 0 && after_token) done = count_waiter(waiter_of(context), std::move(done));
  service_.observe(key, std::move(newer), after_token ? wait : std::chrono::milliseconds(0),
                   std::move(done), context.cancellation);
}

}  // namespace dlock::server
