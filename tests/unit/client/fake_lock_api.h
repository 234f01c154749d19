#pragma once

// Just enough of dlockd's C3 surface for client tests, with switches to make each call fail
// the way a test needs. Thread-safe: the switches are flipped by the test while the server
// thread answers.

#include <atomic>
#include <cstdint>
#include <string>

#include "fake_server.h"

namespace dlock::client::testing {

class FakeLockApi {
 public:
  std::atomic<int> session_ttl_ms{1000};
  std::atomic<int> lock_ttl_ms{1000};
  std::atomic<std::uint64_t> token{42};
  std::atomic<bool> held{false};                   // acquire -> 409 held
  std::atomic<bool> session_bound{false};          // grants answer "lease": "session"
  std::atomic<bool> acquire_unavailable{false};    // acquire -> 503 unavailable
  std::atomic<bool> lock_lost{false};              // extend/release -> 409 lock_lost
  std::atomic<bool> extend_unavailable{false};     // extend -> 503 unavailable
  std::atomic<bool> session_gone{false};           // keepalive/acquire -> 404 session_not_found
  std::atomic<bool> keepalive_unavailable{false};  // keepalive -> 503 unavailable
  std::atomic<bool> leads{false};  // GET /v1/elections/{name}: 200 (token) or 404 no_leader

  FakeResponse handle(const FakeRequest& request) {
    const std::string& t = request.target;
    const auto has = [&t](const char* part) { return t.find(part) != std::string::npos; };
    if (t.rfind("/v1/elections/", 0) == 0) return election(request);
    if (request.method == "POST" && t == "/v1/sessions") {
      // A lock-delay asked for is granted (C2 "Lock-delay"); none asked for: the answer has no
      // "lock_delay_ms", as from a dlockd that predates lock-delay.
      const auto delay_at = request.body.find(R"("lock_delay_ms":)");
      const std::string delay =
          delay_at == std::string::npos
              ? ""
              : R"(,"lock_delay_ms":)" +
                    std::to_string(std::stoul(request.body.substr(delay_at + 16)));
      return {201, R"({"session_id":"s-1","owner":"tester","ttl_ms":)" +
                       std::to_string(session_ttl_ms.load()) + delay +
                       R"(,"expires_at":"2030-01-01T00:00:00Z"})"};
    }
    if (request.method == "POST" && has("/keepalive")) {
      if (session_gone) return {404, error_body("session_not_found", "no such session")};
      if (keepalive_unavailable) return {503, error_body("unavailable", "backend down")};
      return {200, R"({"ttl_ms":)" + std::to_string(session_ttl_ms.load()) +
                       R"(,"expires_at":"2030-01-01T00:00:00Z"})"};
    }
    if (request.method == "DELETE" && t.rfind("/v1/sessions/", 0) == 0) return {204, ""};
    if (request.method == "POST" && has("/acquire")) {
      if (session_gone) return {404, error_body("session_not_found", "no such session")};
      if (acquire_unavailable) {
        return {503, error_body("unavailable", "backend down"), {{"Retry-After", "0"}}};
      }
      if (held) return {409, error_body("held", "held by someone else")};
      // The mode asked for (ADR-0020): a permit through /v1/semaphores with its "limit".
      const bool permit = t.rfind("/v1/semaphores/", 0) == 0;
      const auto limit_at = request.body.find(R"("limit":)");
      std::string extra = R"(,"mode":")" + std::string(permit ? "permit" : "exclusive") + R"(")";
      if (!permit && request.body.find(R"("mode":"shared")") != std::string::npos) {
        extra = R"(,"mode":"shared")";
      }
      if (permit && limit_at != std::string::npos) {
        extra += R"(,"limit":)" + std::to_string(std::stoul(request.body.substr(limit_at + 8)));
      }
      return {200, grant(extra)};
    }
    if (request.method == "POST" && has("/extend")) {
      if (lock_lost) return {409, error_body("lock_lost", "not the current grant")};
      if (extend_unavailable) return {503, error_body("unavailable", "backend down")};
      return {200, grant()};
    }
    if (request.method == "DELETE" &&
        (t.rfind("/v1/locks/", 0) == 0 || t.rfind("/v1/semaphores/", 0) == 0)) {
      if (lock_lost) return {409, error_body("lock_lost", "not the current grant")};
      return {204, ""};
    }
    return {404, error_body("not_found", "no route " + request.method + " " + t)};
  }

 private:
  // The election routes (C3 "Elections"): a campaign leads with the value sent and `token`
  // (held -> 409 held), proclaim keeps the token (lock_lost -> 409), resign -> 204; the read
  // answers a leader with `token` while `leads`, else no_leader.
  FakeResponse election(const FakeRequest& request) {
    const std::string& t = request.target;
    const auto has = [&t](const char* part) { return t.find(part) != std::string::npos; };
    if (request.method == "GET" && !leads) return {404, error_body("no_leader", "nobody leads")};
    if (request.method == "GET") {
      return {200, R"({"name":"e","leader":{"owner":"tester","value":"v"},"fencing_token":)" +
                       std::to_string(token.load()) + "}"};
    }
    if (session_gone) return {404, error_body("session_not_found", "no such session")};
    if (has("/campaign") && held) return {409, error_body("held", "another session leads")};
    if (has("/proclaim") || has("/resign")) {
      if (lock_lost) return {409, error_body("lock_lost", "not the leader")};
      if (has("/resign")) return {204, ""};
    }
    // The value sent (tests use values without escapes).
    const auto at = request.body.find(R"("value":")");
    const std::string value =
        at == std::string::npos
            ? ""
            : request.body.substr(at + 9, request.body.find('"', at + 9) - (at + 9));
    return {200, R"({"name":"e","leader":{"owner":"tester","value":")" + value +
                     R"("},"fencing_token":)" + std::to_string(token.load()) +
                     R"(,"session_id":"s-1","ttl_ms":)" + std::to_string(session_ttl_ms.load()) +
                     R"(,"expires_at":"2030-01-01T00:00:00Z","lease":"session"})"};
  }

  // `extra`: more members, each starting with a comma.
  std::string grant(const std::string& extra = "") const {
    return R"({"key":"k","fencing_token":)" + std::to_string(token.load()) +
           R"(,"owner":"tester","session_id":"s-1","ttl_ms":)" +
           std::to_string(lock_ttl_ms.load()) +
           R"(,"expires_at":"2030-01-01T00:00:00Z","lease":")" +
           (session_bound ? "session" : "ttl") + R"(")" + extra + "}";
  }
};

}  // namespace dlock::client::testing
