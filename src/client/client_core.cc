#include "client/client_core.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>

#include "client/beast_transport.h"
#include "client/error_mapping.h"
#include "client/tls_context.h"
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
  if (failure.transport_kind == TransportError::Kind::kTlsFailed) throw TlsError(message);
  if (failure.transport_kind == TransportError::Kind::kMaybeSent) {
    throw UnknownOutcomeError(message);
  }
  throw UnavailableError(message);
}

double resolve_clock_drift(const std::optional<double>& option) {
  if (option) {
    // Not NaN, and short of a half: beyond that the "allowance" would be the lease itself.
    if (!(*option >= 0 && *option < 0.5)) {
      throw InvalidArgumentError("clock_drift",
                                 "clock_drift: the clock-rate allowance must be a fraction in "
                                 "[0, 0.5), e.g. 0.01");
    }
    return *option;
  }
  if (const char* env = std::getenv("DLOCK_CLOCK_DRIFT"); env != nullptr && *env != '\0') {
    return parse_clock_drift(env, "DLOCK_CLOCK_DRIFT");
  }
  return kDefaultClockDrift;
}

// RFC 6750 b64token (token68): what may follow "Bearer " in a header. Checking it here also
// keeps a token from injecting header lines. The message never shows the token.
void check_bearer_token(const std::string& token, const std::string& name) {
  std::size_t end = token.size();
  while (end > 0 && token[end - 1] == '=') --end;
  const bool valid =
      end > 0 && std::all_of(token.begin(), token.begin() + static_cast<long>(end), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("-._~+/", c) != nullptr;
      });
  if (!valid) {
    throw InvalidArgumentError(name, name +
                                         ": not a bearer token (letters, digits and -._~+/, "
                                         "then optional '=' padding; e.g. from dlock token new)");
  }
}

// The first line of `path`, trailing blanks removed. Errors name the file, never its content.
std::string read_token_file(const std::string& path, const std::string& name) {
  std::ifstream file(path);
  std::string line;
  if (!file || !std::getline(file, line)) {
    const std::string reason = file.is_open() ? "it is empty" : std::strerror(errno);
    throw InvalidArgumentError(name, name + ": cannot read a token from '" + path + "': " + reason);
  }
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  if (line.empty()) {
    throw InvalidArgumentError(name, name + ": the first line of '" + path + "' is empty");
  }
  check_bearer_token(line, name + " ('" + path + "')");
  return line;
}

}  // namespace

std::string resolve_token(const ClientOptions& options) {
  if (!options.token.empty()) {
    check_bearer_token(options.token, "token");
    return options.token;
  }
  if (!options.token_file.empty()) return read_token_file(options.token_file, "token_file");
  if (std::string token = env_or("DLOCK_TOKEN", ""); !token.empty()) {
    check_bearer_token(token, "DLOCK_TOKEN");
    return token;
  }
  if (std::string path = env_or("DLOCK_TOKEN_FILE", ""); !path.empty()) {
    return read_token_file(path, "DLOCK_TOKEN_FILE");
  }
  return {};
}

namespace {

std::vector<std::string> resolve_servers(const ClientOptions& options) {
  if (!options.servers.empty()) return options.servers;
  std::vector<std::string> servers = split_server_list(
      options.server_url.empty() ? env_or("DLOCK_SERVER", std::string(kDefaultServerUrl))
                                 : options.server_url);
  if (servers.empty()) throw InvalidArgumentError("server", "server: no server URL given");
  return servers;
}

TlsFiles resolve_tls_files(const ClientOptions& options) {
  TlsFiles files;
  files.ca_file = options.tls_ca_file;
  files.cert_file = options.tls_cert_file;
  files.key_file = options.tls_key_file;
  if (files.ca_file.empty() && (files.ca_file = env_or("DLOCK_CACERT", "")) != "") {
    files.ca_name = "DLOCK_CACERT";
  }
  if (files.cert_file.empty() && (files.cert_file = env_or("DLOCK_CERT", "")) != "") {
    files.cert_name = "DLOCK_CERT";
  }
  if (files.key_file.empty() && (files.key_file = env_or("DLOCK_KEY", "")) != "") {
    files.key_name = "DLOCK_KEY";
  }
  return files;
}

}  // namespace

