// GET /v1/watch (C3 "Watch", ADR-0032): the lock events of a key or a prefix that this dlockd
// saw, after a position, as a long poll.

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include "dlock/errors.h"
#include "server/api_internal.h"
#include "server/api_render.h"
#include "server/authorization.h"
#include "server/watch_query.h"
#include "util/store_key.h"

namespace dlock::server {

namespace json = boost::json;

namespace {

// One event as `caller` may see it: the session ID as for a lock's holder (C6).
json::object event_json(const core::WatchEvent& event, const std::string& position,
                        const auth::Principal* caller, bool auth) {
  const auto parts = store_key::split(event.key);
  const std::string ns = parts ? std::string(parts->ns) : std::string();
  json::object body{{"position", position},
                    {"kind", core::to_string(event.kind)},
                    {"ns", ns},
                    {"key", api_key(event.key)},
                    {"at", format_time(event.at)}};
  if (event.token != 0) body["fencing_token"] = event.token;
  if (!event.owner_id.empty()) body["owner"] = shown_owner(event.owner_id, auth);
  if (event.kind == core::WatchKind::kGrant || event.kind == core::WatchKind::kWaiterJoined ||
      event.kind == core::WatchKind::kWaiterLeft) {
    body["mode"] = to_string(event.mode);
  }
  if (!event.reason.empty()) body["reason"] = event.reason;
  if (!event.session_id.empty() && may_see_session(caller, event.owner_id, ns)) {
    body["session_id"] = event.session_id;
  }
  return body;
}

}  // namespace

// GET /v1/watch?key=|prefix=&ns=&after=&wait_ms=&limit=: the events after `after` (none given:
// from now), waiting up to wait_ms for the first; `next` is the `after` of the next call. A
// position this dlockd cannot continue from is answered with a `reset` event first.
void Api::watch(const RequestContext& context, const Reply& reply) {
  const auto query = parse_watch_query(
      context.query("ns"), context.query("key"), context.query("prefix"), context.query("after"),
      context.query("wait_ms"), context.query("limit"), config_.max_wait);
  if (auto denied = auth_.authorize(context, auth::Role::kRead, query.ns)) return reply(*denied);
  auto& log = service_.watch_log();
  // A waiting watch holds a connection as a waiting acquire does (C6 "Connections"), and every
  // one counts against max_waiters.
  if (query.wait.count() > 0 && log.pending() >= config_.max_waiters) {
    throw ResourceExhaustedError("too many waiting watches (limit " +
                                 std::to_string(config_.max_waiters) + ")");
  }
  const bool auth = auth_.enabled();
  core::WatchLog::Done done = [&log, reply, caller = context.principal,
                               auth](core::WatchLog::Page page) {
    json::array events;
    if (page.reset) {
      events.push_back({{"position", page.next}, {"kind", "reset"}, {"reason", *page.reset}});
    }
    for (const auto& event : page.events) {
      events.push_back(event_json(event, log.position(event.seq), caller.get(), auth));
    }
    reply(ok(200, {{"events", std::move(events)}, {"next", page.next}}));
  };
  if (query.wait.count() > 0) done = count_waiter(waiter_of(context), std::move(done));
  core::WatchFilter filter{store_key::join(query.ns, query.target), query.prefix};
  log.poll(std::move(filter), query.after, query.limit, query.wait, std::move(done),
           context.cancellation);
}

}  // namespace dlock::server
