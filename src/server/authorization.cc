#include "server/authorization.h"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <cstdio>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "auth/admin_token.h"
#include "auth/tokens_file.h"
#include "core/lock_service.h"
#include "dlock/errors.h"
#include "server/error_mapping.h"
#include "server/input_checks.h"
#include "server/json_util.h"
#include "server/request_context.h"
#include "server/telemetry.h"
#include "util/store_key.h"

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

// --- a reload takes away what the new table no longer allows (C6) ---------------------------

// At most this many grants are read for each namespace pattern a changed principal could lock
// in; a reload that finds more says so (scan_truncated) and handles these.
constexpr std::size_t kReloadScanLimit = 10000;

// The error a waiter of the session stored as `owner` is answered with under `table` when it may
// not wait for `key` (null when it may): its principal is gone (401) or may no longer lock in the
// key's namespace (403). A session without a principal has no waiters once auth is on.
std::exception_ptr waiter_refusal(const auth::TokenTable& table, std::string_view owner,
                                  std::string_view key) {
  const auto name = std::string(principal_of_owner(owner));
  if (name.empty()) return nullptr;
  const auto* principal = table.find_by_name(name);
  if (principal == nullptr) {
    return std::make_exception_ptr(UnauthenticatedError(
        "principal " + name + " was removed from the tokens file while this request waited"));
  }
  const auto parts = store_key::split(key);
  const auto ns = parts ? parts->ns : std::string_view();
  if (principal->allows(auth::Role::kLock, ns)) return nullptr;
  return std::make_exception_ptr(PermissionDeniedError(
      "principal " + name + " may no longer lock in namespace " + std::string(ns) +
      " (the tokens file was reloaded while this request waited)"));
}

// The list() prefix of every store key in the namespaces `pattern` covers.
std::string prefix_of(const std::string& pattern) {
  if (pattern.ends_with('*')) return pattern.substr(0, pattern.size() - 1);
  return store_key::join(pattern, "");
}

// One reload's withdrawal, shared by the service callbacks it starts; logs when the last ends.
class Withdrawal : public std::enable_shared_from_this<Withdrawal> {
 public:
  Withdrawal(core::LockService& service, std::shared_ptr<const auth::TokenTable> after,
             std::size_t principals, std::string file)
      : service_(service),
        after_(std::move(after)),
        principals_(principals),
        file_(std::move(file)) {}

  // Who lost what between `before` and after_: principals gone, principals whose permissions
  // changed, and where their grants may be.
  void compare(const auth::TokenTable& before) {
    for (const auto& old : before.principals()) {
      const auto* now = after_->find_by_name(old.name);
      if (now != nullptr && now->permissions == old.permissions) continue;
      (now == nullptr ? removed_ : narrowed_).insert(old.name);
      for (const auto& permission : old.permissions) {
        if (permission.role != auth::Role::kRead) prefixes_.insert(prefix_of(permission.pattern));
      }
    }
    // A prefix another one starts with is scanned by that one (in order, it comes right after).
    for (auto it = prefixes_.begin(); it != prefixes_.end();) {
      const auto next = std::next(it);
      if (next != prefixes_.end() && next->starts_with(*it)) {
        prefixes_.erase(next);
      } else {
        ++it;
      }
    }
  }

  // Waiters first, so that they are answered 401/403, not 404 by their session's close.
  void start(std::shared_ptr<auth::Authenticator> authenticator) {
    begin();
    auto check = [authenticator = std::move(authenticator)](std::string_view owner,
                                                            std::string_view key) {
      return waiter_refusal(*authenticator->table(), owner, key);
    };
    service_.recheck_waiters(std::move(check), [self = shared_from_this()](auto outcome) {
      if (outcome.error) {
        self->failed();
      } else {
        std::lock_guard lock(self->mutex_);
        self->waiters_answered_ += outcome.value->size();
      }
      self->take_away();
      self->end();
    });
  }

 private:
  void take_away() {
    if (removed_.empty() && narrowed_.empty()) return;
    for (const auto& session_id : service_.known_sessions([this](std::string_view owner) {
           return removed_.contains(std::string(principal_of_owner(owner)));
         })) {
      close(session_id);
    }
    // Grants of sessions this server has not seen (opened through another dlockd, or before it
    // started), and grants in namespaces a principal lost.
    for (const auto& prefix : prefixes_) {
      begin();
      service_.list(prefix, {}, kReloadScanLimit, [self = shared_from_this()](auto outcome) {
        if (outcome.error) {
          self->failed();
        } else {
          self->sweep(*outcome.value);
        }
        self->end();
      });
    }
  }

  void sweep(const std::vector<LockInfo>& grants) {
    if (grants.size() >= kReloadScanLimit) {
      std::lock_guard lock(mutex_);
      truncated_ = true;
    }
    for (const auto& grant : grants) {
      const auto name = std::string(principal_of_owner(grant.owner_id));
      if (removed_.contains(name)) {
        close(grant.session_id);
        continue;
      }
      const auto* principal = narrowed_.contains(name) ? after_->find_by_name(name) : nullptr;
      const auto parts = store_key::split(grant.key);
      if (principal == nullptr || !parts || principal->allows(auth::Role::kLock, parts->ns)) {
        continue;
      }
      begin();
      service_.release(grant.key, grant.session_id, grant.fencing_token,
                       [self = shared_from_this(), grant](auto outcome) {
                         // Already gone (released, expired) is as good.
                         if (!outcome.error) {
                           self->audit_release(grant);
                           std::lock_guard lock(self->mutex_);
                           ++self->locks_released_;
                         }
                         self->end();
                       });
    }
  }

