#pragma once

// What Client, Session and Lock share: the options, the transport, the retry loop and one
// function per C3 route. Session and Lock call these with their own deadlines and stop tokens
// so their background threads can be stopped mid-backoff.

#include <atomic>
#include <boost/json/object.hpp>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "client/retry.h"
#include "client/transport.h"
#include "dlock/client.h"

namespace dlock::client::detail {

// The bearer token a client sends (contract C6): options.token, else the first line of
// options.token_file, else DLOCK_TOKEN, else the first line of the file DLOCK_TOKEN_FILE names;
// "" when none is set. Throws InvalidArgumentError naming the source when a file cannot be read,
// is empty, or a token is not a bearer token (the message never shows the token).
std::string resolve_token(const ClientOptions& options);

struct CallContext {
  // The call, retries included, gives up at this steady time.
  SteadyClock::time_point deadline;
  // Stops the wait between retries (a background thread shutting down).
  std::stop_token stop;
  // Added to request_timeout for each attempt: the server may legitimately hold a waiting
  // acquire this long before it answers.
  std::chrono::milliseconds attempt_slack{0};
  // When set, called before every attempt to refresh the request (a waiting acquire asks only
  // for what is left of its wait); returns that attempt's slack, replacing attempt_slack.
  std::function<std::chrono::milliseconds(HttpRequest& request)> before_attempt;
  // Whether the request may be sent again after a connection lost once it was written (an
  // unknown outcome), on this server or another (docs/client.md, "Failover"). False for the
  // calls whose repetition could do something the first did not: opening a session (a second
  // session) and revoke (it could remove a grant made after the first revoke).
  bool repeat_safe = true;
};

// One answered exchange and when its request was sent (the basis of client deadlines).
struct Exchange {
  HttpResponse response;
  SteadyClock::time_point sent_at;
};

// A granted acquire: the handle and the TTL the server granted.
struct Grant {
  LockHandle handle;
  std::chrono::milliseconds ttl{0};
  // For a permit: the semaphore's number of permits; else 0.
  std::uint32_t limit = 0;
  // For a leadership: the value it leads with; else empty.
  std::string value;
};

// What an acquire asks for (ADR-0020): an exclusive or shared hold of a lock, or one permit of
// a semaphore of `limit` permits.
struct HoldSpec {
  HoldMode mode = HoldMode::kExclusive;
  std::uint32_t limit = 0;  // kPermit only
  // Set: a campaign for the election of the name with this value (C3 "Elections"), an
  // exclusive session-bound grant through /v1/elections/{name}/campaign.
  std::optional<std::string> leader_value;
};

struct ClientCore {
  ClientCore(ClientOptions options, TransportPtr transport);

  // Resolved: servers (from servers, server_url, DLOCK_SERVER or the default), token and
  // admin_token (from their files and the environment).
  ClientOptions options;
  // options.clock_drift, DLOCK_CLOCK_DRIFT or kDefaultClockDrift, validated.
  double clock_drift = kDefaultClockDrift;
  // One per server, in options.servers order (an injected transport: that one only).
  std::vector<TransportPtr> transports;
  // The server calls go to; moves on (shared by every thread) when it fails (Failover).
  std::atomic<std::size_t> current_server{0};
  BackoffPolicy backoff;
  RetryClock clock = RetryClock::real();

  void log(std::string_view message) const;
  // A deadline `budget` from now unless the caller gave one.
  SteadyClock::time_point deadline_from(const Deadline& deadline,
                                        std::chrono::milliseconds extra = {}) const;
  CallContext context(const Deadline& deadline) const;

  // The TTL a lease is trusted for: the smaller of what was asked (0: the server's default,
  // not known here) and what the server answered. A server answering more than was asked never
  // extends the client's trust (docs/adr/0012).
  static std::chrono::milliseconds trusted_ttl(std::chrono::milliseconds asked,
                                               std::chrono::milliseconds answered);
  // Until when a lease of `ttl` whose request was sent at `sent_at` is believed: sent_at + ttl
  // less ceil(ttl * clock_drift), for a server clock that runs faster than ours.
  SteadyClock::time_point lease_deadline(SteadyClock::time_point sent_at,
                                         std::chrono::milliseconds ttl) const;