ClientCore::ClientCore(ClientOptions opts, TransportPtr injected) : options(std::move(opts)) {
  options.servers = resolve_servers(options);
  options.server_url = options.servers.front();
  options.token = resolve_token(options);
  if (options.admin_token.empty()) options.admin_token = env_or("DLOCK_ADMIN_TOKEN", "");
  if (!options.admin_token.empty()) check_bearer_token(options.admin_token, "admin_token");
  clock_drift = resolve_clock_drift(options.clock_drift);
  // Parsed even with an injected transport so a bad URL is reported the same way in tests.
  std::vector<ServerAddress> addresses;
  for (const std::string& url : options.servers) addresses.push_back(parse_server_url(url));
  if (injected) {
    transports.push_back(std::move(injected));
  } else {
    TlsContextPtr tls;
    for (ServerAddress& address : addresses) {
      if (address.tls && !tls) tls = make_tls_context(resolve_tls_files(options));
      transports.push_back(
          make_beast_transport(std::move(address), options.max_idle_connections, tls));
    }
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
  const bool has_authorization =
      std::any_of(request.headers.begin(), request.headers.end(),
                  [](const auto& header) { return header.first == "Authorization"; });
  if (!options.token.empty() && !has_authorization) {
    attempt_request.headers.emplace_back("Authorization", "Bearer " + options.token);
  }
  LastFailure failure;
  // Servers that failed this call since the last backoff: until each was tried once, the next
  // one is tried at once, without waiting.
  std::size_t failed_in_round = 0;
  for (int attempt = 0, backoff_round = 0;; ++attempt) {
    const std::chrono::milliseconds slack =
        context.before_attempt ? context.before_attempt(attempt_request) : context.attempt_slack;
    const std::chrono::milliseconds attempt_limit = options.request_timeout + slack;
    const SteadyClock::time_point sent_at = clock.now();
    // Every call gets at least one real attempt, even with a deadline already due.
    const auto remaining = std::chrono::ceil<std::chrono::milliseconds>(context.deadline - sent_at);
    const auto timeout = std::clamp(remaining, std::chrono::milliseconds(1),
                                    std::max(attempt_limit, std::chrono::milliseconds(1)));
    const std::size_t server = current_server.load() % transports.size();
    std::optional<std::chrono::milliseconds> retry_after;
    // Whether the next attempt should go to another server.
    bool move_on = false;
    try {
      HttpResponse response = transports[server]->send(attempt_request, timeout);
      if (!is_transient_status(response.status)) return Exchange{std::move(response), sent_at};
      failure = LastFailure{};
      failure.api_error = parse_api_error(response);
      retry_after = response.retry_after;
      // 429 is this server's own limit or throttle: stay. 502/503/504: it cannot serve now.
      move_on = response.status != 429;
    } catch (const TransportError& error) {
      failure = LastFailure{error.kind(), error.what(), std::nullopt};
      move_on = true;
      const auto spent =
          std::chrono::duration_cast<std::chrono::milliseconds>(clock.now() - started);
      if (error.kind() == TransportError::Kind::kMaybeSent && !context.repeat_safe) {
        give_up(failure, what, attempt + 1, spent);
      }
      if (error.kind() == TransportError::Kind::kTlsFailed && transports.size() == 1) {
        give_up(failure, what, attempt + 1, spent);
      }
    }
    const auto now = clock.now();
    const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(now - started);
    if (move_on && transports.size() > 1) {
      // Another thread may have moved on already; only the first one moves.
      std::size_t expected = server;
      current_server.compare_exchange_strong(expected, (server + 1) % transports.size());
      if (++failed_in_round < transports.size()) {
        if (now >= context.deadline) give_up(failure, what, attempt + 1, spent);
        continue;
      }
      failed_in_round = 0;
      // Every server failed its TLS handshake: configuration, not an outage.
      if (failure.transport_kind == TransportError::Kind::kTlsFailed) {
        give_up(failure, what, attempt + 1, spent);
      }
    }
    auto delay = backoff_delay(backoff, backoff_round++, random_bits());
    // The server knows best when it can answer again (a leader election, a restart).
    if (retry_after) delay = std::max(delay, *retry_after);
    if (now + delay >= context.deadline || !clock.sleep(delay, context.stop)) {
      give_up(failure, what, attempt + 1, spent);
    }
  }
}

}  // namespace dlock::client::detail
