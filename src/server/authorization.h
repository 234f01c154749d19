#pragma once

// Who may do what on the /v1 routes (contract C6, ADR-0016). With a tokens file
// (auth.tokens.file) every /v1 request is authenticated by its bearer token (auth::Authenticator)
// and each route checks the principal's role on the namespace; without one, nothing changes:
// no principal, no check (the revoke route keeps its admin.token check in api.cc).
//
// Ownership of sessions: with authentication on, the backend records a session's owner as
// "<principal> <owner>" -- a principal has no spaces, so the first space splits the two
// unambiguously. Any dlockd sharing the backend reads the same answer (ADR-0016); the API
// shows clients the owner part only.

#include <boost/json/object.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "auth/authenticator.h"
#include "auth/permissions.h"
#include "server/config.h"
#include "server/http_server.h"

namespace dlock::core {
class LockService;
}  // namespace dlock::core

namespace dlock::server {

class ApiAuth;
class Telemetry;
struct RequestContext;

// The `reason` of a request for another principal's session (C6): answered as a missing session
// (404, not revealing that it exists), but audited ("denied") and counted in
// dlock_auth_denied_total like the other denials.
inline constexpr const char* kSessionOwnerReason = "session_owner";

// Who asked for another principal's session, copied from the request: the stored-owner check
// runs in a store callback, after the request's context is gone. Calling it audits and counts.
struct SessionOwnerRefusal {
  ApiAuth* auth = nullptr;
  std::string principal;
  std::string key;  // on a lock, semaphore or election route; never the session ID
  std::string remote;
  void operator()() const noexcept;
};

class ApiAuth final : public auth::AuthObserver {
 public:
  // Loads the tokens file (when configured); throws auth::TokensFileError or
  // InvalidArgumentError (a clash with the admin principal) -- configuration errors.
  ApiAuth(const ServerConfig& config, Telemetry& telemetry);

  bool enabled() const { return authenticator_ != nullptr; }

  // SIGHUP: reloads the tokens file; on an error keeps the old table and logs why. Then takes
  // away, through `service`, what the new table no longer allows (C6 "Reloading the tokens
  // file"): the waiters of a principal no longer in the table are answered 401, those no longer
  // allowed to lock in their key's namespace 403 (and so is every such waiter from now on); a
  // removed principal's sessions are closed (their locks released, waiters woken); a grant in a
  // namespace where its principal may no longer lock is released. Sessions belong to principals,
  // not tokens: a principal whose token changed keeps them. Logs one tokens_reload line saying
  // what it did, once done.
  void reload(core::LockService& service);

  // The principal of `context`'s request, or the answer that refuses it (401 with
  // WWW-Authenticate: Bearer, or 429 with Retry-After). Null principal and no answer when
  // authentication is off.
  struct Identity {
    std::shared_ptr<const auth::Principal> principal;
    std::optional<Response> refusal;
  };
  // Without an Authorization header, a client certificate verified under mTLS whose CN names a
  // certificate-only principal of the tokens file (a "-" hash line) authenticates as that
  // principal; never as `admin` nor as a principal that has a bearer token (C6). A bearer
  // token, when sent, always decides.
  Identity authenticate(const Request& request, const std::string& remote_address,
                        const std::optional<std::string>& client_cert_cn = std::nullopt);

  // Without a tokens file, the revoke route's admin.token check (C3, C6): nullopt when the
  // request carries `Bearer <admin.token>`; otherwise 401 unauthorized (no header), 403
  // forbidden (another token), or, once the address has failed a burst of times, 429 with
  // Retry-After -- the same per-address throttle as bearer tokens. The right token is never
  // throttled. Denials are counted and logged like the Authenticator's.
  std::optional<Response> check_admin_token(const Request& request,
                                            const std::string& remote_address);

  // A 403 permission_denied unless the caller has `role` on `ns` (nullopt: allowed). Always
  // allowed when authentication is off.
  std::optional<Response> authorize(const RequestContext& context, auth::Role role,
                                    std::string_view ns);
  // Opening a session: `lock` on some namespace.
  std::optional<Response> authorize_session(const RequestContext& context);

  // The SessionOwnerRefusal of `context`'s request; refuse_session_owner() reports it.
  SessionOwnerRefusal session_owner_refusal(const RequestContext& context);
  void refuse_session_owner(const SessionOwnerRefusal& refusal) noexcept;

  void denied(auth::AuthOutcome reason) noexcept override;
  void log_denied(auth::AuthOutcome reason, std::string_view remote_address,
                  std::uint64_t suppressed) noexcept override;

 private:
  // 403 permission_denied, counted and audited with the namespace and key asked for.
  Response refuse(const RequestContext& context, std::string_view ns, std::string_view key,
                  const std::string& message);
  void report_admin_failure(auth::AuthOutcome reason, const std::string& remote_address);

  const ServerConfig& config_;
  Telemetry& telemetry_;
  // Shared with the service's waiter check (reload), which may outlive a reload's call.
  std::shared_ptr<auth::Authenticator> authenticator_;
  // Failed admin.token checks without a tokens file (with one, the Authenticator's throttle).
  auth::FailureThrottle admin_throttle_;
};

// The owner the backend records for a session opened by `principal`: "<principal> <owner>"; with
// no authentication (null) kUnownedMark + owner. A session opened without authentication has no
// principal, and keeps none once a tokens file is in use (C6): its owner string cannot name one,
// since the mark is a control character no checked owner or principal name contains.
inline constexpr std::string_view kUnownedMark = "\x1f";
std::string stored_owner(const auth::Principal* principal, const std::string& owner);
// The principal part of a stored owner ("" when it has none).
std::string_view principal_of_owner(std::string_view stored) noexcept;
// What a client sees as the owner: the stored owner without its principal part or mark.
std::string shown_owner(std::string_view stored, bool auth_enabled);
// The stored owner as log lines show it: without the mark of an unowned session.
std::string_view logged_owner(std::string_view stored) noexcept;
// Whether the caller may see the session ID of a lock whose session's stored owner is
// `stored`: its own session, or `admin` on the namespace (C6). Always without authentication.
bool may_see_session(const auth::Principal* caller, std::string_view stored, std::string_view ns);

// The audit event of contract C6 (C4 format): principal, namespace, key, fencing token, remote
// address -- never a token, never a raw session ID. `extra`: the event's own fields (a grant's
// owner, session fingerprint and expiry), so that each event is one line (C4).
void audit(std::string_view action, std::string_view principal, std::string_view ns,
           std::string_view key, std::optional<std::uint64_t> fencing_token,
           std::string_view remote, std::string_view reason = {}, boost::json::object extra = {});

// The fields a grant's, a release's, an expiry's and a revoke's audit line add to audit's: the
// holder's owner (logged_owner) and session fingerprint, and the grant's expiry, if known.
boost::json::object grant_fields(const LockHandle& grant);
boost::json::object holder_fields(const LockInfo& grant);
boost::json::object revoke_fields(const LockOutcome& outcome);

// The audit line of a grant released with its session (DELETE /v1/sessions/{id}, a tokens file
// reload that removed its principal): one line per released lock.
void audit_release(const LockInfo& grant, std::string_view principal, std::string_view remote,
                   std::string_view reason = {});

}  // namespace dlock::server