  // Sends `request` with the bearer token, retrying transient failures (transport errors,
  // 429/502/503/504) with backoff until context.deadline; returns the first other response,
  // whatever its status. A server that cannot be reached, answers 502/503/504 or loses the
  // connection hands the call to the next server at once (until each was tried; then backoff).
  // A lost connection after the request was written ends an unsafe call (!repeat_safe) with
  // UnknownOutcomeError at once. Once retries are exhausted throws UnavailableError,
  // NotLeaderError or UnknownOutcomeError; a failed TLS handshake, TlsError.
  Exchange call(const HttpRequest& request, const CallContext& context, const std::string& what);

  // The C3 routes. Each throws the mapped error for any unexpected status.
  // `lock_delay` is sent as "lock_delay_ms" only when > 0 (a server without lock-delay sees
  // the request it always saw); negative: InvalidArgumentError before anything is sent.
  SessionInfo open_session(const std::string& owner, std::chrono::milliseconds ttl,
                           std::chrono::milliseconds lock_delay, const CallContext& context);
  // Also returns when the successful keepalive was sent: the session's new client deadline is
  // that time + the granted TTL.
  std::pair<SessionInfo, SteadyClock::time_point> keepalive(const std::string& session_id,
                                                            const CallContext& context);
  void close_session(const std::string& session_id, const CallContext& context);
  // A permit goes to /v1/semaphores, anything else to /v1/locks (with "mode" when shared).
  std::optional<Grant> acquire(const std::string& key, const std::string& session_id,
                               LockLease lease, std::chrono::milliseconds wait,
                               const std::string& ns, const CallContext& context,
                               HoldSpec hold = {});
  // `mode` picks the route: kPermit /v1/semaphores/{key}, else /v1/locks/{key}.
  ExtendResult extend(const std::string& key, const std::string& session_id, FencingToken token,
                      std::chrono::milliseconds ttl, const std::string& ns,
                      const CallContext& context, HoldMode mode = HoldMode::kExclusive);
  void release(const std::string& key, const std::string& session_id, FencingToken token,
               const std::string& ns, const CallContext& context,
               HoldMode mode = HoldMode::kExclusive);
  std::optional<LockInfo> get(const std::string& key, const std::string& ns,
                              const CallContext& context);
  // Every live holder (the answer's "holders"; the top-level grant alone from a server that
  // sends none); empty when the key is free.
  std::vector<LockInfo> holders(const std::string& key, const std::string& ns,
                                const CallContext& context);
  SemaphoreInfo semaphore(const std::string& name, const std::string& ns,
                          const CallContext& context);
  std::vector<LockInfo> list(const std::string& prefix, std::size_t limit, const std::string& ns,
                             const CallContext& context);
  SessionPage list_sessions(const std::string& owner, const std::string& principal,
                            std::size_t limit, const std::string& after,
                            const CallContext& context);
  SessionDetail session_detail(const std::string& session_id, const CallContext& context);
  KeyState state(const std::string& key, const std::string& ns, const CallContext& context);
  LockPage list_page(const std::string& prefix, std::size_t limit, const std::string& after,
                     const std::string& ns, const CallContext& context,
                     bool every_namespace = false);
  LockOutcome revoke(const std::string& key, const std::string& ns, const CallContext& context);

  // Elections (C3 "Elections"; elections.cc). A campaign is acquire() with
  // HoldSpec::leader_value. proclaim answers the server's expires_at; both throw LockLostError
  // when (session, token) no longer leads.
  WallClock::time_point proclaim(const std::string& name, const std::string& session_id,
                                 FencingToken token, const std::string& value,
                                 const std::string& ns, const CallContext& context);
  void resign(const std::string& name, const std::string& session_id, FencingToken token,
              const std::string& ns, const CallContext& context);
  // GET /v1/elections/{name}: empty on 404 no_leader. `after_token`, `after_value` and `wait`
  // (when > 0) make it the observe long poll; every attempt may then take `wait` beyond
  // request_timeout (context.attempt_slack).
  std::optional<LeaderInfo> leader(const std::string& name, const std::string& ns,
                                   std::optional<FencingToken> after_token,
                                   const std::optional<std::string>& after_value,
                                   std::chrono::milliseconds wait, const CallContext& context);

 private:
  std::uint64_t random_bits();
  // GET /v1/locks/{key}: the answer object, or empty when the key is free.
  std::optional<boost::json::object> read_lock(const std::string& key, const std::string& ns,
                                               const CallContext& context);

  std::mutex random_mutex_;
  std::mt19937_64 random_{std::random_device{}()};
};

}  // namespace dlock::client::detail
