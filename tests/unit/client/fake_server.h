#pragma once

// A scriptable HTTP/1.1 server on 127.0.0.1:<ephemeral port> for client tests: every request
// is recorded and answered by a handler the test supplies. Runs on its own thread.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace dlock::client::testing {

struct FakeRequest {
  std::string method;  // "GET", "POST", "DELETE"
  std::string target;  // as sent, still percent-encoded
  std::string body;
  std::string authorization;
};

struct FakeResponse {
  FakeResponse() = default;
  FakeResponse(int status_code, std::string json_body,
               std::vector<std::pair<std::string, std::string>> extra_headers = {})
      : status(status_code), body(std::move(json_body)), headers(std::move(extra_headers)) {}

  int status = 200;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // Answer only after this long (timeouts); the server keeps serving other connections.
  std::chrono::milliseconds delay{0};
  // Close the connection after answering, without saying so (a server's idle timeout).
  bool close_silently = false;
};

class FakeServer {
 public:
  using Handler = std::function<FakeResponse(const FakeRequest&)>;

  // The handler runs on the server thread, one request at a time.
  explicit FakeServer(Handler handler);
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;
  ~FakeServer();

  std::string url() const;
  int connections_accepted() const { return connections_.load(); }
  std::vector<FakeRequest> requests() const;
  // The requests that went to `method` on a target starting with `prefix`.
  std::vector<FakeRequest> requests_to(const std::string& method, const std::string& prefix) const;
  // Waits until `count` requests matching `match` were received, or `timeout` passes.
  bool wait_for_requests(const std::function<bool(const FakeRequest&)>& match, std::size_t count,
                         std::chrono::milliseconds timeout) const;

 private:
  struct Impl;
  friend struct Impl;
  void record(FakeRequest request);

  Handler handler_;
  std::atomic<int> connections_{0};
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::vector<FakeRequest> requests_;
  std::unique_ptr<Impl> impl_;
};

// A JSON error body as dlockd sends it.
std::string error_body(const std::string& code, const std::string& message,
                       const std::string& field = "");

}  // namespace dlock::client::testing
