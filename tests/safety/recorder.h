#pragma once

// The client side of every safety scenario: HTTP calls against a dlockd, each recorded as one
// operation of the history (sent, answered or not, and what the checker takes from the answer:
// the granted token and the deadline the holder was told, invariant I5). One recorder, so no
// scenario records grants without their promise.

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "safety/history.h"
#include "support/dlockd_process.h"

namespace dlock::safety {

// The token and the promised deadline (its send time plus the answered ttl_ms) of an answer.
void note_answer(Operation& op, const testing::HttpResult& result);

// The headers of a request carrying `bearer` (C6: `Authorization: Bearer`); none when empty.
std::map<std::string, std::string> bearer_headers(const std::string& bearer);

// POST /v1/sessions as owner "safety" (with `bearer`, when the dlockd has a tokens file);
// returns the session id, throws unless 201.
std::string open_session(const std::string& address, int ttl_ms, const std::string& bearer = "");

// The fencing_token of a 200 answer.
std::uint64_t token_of(const testing::HttpResult& result);

// Thread-safe: a waiting acquire may run on its own thread while another records more.
class Recorder {
 public:
  // Sends one request and returns the answer; throws when there is none (an unknown outcome).
  using Send =
      std::function<testing::HttpResult(const std::string& address, const std::string& method,
                                        const std::string& target, const std::string& body)>;

  // `address`: the dlockd of the calls that name none. `send`: by default testing::http_call,
  // carrying `bearer` on every call when it is not empty (a dlockd with a tokens file, C6); a
  // given `send` adds its own headers.
  explicit Recorder(History& history, std::string address = "", Send send = {},
                    std::string bearer = "");

  testing::HttpResult call_at(const std::string& address, const std::string& process,
                              const std::string& session, const std::string& key,
                              const std::string& kind, const std::string& method,
                              const std::string& target, const std::string& body = "",
                              std::uint64_t token = 0);
  testing::HttpResult call(const std::string& process, const std::string& session,
                           const std::string& key, const std::string& kind,
                           const std::string& method, const std::string& target,
                           const std::string& body = "", std::uint64_t token = 0) {
    return call_at(address_, process, session, key, kind, method, target, body, token);
  }

  testing::HttpResult acquire_at(const std::string& address, const std::string& process,
                                 const std::string& session, const std::string& key, int ttl_ms,
                                 int wait_ms);
  testing::HttpResult extend_at(const std::string& address, const std::string& process,
                                const std::string& session, const std::string& key,
                                std::uint64_t token, int ttl_ms);
  testing::HttpResult release_at(const std::string& address, const std::string& process,
                                 const std::string& session, const std::string& key,
                                 std::uint64_t token);

  testing::HttpResult acquire(const std::string& process, const std::string& session,
                              const std::string& key, int ttl_ms, int wait_ms) {
    return acquire_at(address_, process, session, key, ttl_ms, wait_ms);
  }
  testing::HttpResult extend(const std::string& process, const std::string& session,
                             const std::string& key, std::uint64_t token, int ttl_ms = 1000) {
    return extend_at(address_, process, session, key, token, ttl_ms);
  }
  testing::HttpResult release(const std::string& process, const std::string& session,
                              const std::string& key, std::uint64_t token) {
    return release_at(address_, process, session, key, token);
  }

  // The operation the last call recorded.
  Operation last() const;

 private:
  History& history_;
  std::string address_;
  Send send_;
  mutable std::mutex mutex_;
  Operation last_;
};

}  // namespace dlock::safety
