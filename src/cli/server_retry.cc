#include "cli/server_retry.h"

#include <netdb.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <fcntl.h>
#include <algorithm>
#include <cctype>
#include <memory>
#include <ostream>
#include <thread>

#include "cli/terminal_text.h"
#include "client/url.h"

namespace dlock::cli {
namespace {

using std::chrono::milliseconds;

// Between attempts: 1 s, then 2 s. Short enough to notice a server that comes back, long
// enough to read the countdown; the streak ends at --timeout whatever the delays.
milliseconds retry_delay(int failures) { return milliseconds(failures <= 1 ? 1000 : 2000); }

// An attempt made at the end of the streak still gets this long to connect and be answered.
constexpr milliseconds kLastAttempt{1000};

std::string lower_first(std::string text) {
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

// "HOST: REASON" or "HOST failed: REASON" after `marker` in `message`.
bool split_after(const std::string& message, const std::string& marker, AttemptFailure& out) {
  const auto at = message.find(marker);
  if (at == std::string::npos) return false;
  std::string rest = message.substr(at + marker.size());
  auto colon = rest.find(": ");
  if (colon == std::string::npos) {
    out.server = rest;
    return true;
  }
  out.server = rest.substr(0, colon);
  if (out.server.size() > 7 && out.server.ends_with(" failed")) {
    out.server.resize(out.server.size() - 7);
  }
  out.reason = lower_first(rest.substr(colon + 2));
  return true;
}

// "4s", "300ms": a streak's length as a person reads it.
std::string spent(SteadyClock::duration duration) {
  const auto tenths = std::chrono::round<milliseconds>(duration) / 100 * 100;
  return client::format_duration(
      tenths >= milliseconds(10'000) ? std::chrono::round<std::chrono::seconds>(duration) : tenths);
}

std::string seconds_left(milliseconds left) {
  return std::to_string((left.count() + 999) / 1000) + "s";
}

struct SslDeleter {
  void operator()(SSL_CTX* context) const { SSL_CTX_free(context); }
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};

// A TCP connection to host:port made within `timeout`, or -1.
int connect_within(const std::string& host, const std::string& port, milliseconds timeout) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return -1;
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, &::freeaddrinfo);
  for (addrinfo* address = found; address != nullptr; address = address->ai_next) {
    const int fd = ::socket(address->ai_family, address->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    const int flags = ::fcntl(fd, F_GETFL);
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    int result = ::connect(fd, address->ai_addr, address->ai_addrlen);
    if (result != 0 && errno == EINPROGRESS) {
      pollfd waiting{fd, POLLOUT, 0};
      int error = 0;
      socklen_t length = sizeof error;
      result = ::poll(&waiting, 1, static_cast<int>(timeout.count())) == 1 &&
                       ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0
                   ? 0
                   : -1;
    }
    if (result == 0) {
      ::fcntl(fd, F_SETFL, flags);
      return fd;
    }
    ::close(fd);
  }
  return -1;
}

}  // namespace

AttemptFailure describe_failure(const std::string& full_message) {
  std::string message = full_message;
  if (const auto suffix = message.find(" (gave up after"); suffix != std::string::npos) {
    message.resize(suffix);
  }
  AttemptFailure out;
  if (split_after(message, "cannot connect to ", out) ||
      split_after(message, "reading from ", out) || split_after(message, "sending to ", out)) {
    return out;
  }
  if (split_after(message, "cannot resolve ", out)) {
    out.reason = "cannot resolve the host: " + out.reason;
    return out;
  }
  if (const auto at = message.find("TLS handshake with "); at != std::string::npos) {
    const std::string rest = message.substr(at + 19);
    out.server = rest.substr(0, rest.find(' '));
    out.reason = "TLS handshake " + rest.substr(std::min(rest.size(), out.server.size() + 1));
    return out;
  }
  // A server answered (503, 429): the message is "<call>: <the server's message>".
  out.unreachable = false;
  const auto colon = message.find(": ");
  out.reason = colon == std::string::npos ? message : message.substr(colon + 2);
  return out;
}

client::ClientOptions one_attempt(client::ClientOptions options) {
  // A first backoff longer than any deadline: the library gives up instead of waiting.
  options.backoff_initial = std::chrono::hours(24);
  options.backoff_max = std::chrono::hours(24);
  return options;
}

bool speaks_tls(const std::string& host, const std::string& port, milliseconds timeout) {
  const int fd = connect_within(host, port, timeout);
  if (fd < 0) return false;
  const timeval limit{static_cast<time_t>(timeout.count() / 1000),
                      static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  bool tls = false;
  std::unique_ptr<SSL_CTX, SslDeleter> context(SSL_CTX_new(TLS_client_method()));
  if (context) {
    // Only whether it answers a handshake: nothing is sent over this connection.
    SSL_CTX_set_verify(context.get(), SSL_VERIFY_NONE, nullptr);
    std::unique_ptr<SSL, SslDeleter> ssl(SSL_new(context.get()));
    if (ssl && SSL_set_fd(ssl.get(), fd) == 1) tls = SSL_connect(ssl.get()) == 1;
  }
  ::close(fd);
  return tls;
}

ServerRetry::ServerRetry(std::ostream& err, bool terminal, milliseconds timeout)
    : err_(err),
      terminal_(terminal),
      timeout_(timeout),
      sleep_([](milliseconds delay) { std::this_thread::sleep_for(delay); }) {}

void ServerRetry::run(const std::function<void(SteadyClock::time_point)>& attempt,
                      bool repeat_safe) {
  std::optional<SteadyClock::time_point> streak_start;
  int failures = 0;
  // The countdown line, cleared before anything else is printed.
  bool line_shown = false;
  const auto clear_line = [&] {
    if (line_shown) err_ << "\r\x1b[K" << std::flush;
    line_shown = false;
  };
  for (;;) {
    const SteadyClock::time_point now = SteadyClock::now();
    const SteadyClock::time_point deadline =
        streak_start ? std::max(*streak_start + timeout_, now + kLastAttempt) : now + timeout_;
    AttemptFailure failure;
    std::exception_ptr error;
    try {
      attempt(deadline);
      clear_line();
      return;
    } catch (const UnknownOutcomeError& e) {
      if (!repeat_safe) {
        clear_line();
        throw;
      }
      failure = describe_failure(e.what());
      error = std::current_exception();
    } catch (const UnavailableError& e) {
      failure = describe_failure(e.what());
      error = std::current_exception();
    } catch (const ResourceExhaustedError& e) {
      failure = describe_failure(e.what());
      failure.unreachable = false;
      error = std::current_exception();
    } catch (...) {
      clear_line();
      throw;
    }
    if (!streak_start) streak_start = now;
    ++failures;
    if (failure.server.empty() && servers_.size() == 1) {
      const auto address = client::detail::parse_server_url(servers_.front());
      failure.server = address.host + ":" + address.port;
    }
    try {
      check_tls(failure);
    } catch (...) {
      clear_line();
      throw;
    }
    const SteadyClock::time_point after = SteadyClock::now();
    const SteadyClock::time_point streak_end = *streak_start + timeout_;
    if (after >= streak_end) {
      clear_line();
      if (!failure.unreachable) std::rethrow_exception(error);
      // The library's message counts one attempt: say how long this streak lasted.
      throw UnavailableError(
          "cannot reach " + (failure.server.empty() ? "the server" : failure.server) + " (" +
          failure.reason + "): gave up after " + std::to_string(failures) + " attempt" +
          (failures == 1 ? "" : "s") + " in " + spent(after - *streak_start) + " (--timeout " +
          client::format_duration(timeout_) + ")");
    }
    const milliseconds delay =
        std::min(retry_delay(failures), std::chrono::ceil<milliseconds>(streak_end - after));
    line_shown = terminal_;
    report_and_wait(failure, delay);
  }
}

void ServerRetry::report_and_wait(const AttemptFailure& failure, milliseconds delay) {
  const std::string server = failure.server.empty() ? "the server" : printable(failure.server);
  const std::string what = failure.unreachable
                               ? "cannot reach " + server + " (" + printable(failure.reason) + ")"
                               : server + " cannot serve now (" + printable(failure.reason) + ")";
  if (!terminal_) {
    err_ << "dlock: " << what << "; retrying in " << seconds_left(delay) << '\n' << std::flush;
    sleep_(delay);
    return;
  }
  // One line, redrawn each second: "retrying in 2s…", "retrying in 1s…".
  for (milliseconds left = delay; left.count() > 0;) {
    err_ << "\r\x1b[Kdlock: " << what << "; retrying in " << seconds_left(left) << "\u2026"
         << std::flush;
    const milliseconds step = left - milliseconds((left.count() - 1) / 1000 * 1000);
    sleep_(step);
    left -= step;
  }
}

void ServerRetry::check_tls(const AttemptFailure& failure) {
  if (tls_checked_ || !failure.unreachable) return;
  const std::string& reason = failure.reason;
  if (reason.find("end of stream") == std::string::npos &&
      reason.find("reset by peer") == std::string::npos) {
    return;
  }
  for (const std::string& url : servers_) {
    const auto address = client::detail::parse_server_url(url);
    if (address.tls ||
        (!failure.server.empty() && failure.server != address.host + ":" + address.port &&
         servers_.size() > 1)) {
      continue;
    }
    tls_checked_ = true;
    if (speaks_tls(address.host, address.port, milliseconds(2000))) {
      throw InvalidArgumentError("server", "the server at " + address.host + ":" + address.port +
                                               " speaks TLS: use https://" + address.host + ":" +
                                               address.port + address.base_path +
                                               " (and --cacert if its CA is not the system's)");
    }
    return;
  }
}

}  // namespace dlock::cli
