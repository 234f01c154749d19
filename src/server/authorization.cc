#include "server/authorization.h"

#include <boost/json/object.hpp>
#include <cstdio>
#include <limits>
#include <utility>
#include <vector>

#include "auth/admin_token.h"
#include "auth/tokens_file.h"
#include "dlock/errors.h"
#include "server/api.h"
#include "server/error_mapping.h"
#include "server/input_checks.h"
#include "server/telemetry.h"

namespace dlock::server {
namespace {

namespace http = boost::beast::http;

// Every route that calls ApiAuth::authorize() names its key (lock, semaphore or election) in
// its one path parameter; /v1/locks (list) and /v1/sessions have none there.
std::string_view key_of(const RequestContext& context) {
  return context.params.empty() ? std::string_view() : std::string_view(context.params.front());
}

Response unauthenticated(const std::string& message) {
  auto response = error_response(401, to_string(ErrorCode::kUnauthenticated), message);
  response.set(http::field::www_authenticate, "Bearer");
  return response;
}

// 429 for failures from an address whose throttle bucket is empty (C6).
Response throttled(std::chrono::milliseconds retry_after) {
  auto response = error_response(429, to_string(ErrorCode::kResourceExhausted),
                                 "too many failed authentications from this address");
  const auto seconds = (retry_after.count() + 999) / 1000;
  response.set(http::field::retry_after, std::to_string(seconds < 1 ? 1 : seconds));
  return response;
}

}  // namespace

ApiAuth::ApiAuth(const ServerConfig& config, Telemetry& telemetry)
    : config_(config), telemetry_(telemetry) {
  if (config.admin_token_on_command_line) {
    // C6: kept for tests and one-off runs; every local user can read a command line.
    constexpr const char* kWhy =
        "--admin-token puts the admin token on the command line, where every local user can read "
        "it (ps, /proc); use admin.token.file (--admin-token-file, mode 0600) or DLOCK_ADMIN_TOKEN";
    std::fprintf(stderr, "dlockd: warning: %s\n", kWhy);
    log_event("warn", "admin_token_on_command_line", {{"message", kWhy}});
  }
  if (!config.auth_enabled()) return;
  std::vector<auth::Principal> built_in;
  if (!config.admin_token.empty()) built_in.push_back(auth::admin_principal(config.admin_token));
  // Every denial is reported to log_denied(): its audit line is bounded per client address by
  // the log's LogLimiter (C4), so one client's flood cannot take another's lines, and a line over
  // the bound is counted for its client, never dropped silently. (A server-wide window here
  // would drop every client's lines once one client spent it.)
  auth::AuthenticatorOptions options;
  options.log_burst = std::numeric_limits<std::size_t>::max();
  authenticator_ =
      std::make_unique<auth::Authenticator>(auth::load_tokens_file(config.auth_tokens_file),
                                            std::move(built_in), std::move(options), this);
}

void ApiAuth::reload() {
  if (!authenticator_) {
    log_event("info", "tokens_reload", {{"result", "skipped"}, {"reason", "no auth.tokens.file"}});
    return;
  }
  try {
    const auto principals = authenticator_->reload(config_.auth_tokens_file);
    telemetry_.on_tokens_reload(true);
    log_event("info", "tokens_reload",
              {{"result", "ok"},
               {"file", config_.auth_tokens_file},
               {"principals", static_cast<std::uint64_t>(principals)}});
  } catch (const std::exception& error) {
    telemetry_.on_tokens_reload(false);
    log_event("error", "tokens_reload",
              {{"result", "error"}, {"message", error.what()}, {"kept", "the previous table"}});
  }
}

ApiAuth::Identity ApiAuth::authenticate(const Request& request, const std::string& remote_address,
                                        const std::optional<std::string>& client_cert_cn) {
  if (!authenticator_) return {};
  if (client_cert_cn && request.find(http::field::authorization) == request.end()) {
    if (auto principal = authenticator_->certificate_principal(*client_cert_cn)) {
      return {std::move(principal), std::nullopt};
    }
  }
  const auto result =
      authenticator_->authenticate(request[http::field::authorization], remote_address);
  if (result) return {result.principal, std::nullopt};
  if (result.outcome == auth::AuthOutcome::kThrottled) {
    return {nullptr, throttled(result.retry_after)};
  }
  const char* why = result.outcome == auth::AuthOutcome::kMissing
                        ? "Authorization: Bearer <token> required"
                        : "bearer token not accepted";
  return {nullptr, unauthenticated(why)};
}

std::optional<Response> ApiAuth::check_admin_token(const Request& request,
                                                   const std::string& remote_address) {
  const auto authorization = request[http::field::authorization];
  if (authorization.empty()) {
    report_admin_failure(auth::AuthOutcome::kMissing, remote_address);
    return error_response(401, "unauthorized", "admin token required");
  }
  // A valid token is accepted whatever the throttle holds for the address (C6).
  if (constant_time_equal(authorization, "Bearer " + config_.admin_token)) return std::nullopt;
  if (const auto wait = admin_throttle_.fail(remote_address); wait.count() > 0) {
    report_admin_failure(auth::AuthOutcome::kThrottled, remote_address);
    return throttled(wait);
  }
  report_admin_failure(auth::AuthOutcome::kUnknown, remote_address);
  return error_response(403, "forbidden", "admin token rejected");
}

void ApiAuth::report_admin_failure(auth::AuthOutcome reason, const std::string& remote_address) {
  denied(reason);
  log_denied(reason, remote_address, 0);
}

std::optional<Response> ApiAuth::authorize(const RequestContext& context, auth::Role role,
                                           std::string_view ns) {
  if (!authenticator_) return std::nullopt;
  if (!context.principal) return unauthenticated("Authorization: Bearer <token> required");
  if (context.principal->allows(role, ns)) return std::nullopt;
  return refuse(context, ns, key_of(context),
                "principal " + context.principal->name + " may not " + auth::to_string(role) +
                    " in namespace " + std::string(ns));
}

std::optional<Response> ApiAuth::authorize_session(const RequestContext& context) {
  if (!authenticator_) return std::nullopt;
  if (!context.principal) return unauthenticated("Authorization: Bearer <token> required");
  if (context.principal->has_role_somewhere(auth::Role::kLock)) return std::nullopt;
  return refuse(context, "", "",
                "principal " + context.principal->name +
                    " may not open sessions (needs lock on some namespace)");
}

Response ApiAuth::refuse(const RequestContext& context, std::string_view ns, std::string_view key,
                         const std::string& message) {
  const char* reason = to_string(ErrorCode::kPermissionDenied);
  telemetry_.on_auth_denied(reason);
  // Bounded per client address by the log's LogLimiter (C4), like every audit line.
  audit("denied", context.principal->name, ns, key, std::nullopt, context.remote_address, reason);
  return error_response(403, reason, message);
}

SessionOwnerRefusal ApiAuth::session_owner_refusal(const RequestContext& context) {
  SessionOwnerRefusal refusal;
  refusal.auth = this;
  refusal.principal = context.principal ? context.principal->name : "";
  // The session routes' one path parameter is the session ID, never logged (C6).
  const auto path = context.url.encoded_path();
  if (!std::string_view(path.data(), path.size()).starts_with("/v1/sessions/")) {
    refusal.key = std::string(key_of(context));
  }
  refusal.remote = context.remote_address;
  return refusal;
}

void ApiAuth::refuse_session_owner(const SessionOwnerRefusal& refusal) noexcept {
  try {
    telemetry_.on_auth_denied(kSessionOwnerReason);
    audit("denied", refusal.principal, "", refusal.key, std::nullopt, refusal.remote,
          kSessionOwnerReason);
  } catch (...) {
  }
}

void SessionOwnerRefusal::operator()() const noexcept {
  if (auth != nullptr) auth->refuse_session_owner(*this);
}

void ApiAuth::denied(auth::AuthOutcome reason) noexcept {
  telemetry_.on_auth_denied(auth::to_string(reason));
}

void ApiAuth::log_denied(auth::AuthOutcome reason, std::string_view remote_address,
                         std::uint64_t suppressed) noexcept {
  try {
    audit("denied", "", "", "", std::nullopt, remote_address, auth::to_string(reason));
    if (suppressed > 0) log_event("info", "denials_suppressed", {{"count", suppressed}});
  } catch (...) {
  }
}

std::string stored_owner(const auth::Principal* principal, const std::string& owner) {
  return principal == nullptr ? std::string(kUnownedMark) + owner : principal->name + " " + owner;
}

std::string_view principal_of_owner(std::string_view stored) noexcept {
  if (stored.starts_with(kUnownedMark)) return {};
  const auto space = stored.find(' ');
  return space == std::string_view::npos ? std::string_view() : stored.substr(0, space);
}

std::string shown_owner(std::string_view stored, bool auth_enabled) {
  if (stored.starts_with(kUnownedMark)) return std::string(stored.substr(kUnownedMark.size()));
  const auto space = stored.find(' ');
  if (!auth_enabled || space == std::string_view::npos) return std::string(stored);
  return std::string(stored.substr(space + 1));
}

std::string_view logged_owner(std::string_view stored) noexcept {
  return stored.starts_with(kUnownedMark) ? stored.substr(kUnownedMark.size()) : stored;
}

bool may_see_session(const auth::Principal* caller, std::string_view stored, std::string_view ns) {
  if (caller == nullptr) return true;
  return principal_of_owner(stored) == caller->name || caller->allows(auth::Role::kAdmin, ns);
}

void audit(std::string_view action, std::string_view principal, std::string_view ns,
           std::string_view key, std::optional<std::uint64_t> fencing_token,
           std::string_view remote, std::string_view reason) {
  if (!log_enabled("info")) return;
  boost::json::object fields{
      {"action", action}, {"principal", principal}, {"ns", ns}, {"key", key}, {"remote", remote}};
  if (fencing_token) fields["fencing_token"] = *fencing_token;
  if (!reason.empty()) fields["reason"] = reason;
  log_event("info", "audit", std::move(fields));
}

}  // namespace dlock::server
