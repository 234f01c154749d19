#pragma once

// Bearer-token authentication for dlockd (contract C6, ADR-0016). Thread-safe: requests call
// authenticate() concurrently while SIGHUP calls reload(); each request sees one whole table,
// the old or the new one (a shared_ptr swapped under a mutex held only for the copy), never a
// mix. Not std::atomic<std::shared_ptr>: libstdc++ 12 releases its load-side lock with relaxed
// order, a data race ThreadSanitizer reports.
//
// Outcomes and what the API answers (the wiring lives in src/server):
//   kOk         the principal; the route then checks Principal::allows (403 permission_denied)
//   kMissing    no Authorization header                  -> 401 unauthenticated
//   kMalformed  not "Bearer <token68>", or a token shorter -> 401 unauthenticated
//               than kMinBearerTokenChars (never looked up)
//   kUnknown    no principal has this token               -> 401 unauthenticated
//   kThrottled  a malformed or unknown token from an      -> 429 too_many_requests with
//               address whose bucket is empty                 Retry-After (retry_after)
// Every 401 carries `WWW-Authenticate: Bearer`. The token is looked at first: a valid token is
// always kOk, whatever the throttle holds for the address. Only kMalformed and kUnknown
// (guesses) go to the address's FailureThrottle: they drain its bucket, or, while it is empty,
// become kThrottled. A missing header guesses nothing. Every failure is counted through
// AuthObserver.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "auth/failure_throttle.h"
#include "auth/token_table.h"

namespace dlock::auth {

// The shortest bearer token looked up (C6): `dlock token new` makes 47 characters, and a
// shorter one is no token dlockd could have issued, so it is refused as kMalformed before any
// hash is computed. The same floor as admin.token (kMinAdminTokenChars).
inline constexpr std::size_t kMinBearerTokenChars = 32;

enum class AuthOutcome { kOk, kMissing, kMalformed, kUnknown, kThrottled };

// "ok", "missing", "malformed", "unknown", "throttled": the `reason` label of
// dlock_auth_denied_total and of the audit event.
const char* to_string(AuthOutcome outcome) noexcept;

struct AuthResult {
  AuthOutcome outcome = AuthOutcome::kMissing;
  // Set when outcome is kOk; keeps the table it came from alive.
  std::shared_ptr<const Principal> principal;
  // For kThrottled: when the address may try again (Retry-After, rounded up to seconds).
  std::chrono::milliseconds retry_after{0};

  explicit operator bool() const noexcept { return outcome == AuthOutcome::kOk; }
};

// How the server sees denials without dlock_auth depending on metrics or logging libraries.
// Called on the authenticating thread, outside the Authenticator's locks; must not throw.
class AuthObserver {
 public:
  virtual ~AuthObserver() = default;
  // Every denial: feed dlock_auth_denied_total{reason}.
  virtual void denied(AuthOutcome reason) noexcept = 0;
  // At most AuthenticatorOptions::log_burst times per log_interval: write a log line.
  // `suppressed` denials were not reported since the previous call. Never given the token.
  virtual void log_denied(AuthOutcome reason, std::string_view remote_address,
                          std::uint64_t suppressed) noexcept = 0;
};

struct AuthenticatorOptions {
  ThrottleOptions throttle;
  std::size_t log_burst = 10;
  std::chrono::milliseconds log_interval{1000};
};

class Authenticator {
 public:
  // `table` is the initial tokens file; `built_in` principals (the `admin` principal of
  // admin.token) are added to it and to every reloaded table. `observer` may be null and
  // must outlive this object. Throws InvalidArgumentError when a built-in principal clashes.
  Authenticator(TokenTable table, std::vector<Principal> built_in,
                AuthenticatorOptions options = {}, AuthObserver* observer = nullptr);

  // `authorization` is the Authorization header's value ("" when absent); `remote_address`
  // keys the throttle (the peer address, without port).
  AuthResult authenticate(std::string_view authorization, std::string_view remote_address);

  // The principal a verified client certificate whose subject CN is `name` authenticates as
  // (mTLS, C6): a certificate-only principal of the tokens file (hash `-`). Null for any other
  // name: `admin` and every built-in principal (reserved for admin.token, even when the tokens
  // file has an `admin -` line), a principal that has a bearer token (it authenticates by its
  // token only), or no principal.
  std::shared_ptr<const Principal> certificate_principal(std::string_view name) const;

  // Loads `path` and swaps it in; returns how many principals the new table has (built-ins
  // included). When the file does not parse, or clashes with a built-in principal, throws
  // TokensFileError saying why and keeps serving the old table.
  std::size_t reload(const std::string& path);
  // Swaps in `table` (plus the built-ins); throws InvalidArgumentError and keeps the old one
  // on a clash.
  void replace(TokenTable table);

  std::shared_ptr<const TokenTable> table() const;

 private:
  std::shared_ptr<const TokenTable> with_built_ins(TokenTable table) const;
  // A malformed or unknown token: `reason`, or kThrottled while the address's bucket is empty.
  AuthResult fail(AuthOutcome reason, std::string_view remote_address);
  AuthResult deny(AuthOutcome reason, std::string_view remote_address,
                  std::chrono::milliseconds retry_after = {});

  const std::vector<Principal> built_in_;
  const AuthenticatorOptions options_;
  AuthObserver* const observer_;
  void swap_in(std::shared_ptr<const TokenTable> table);

  mutable std::mutex table_mutex_;
  std::shared_ptr<const TokenTable> table_;  // guarded by table_mutex_
  FailureThrottle throttle_;

  std::mutex log_mutex_;
  std::chrono::steady_clock::time_point log_window_start_{};
  std::size_t logged_in_window_ = 0;
  std::uint64_t suppressed_ = 0;
};

// Splits "Bearer <token>" (scheme case-insensitive, RFC 6750 token68 syntax); empty when the
// value is not that.
std::string_view bearer_token_of(std::string_view authorization) noexcept;

}  // namespace dlock::auth