  void close(const std::string& session_id) {
    {
      std::lock_guard lock(mutex_);
      if (!closing_.insert(session_id).second) return;
    }
    begin();
    service_.close_session(session_id, [self = shared_from_this()](auto outcome) {
      // A session that already ended is not an error here: there was nothing left to close.
      if (!outcome.error) {
        for (const auto& grant : *outcome.value) self->audit_release(grant);
        std::lock_guard lock(self->mutex_);
        ++self->sessions_closed_;
        self->locks_released_ += outcome.value->size();
      }
      self->end();
    });
  }

  // Audited as a release by its principal, with the reason; no remote address (C6).
  static void audit_release(const LockInfo& grant) {
    server::audit_release(grant, principal_of_owner(grant.owner_id), "", "tokens_reload");
  }

  void failed() {
    std::lock_guard lock(mutex_);
    ++failures_;
  }
  void begin() {
    std::lock_guard lock(mutex_);
    ++pending_;
  }
  void end() {
    {
      std::lock_guard lock(mutex_);
      if (--pending_ > 0) return;
    }
    boost::json::array removed(removed_.begin(), removed_.end());
    boost::json::array narrowed(narrowed_.begin(), narrowed_.end());
    boost::json::object fields{{"result", "ok"},
                               {"file", file_},
                               {"principals", static_cast<std::uint64_t>(principals_)},
                               {"removed", std::move(removed)},
                               {"narrowed", std::move(narrowed)},
                               {"waiters_answered", waiters_answered_},
                               {"sessions_closed", sessions_closed_},
                               {"locks_released", locks_released_}};
    if (!removed_.empty()) {
      fields["kept"] =
          "sessions of removed principals unknown to this dlockd at the reload that hold no lock "
          "(unusable; they end at their TTL), and their election observers (answered at their "
          "wait_ms)";
    }
    if (truncated_) fields["scan_truncated"] = true;
    if (failures_ > 0) fields["failures"] = failures_;
    log_event(failures_ > 0 ? "warn" : "info", "tokens_reload", std::move(fields));
  }

  core::LockService& service_;
  const std::shared_ptr<const auth::TokenTable> after_;
  const std::size_t principals_;
  const std::string file_;
  std::set<std::string> removed_;   // set by compare(), then read only
  std::set<std::string> narrowed_;  // likewise
  std::set<std::string> prefixes_;  // likewise

  std::mutex mutex_;  // guards what follows
  std::size_t pending_ = 0;
  std::set<std::string> closing_;
  std::uint64_t waiters_answered_ = 0;
  std::uint64_t sessions_closed_ = 0;
  std::uint64_t locks_released_ = 0;
  std::uint64_t failures_ = 0;
  bool truncated_ = false;
};

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
      std::make_shared<auth::Authenticator>(auth::load_tokens_file(config.auth_tokens_file),
                                            std::move(built_in), std::move(options), this);
}

void ApiAuth::reload(core::LockService& service) {
  if (!authenticator_) {
    log_event("info", "tokens_reload", {{"result", "skipped"}, {"reason", "no auth.tokens.file"}});
    return;
  }
  const auto before = authenticator_->table();
  std::size_t principals = 0;
  try {
    principals = authenticator_->reload(config_.auth_tokens_file);
  } catch (const std::exception& error) {
    telemetry_.on_tokens_reload(false);
    log_event("error", "tokens_reload",
              {{"result", "error"}, {"message", error.what()}, {"kept", "the previous table"}});
    return;
  }
  telemetry_.on_tokens_reload(true);
  auto withdrawal = std::make_shared<Withdrawal>(service, authenticator_->table(), principals,
                                                 config_.auth_tokens_file);
  withdrawal->compare(*before);
  withdrawal->start(authenticator_);
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
           std::string_view remote, std::string_view reason, boost::json::object extra) {
  if (!log_enabled("info")) return;
  boost::json::object fields{
      {"action", action}, {"principal", principal}, {"ns", ns}, {"key", key}, {"remote", remote}};
  for (auto& field : extra) fields[field.key()] = std::move(field.value());
  if (fencing_token) fields["fencing_token"] = *fencing_token;
  if (!reason.empty()) fields["reason"] = reason;
  log_event("info", "audit", std::move(fields));
}

boost::json::object grant_fields(const LockHandle& grant) {
  return {{"owner", logged_owner(grant.owner_id)},
          {"session", session_fingerprint(grant.session_id)},
          {"expires_at", format_time(grant.server_expiry)}};
}

boost::json::object holder_fields(const LockInfo& grant) {
  return {{"owner", logged_owner(grant.owner_id)},
          {"session", session_fingerprint(grant.session_id)}};
}

boost::json::object revoke_fields(const LockOutcome& outcome) {
  boost::json::object fields{{"revoked", outcome.revoked}};
  if (outcome.owner_id) fields["owner"] = logged_owner(*outcome.owner_id);
  return fields;
}

void audit_release(const LockInfo& grant, std::string_view principal, std::string_view remote,
                   std::string_view reason) {
  if (!log_enabled("info")) return;
  const auto parts = store_key::split(grant.key);
  audit("release", principal, parts ? parts->ns : "",
        parts ? parts->key : std::string_view(grant.key), grant.fencing_token, remote, reason,
        holder_fields(grant));
}

}  // namespace dlock::server
