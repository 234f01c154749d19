#pragma once

// How the CLI waits for a server it cannot reach or that cannot serve now: each failure is
// reported at once, and the call is tried again after a delay shown as a countdown, until
// --timeout has passed since the first failure of the streak (docs/cli.md, "When the server
// does not answer"). The client library underneath makes one attempt per call (one per server
// with several, ClientOptions::servers) so that nothing retries silently (one_attempt()).

#include <chrono>
#include <functional>
#include <iosfwd>
#include <string>

#include "dlock/client.h"

namespace dlock::cli {

// What a failed attempt says, from the library's error message: the server ("127.0.0.1:7070",
// empty when the message does not say) and why, short ("connection refused").
struct AttemptFailure {
  std::string server;
  std::string reason;
  // True: nothing answered (refused, reset, timed out, no such host); false: a server answered
  // that it cannot serve now (503, 429).
  bool unreachable = true;
};
AttemptFailure describe_failure(const std::string& message);

// `options` changed so that a call gives up after its first attempt (each server once) instead
// of retrying with backoff: ServerRetry does the retrying, visibly. Only for one-shot calls:
// a Session's keepalives must keep the library's own retries.
client::ClientOptions one_attempt(client::ClientOptions options);

// Whether a TLS server answers at `host`:`port` (a TLS handshake, certificate not checked,
// completes within `timeout`). For an http:// URL whose server closed the connection without
// an answer: a TLS port does that to plain HTTP.
bool speaks_tls(const std::string& host, const std::string& port,
                std::chrono::milliseconds timeout);

class ServerRetry {
 public:
  // `terminal`: stderr is a terminal (one line, redrawn as the countdown runs); otherwise one
  // line per failure. `timeout`: how long a streak of failures may last (--timeout).
  ServerRetry(std::ostream& err, bool terminal, std::chrono::milliseconds timeout);
  ServerRetry(const ServerRetry&) = delete;
  ServerRetry& operator=(const ServerRetry&) = delete;

  // Calls `attempt(deadline)` until it returns, throws an error that is not "unavailable" or
  // "busy", or the streak of failures has lasted the timeout (then its last error is thrown).
  // `deadline`: when this attempt must be done, not counting a wait for a held key (the
  // attempt adds that itself). A connection lost after the request was sent
  // (UnknownOutcomeError) is retried only when `repeat_safe`, else thrown at once. An http://
  // server that hangs up without answering is checked for TLS once; if it speaks TLS,
  // InvalidArgumentError says to use https://.
  void run(const std::function<void(SteadyClock::time_point deadline)>& attempt,
           bool repeat_safe = true);

  // The URLs the client talks to, to name the server when the library's message does not and
  // for the TLS check.
  void set_servers(std::vector<std::string> servers) { servers_ = std::move(servers); }

  // For tests: how the countdown waits (default: sleeps).
  void set_sleep_for_test(std::function<void(std::chrono::milliseconds)> sleep) {
    sleep_ = std::move(sleep);
  }

 private:
  // Reports `failure` and waits `delay` (a countdown on a terminal).
  void report_and_wait(const AttemptFailure& failure, std::chrono::milliseconds delay);
  void check_tls(const AttemptFailure& failure);

  std::ostream& err_;
  const bool terminal_;
  const std::chrono::milliseconds timeout_;
  std::vector<std::string> servers_;
  bool tls_checked_ = false;
  std::function<void(std::chrono::milliseconds)> sleep_;
};

}  // namespace dlock::cli
