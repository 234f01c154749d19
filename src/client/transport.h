#pragma once

// The seam between the client's logic (retries, error mapping, JSON) and the network, so unit
// tests can script server answers without sockets.

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace dlock::client::detail {

enum class Method { kGet, kPost, kDelete };

const char* to_string(Method method) noexcept;

struct HttpRequest {
  Method method = Method::kGet;
  // Origin-form target including the query, already percent-encoded: "/v1/locks/a%2Fb?ns=x".
  std::string target;
  // JSON body; empty means no body.
  std::string body;
  // Extra header fields, e.g. {"Authorization", "Bearer …"}.
  std::vector<std::pair<std::string, std::string>> headers;
};

struct HttpResponse {
  int status = 0;
  std::string body;
  // From a Retry-After header (delta-seconds form), when present.
  std::optional<std::chrono::milliseconds> retry_after;
};

// A failure below HTTP. Whether the request may have reached the server decides how the
// caller reports it when retries run out (unavailable vs unknown outcome).
class TransportError : public std::runtime_error {
 public:
  enum class Kind {
    kNotSent,    // resolve/connect failed: the server never saw the request
    kMaybeSent,  // the connection broke or timed out after the request was written
    // The TLS handshake failed: the server's certificate did not verify or it refused ours.
    // The request was not processed; repeating it on the same server cannot help.
    kTlsFailed,
  };
  TransportError(Kind kind, const std::string& message)
      : std::runtime_error(message), kind_(kind) {}
  Kind kind() const noexcept { return kind_; }

 private:
  Kind kind_;
};

// Sends one request and returns the response, within `timeout`. Thread-safe. Throws
// TransportError; never throws for an HTTP error status.
class Transport {
 public:
  Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;
  virtual ~Transport() = default;

  virtual HttpResponse send(const HttpRequest& request, std::chrono::milliseconds timeout) = 0;
};

using TransportPtr = std::unique_ptr<Transport>;

}  // namespace dlock::client::detail
