#include "auth/authenticator.h"

#include <cctype>
#include <utility>

#include "auth/admin_token.h"
#include "auth/tokens_file.h"
#include "dlock/errors.h"

namespace dlock::auth {

const char* to_string(AuthOutcome outcome) noexcept {
  switch (outcome) {
    case AuthOutcome::kOk:
      return "ok";
    case AuthOutcome::kMissing:
      return "missing";
    case AuthOutcome::kMalformed:
      return "malformed";
    case AuthOutcome::kUnknown:
      return "unknown";
    case AuthOutcome::kThrottled:
      return "throttled";
  }
  return "unknown";
}

std::string_view bearer_token_of(std::string_view authorization) noexcept {
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size()) return {};
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return {};
  }
  std::string_view rest = authorization.substr(kScheme.size());
  if (rest.front() != ' ') return {};
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  while (!rest.empty() && rest.back() == ' ') rest.remove_suffix(1);
  // token68 = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
  std::size_t i = 0;
  while (i < rest.size() &&
         (std::isalnum(static_cast<unsigned char>(rest[i])) || rest[i] == '-' || rest[i] == '.' ||
          rest[i] == '_' || rest[i] == '~' || rest[i] == '+' || rest[i] == '/')) {
    ++i;
  }
  if (i == 0) return {};
  while (i < rest.size() && rest[i] == '=') ++i;
  return i == rest.size() ? rest : std::string_view{};
}

Authenticator::Authenticator(TokenTable table, std::vector<Principal> built_in,
                             AuthenticatorOptions options, AuthObserver* observer)
    : built_in_(std::move(built_in)),
      options_(std::move(options)),
      observer_(observer),
      throttle_(options_.throttle) {
  swap_in(with_built_ins(std::move(table)));
}

std::shared_ptr<const TokenTable> Authenticator::with_built_ins(TokenTable table) const {
  for (const auto& principal : built_in_) table = table.with(principal);
  return std::make_shared<const TokenTable>(std::move(table));
}

AuthResult Authenticator::authenticate(std::string_view authorization,
                                       std::string_view remote_address) {
  // The token first: a valid one is accepted whatever the throttle holds for this address
  // (C6); only failures are throttled.
  if (authorization.empty()) return deny(AuthOutcome::kMissing, remote_address);
  const std::string_view token = bearer_token_of(authorization);
  if (token.size() < kMinBearerTokenChars) return fail(AuthOutcome::kMalformed, remote_address);
  std::shared_ptr<const TokenTable> table = this->table();
  const Principal* principal = table->find_by_token(token);
  if (principal == nullptr) return fail(AuthOutcome::kUnknown, remote_address);
  AuthResult result;
  result.outcome = AuthOutcome::kOk;
  result.principal = std::shared_ptr<const Principal>(std::move(table), principal);
  return result;
}

AuthResult Authenticator::fail(AuthOutcome reason, std::string_view remote_address) {
  const auto wait = throttle_.fail(remote_address);
  if (wait.count() > 0) return deny(AuthOutcome::kThrottled, remote_address, wait);
  return deny(reason, remote_address);
}

AuthResult Authenticator::deny(AuthOutcome reason, std::string_view remote_address,
                               std::chrono::milliseconds retry_after) {
  if (observer_ != nullptr) {
    observer_->denied(reason);
    bool log = false;
    std::uint64_t suppressed = 0;
    {
      const auto now = options_.throttle.now();
      std::lock_guard lock(log_mutex_);
      if (now - log_window_start_ >= options_.log_interval) {
        log_window_start_ = now;
        logged_in_window_ = 0;
      }
      if (logged_in_window_ < options_.log_burst) {
        ++logged_in_window_;
        log = true;
        suppressed = std::exchange(suppressed_, 0);
      } else {
        ++suppressed_;
      }
    }
    if (log) observer_->log_denied(reason, remote_address, suppressed);
  }
  AuthResult result;
  result.outcome = reason;
  result.retry_after = retry_after;
  return result;
}

std::shared_ptr<const Principal> Authenticator::certificate_principal(std::string_view name) const {
  // Reserved: `admin` is admin.token's alone, with or without an admin token configured.
  if (name == kAdminPrincipalName) return nullptr;
  for (const auto& built_in : built_in_) {
    if (built_in.name == name) return nullptr;
  }
  std::shared_ptr<const TokenTable> table = this->table();
  const Principal* principal = table->find_by_name(name);
  if (principal == nullptr || principal->token_hash) return nullptr;  // `-` lines only
  return std::shared_ptr<const Principal>(std::move(table), principal);
}

std::size_t Authenticator::reload(const std::string& path) {
  TokenTable loaded = load_tokens_file(path);
  std::shared_ptr<const TokenTable> table;
  try {
    table = with_built_ins(std::move(loaded));
  } catch (const InvalidArgumentError& error) {
    throw TokensFileError(
        path, 0,
        std::string(error.what()) + " (dlockd defines it itself: `admin` comes from admin.token)");
  }
  const std::size_t size = table->size();
  swap_in(std::move(table));
  return size;
}

std::shared_ptr<const TokenTable> Authenticator::table() const {
  std::lock_guard lock(table_mutex_);
  return table_;
}

void Authenticator::swap_in(std::shared_ptr<const TokenTable> table) {
  std::lock_guard lock(table_mutex_);
  table_.swap(table);
  // The old table is released after the lock, outside it, when `table` goes out of scope.
}

void Authenticator::replace(TokenTable table) { swap_in(with_built_ins(std::move(table))); }

}  // namespace dlock::auth
