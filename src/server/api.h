#pragma once

// The /v1 HTTP/JSON surface of contract C3, plus /metrics, /healthz and /readyz. A request is
// matched against one route table (method + path pattern -> handler, api.cc); the handler
// checks its inputs (server/input_checks.h: a 400 naming the field), then hands the work to the
// LockService, whose answer or error becomes the response (server/error_mapping.h).

#include <atomic>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/url/url_view.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "auth/token_table.h"
#include "core/lock_service.h"
#include "core/principal_counter.h"
#include "core/session_book.h"
#include "dlock/types.h"
#include "server/authorization.h"
#include "server/config.h"
#include "server/http_server.h"
#include "server/json_util.h"
#include "server/request_context.h"
#include "server/telemetry.h"

namespace dlock::server {

class Api {
 public:
  // Loads the tokens file when configured: throws auth::TokensFileError or
  // InvalidArgumentError (a configuration error) when it cannot be used.
  Api(core::LockService& service, Telemetry& telemetry, const ServerConfig& config);

  // `peer`: the remote address (no port) for the failure throttle and audit events, and the
  // verified client certificate's CN under mTLS (contract C6).
  void handle(Request&& request, Reply reply, const Peer& peer = {});
  // The health probe, readiness and metrics routes of the table, for the HttpServer.
  static ProbeRoutes probe_routes();
  // /readyz answers 200 only while ready (false during start-up and shutdown).
  void set_ready(bool ready) { ready_ = ready; }
  // SIGHUP: reload the tokens file (keeps the old one on an error, logged), then take away what
  // it no longer allows (ApiAuth::reload, C6).
  void reload_tokens() { auth_.reload(service_); }

  using Handler = void (Api::*)(const RequestContext&, const Reply&);

  // One per row of the route table (api.cc); public so that the table can name them.
  void health(const RequestContext& context, const Reply& reply);
  void ready(const RequestContext& context, const Reply& reply);
  void metrics(const RequestContext& context, const Reply& reply);
  // The web console's files at /ui/ (api_console.cc, docs/console.md); /ui redirects there.
  void console(const RequestContext& context, const Reply& reply);
  void console_root(const RequestContext& context, const Reply& reply);
  void open_session(const RequestContext& context, const Reply& reply);
  void keepalive(const RequestContext& context, const Reply& reply);
  void close_session(const RequestContext& context, const Reply& reply);
  void list_sessions(const RequestContext& context, const Reply& reply);
  void read_session(const RequestContext& context, const Reply& reply);
  void list_locks(const RequestContext& context, const Reply& reply);
  void revoke(const RequestContext& context, const Reply& reply);
  void clear_delay(const RequestContext& context, const Reply& reply);
  void read_lock(const RequestContext& context, const Reply& reply);
  void release(const RequestContext& context, const Reply& reply);
  void acquire(const RequestContext& context, const Reply& reply);
  void extend(const RequestContext& context, const Reply& reply);
  void acquire_permit(const RequestContext& context, const Reply& reply);
  void read_semaphore(const RequestContext& context, const Reply& reply);
  // Elections (api_elections.cc, C3 "Elections").
  void campaign(const RequestContext& context, const Reply& reply);
  void proclaim(const RequestContext& context, const Reply& reply);
  void resign(const RequestContext& context, const Reply& reply);
  void read_election(const RequestContext& context, const Reply& reply);
  // The watch of a key or a prefix (api_watch.cc, C3 "Watch").
  void watch(const RequestContext& context, const Reply& reply);

 private:
  // Matches the route table (its row's index in `index`, kRoutes.size() for none) and runs the
  // row's handler with the reply `counted()` makes for that index (dlock_http_requests_total).
  void route(const Request& request, const Peer& peer, std::size_t& index,
             const std::function<Reply()>& counted);
  // The route table's rows as metric labels, in order: "POST /v1/locks/{}/acquire".
  static std::vector<std::string> route_labels();
  // Runs `act` once the session is known to belong to the caller (ADR-0016); another
  // principal's session is answered 404 session_not_found, as a missing one is.
  void with_own_session(const RequestContext& context, const std::string& session_id,
                        const Reply& reply, std::function<void()> act);
  // The admin routes' gate without authentication: admin.enabled and the admin.token header.
  // Answers the refusal and returns true when the request may not go on.
  bool admin_refused(const RequestContext& context, const Reply& reply);
  // GET of a name's holders (a lock's or a semaphore's): checks the key and the read role, then
  // renders the holders (ordered by token) as `items`, and the latest one as `top` ({} if none).
  // With no holder, `delayed_until` is the end of a running lock-delay of the name, if any.
  // `waiters`: the acquires queued for the name on this dlockd, in order.
  struct HoldersView {
    boost::json::array items;
    boost::json::object top;
    std::optional<WallClock::time_point> delayed_until;
    boost::json::array waiters;
  };
  using RenderHolders = std::function<Response(
      const std::string& key, const std::vector<LockInfo>& holders, HoldersView view)>;
  void read_holders(const RequestContext& context, const Reply& reply, const RenderHolders& render);
  // The acquire of a lock (exclusive or shared), of a permit or a campaign (answered as an
  // election), from its checked body: `request_for` makes the request from the body's checked
  // lease.
  using RequestFor = std::function<GrantRequest(const LockLease& lease)>;
  void grant(const RequestContext& context, const Reply& reply, const BodyReader& reader,
             const RequestFor& request_for);

  core::LockService& service_;
  Telemetry& telemetry_;
  const ServerConfig& config_;
  std::atomic<bool> ready_{false};
  const SteadyClock::time_point started_ = SteadyClock::now();  // /healthz's uptime_s
  ApiAuth auth_;
  core::PrincipalCounter waiters_per_principal_;  // waiting acquires, with authentication only
  // Every waiting request (an acquire with wait_ms, an observer of an election) holds a
  // connection: a principal (without authentication, a client address) may hold at most a
  // quarter of server.max.connections that way, so one reader's long polls cannot take every
  // slot (C6 "Connections"). Keyed by the principal's name, else the client address.
  core::PrincipalCounter waiting_share_;
  // Who waits: the waiting_share_ key and the principal ("" without authentication).
  struct Waiter {
    std::string key;
    std::string principal;
  };
  Waiter waiter_of(const RequestContext& context) const;
  // Counts a waiting request against its share of the connections and, with authentication,
  // against its principal's waiters; throws ResourceExhaustedError naming the limit it would
  // pass, counting nothing. `done`, wrapped, uncounts it when the request is answered.
  template <class Done>
  Done count_waiter(const Waiter& waiter, Done done);
};

}  // namespace dlock::server
