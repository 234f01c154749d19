#include "client/client_core.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iostream>

#include "client/beast_transport.h"
#include "client/error_mapping.h"
#include "client/url.h"

namespace dlock::client::detail {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

// The last failure seen by the retry loop, turned into an exception only when giving up so
// the message can say how long we tried.
struct LastFailure {
  std::optional<TransportError::Kind> transport_kind;
  std::string transport_message;
  std::optional<ApiError> api_error;
};

[[noreturn]] void give_up(const LastFailure& failure, const std::string& what, int attempts,
                          std::chrono::milliseconds spent) {
  const std::string suffix = " (gave up after " + std::to_string(attempts) + " attempt" +
                             (attempts == 1 ? "" : "s") + " in " + format_duration(spent) + ")";
  if (failure.api_error) {
    ApiError error = *failure.api_error;
    error.message += suffix;
    throw_api_error(error, what);
  }
  const std::string message = what + ": " + failure.transport_message + suffix;
  if (failure.transport_kind == TransportError::Kind::kMaybeSent) {
    throw UnknownOutcomeError(message);
  }
  throw UnavailableError(message);
}

// "0.01" or "1%" -> 0.01; anything else, or a value outside [0, 0.5), is refused.
double parse_clock_drift(std::string_view text) {
  const bool percent = !text.empty() && text.back() == '%';
  if (percent) text.remove_suffix(1);
  double value = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) value = -1;
  if (percent) value /= 100;
  return value;
}

double resolve_clock_drift(const std::optional<double>& option) {
  double value = kDefaultClockDrift;
  std::string source = "clock_drift";
  if (option) {
    value = *option;
  } else if (const char* env = std::getenv("DLOCK_CLOCK_DRIFT"); env != nullptr && *env != '\0') {
    value = parse_clock_drift(env);
    source = std::string("DLOCK_CLOCK_DRIFT=") + env;
  }
  // Not NaN, and short of a half: beyond that the "allowance" would be the lease itself.
  if (!(value >= 0 && value < 0.5)) {
    throw InvalidArgumentError("clock_drift", source +
                                                  ": the clock-rate allowance must be a "
                                                  "fraction in [0, 0.5), e.g. 0.01 or 1%");
  }
  return value;
}

}  // namespace

ClientCore::ClientCore(ClientOptions opts, TransportPtr injected)
    : options(std::move(opts)), transport(std::move(injected)) {
  if (options.server_url.empty()) {
    options.server_url = env_or("DLOCK_SERVER", std::string(kDefaultServerUrl));
  }
  if (options.admin_token.empty()) options.admin_token = env_or("DLOCK_ADMIN_TOKEN", "");
  clock_drift = resolve_clock_drift(options.clock_drift);
  // Parsed even with an injected transport so a bad URL is reported the same way in tests.
  ServerAddress address = parse_server_url(options.server_url);
  if (!transport) {
    transport = make_beast_transport(std::move(address), options.max_idle_connections);
  }
  backoff.initial = options.backoff_initial;
  backoff.max = options.backoff_max;
}

void ClientCore::log(std::string_view message) const {
  if (options.log) {
    options.log(message);
  } else {
    std::cerr << "dlock: " << message << '\n';
  }
}

SteadyClock::time_point ClientCore::deadline_from(const Deadline& deadline,
                                                  std::chrono::milliseconds extra) const {
  return deadline ? *deadline : clock.now() + options.retry_budget + extra;
}

CallContext ClientCore::context(const Deadline& deadline) const {
  return CallContext{deadline_from(deadline), {}, {}, {}};
}

std::chrono::milliseconds ClientCore::trusted_ttl(std::chrono::milliseconds asked,
                                                  std::chrono::milliseconds answered) {
  if (asked.count() <= 0) return answered;
  if (answered.count() <= 0) return asked;
  return std::min(asked, answered);
}

SteadyClock::time_point ClientCore::lease_deadline(SteadyClock::time_point sent_at,
                                                   std::chrono::milliseconds ttl) const {
  const auto allowance = std::chrono::milliseconds(
      static_cast<std::int64_t>(std::ceil(static_cast<double>(ttl.count()) * clock_drift)));
  return sent_at + ttl - allowance;
}

std::uint64_t ClientCore::random_bits() {
  std::lock_guard lock(random_mutex_);
  return random_();
}

Exchange ClientCore::call(const HttpRequest& request, const CallContext& context,
                          const std::string& what) {
  const SteadyClock::time_point started = clock.now();
  HttpRequest attempt_request = request;
  LastFailure failure;
  for (int attempt = 0;; ++attempt) {
    const std::chrono::milliseconds slack =
        context.before_attempt ? context.before_attempt(attempt_request) : context.attempt_slack;
    const std::chrono::milliseconds attempt_limit = options.request_timeout + slack;
    const SteadyClock::time_point sent_at = clock.now();
    // Every call gets at least one real attempt, even with a deadline already due.
    const auto remaining = std::chrono::ceil<std::chrono::milliseconds>(context.deadline - sent_at);
    const auto timeout = std::clamp(remaining, std::chrono::milliseconds(1),
                                    std::max(attempt_limit, std::chrono::milliseconds(1)));
    std::optional<std::chrono::milliseconds> retry_after;
    try {
      HttpResponse response = transport->send(attempt_request, timeout);
      if (!is_transient_status(response.status)) return Exchange{std::move(response), sent_at};
      failure = LastFailure{};
      failure.api_error = parse_api_error(response);
      retry_after = response.retry_after;
    } catch (const TransportError& error) {
      failure = LastFailure{error.kind(), error.what(), std::nullopt};
    }
    auto delay = backoff_delay(backoff, attempt, random_bits());
    // The server knows best when it can answer again (a leader election, a restart).
    if (retry_after) delay = std::max(delay, *retry_after);
    const auto now = clock.now();
    const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(now - started);
    if (now + delay >= context.deadline || !clock.sleep(delay, context.stop)) {
      give_up(failure, what, attempt + 1, spent);
    }
  }
}

}  // namespace dlock::client::detail
