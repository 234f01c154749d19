#pragma once

// Path 3: dlockd over HTTP/1.1 keep-alive. One io_context on one thread drives every
// connection (callbacks, no thread per connection).

#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench.h"

namespace dlock::bench {

// The bench's bearer token (contract C6), looked up by the client library's own
// client::detail::resolve_token (docs/client.md): the first line of `token_file` when given
// (--token-file), else DLOCK_TOKEN, else the first line of the file DLOCK_TOKEN_FILE names; ""
// when none is set. Throws InvalidArgumentError when a named file cannot be read or is empty, or
// the token is not a bearer token (never showing the token).
std::string resolve_bearer_token(const std::string& token_file);

// The token every HttpTarget carries by default: the one set_bearer_token() gave (before any
// target is made), else resolve_bearer_token("").
void set_bearer_token(std::string token);
std::string bearer_token();

struct HttpTarget {
  std::string host = "127.0.0.1";
  unsigned short port = 0;
  // Sent as `Authorization: Bearer <token>` on every request when not empty.
  std::string token = bearer_token();
  // HTTPS when set (dlockd with --tls-cert-file): every connection does its TLS handshake,
  // verifying the server's chain against this context's CA, before the clock starts.
  std::shared_ptr<boost::asio::ssl::context> tls;
};

// A client context that trusts `ca_file` (PEM) only, TLS 1.2 or later.
std::shared_ptr<boost::asio::ssl::context> tls_client_context(const std::string& ca_file);

// Uncontended: connection i opens a session, then acquires and releases key "bench-http-<i>":
// a 30 s TTL lock (path "http"), or with session_bound a session-bound one, `"lease":"session"`
// and no ttl_ms (path "http-sb", ADR-0018).
Measurement http_pairs(const HttpTarget& target, const std::string& backend, int clients,
                       std::chrono::milliseconds duration, bool session_bound = false);

// Holder sets (ADR-0020; the row in holder_sets.h), path "http", every grant with a 30 s TTL:
// - kSharedPairs ("shared-pairs"): connection i acquires and releases lock
//   "bench-http-shared-<i>" in shared mode: a shared grant on a key of its own, to set against
//   http_pairs' exclusive one;
// - kSharedHot ("shared-hot"): every connection is a shared holder of ONE lock,
//   "bench-http-shared": readers coexist, so none waits (unlike the exclusive hot key);
// - kPermits ("permits"): every connection acquires and releases one of `clients` permits of
//   semaphore "bench-http-permits", so all hold one at once and none waits.
enum class HolderShape { kSharedPairs, kSharedHot, kPermits };
const char* holder_workload(HolderShape shape);
Measurement http_holders(const HttpTarget& target, const std::string& backend, int clients,
                         std::chrono::milliseconds duration, HolderShape shape);

// Hot key: every connection asks for one key with wait_ms and releases at once when granted.
// `handoff_ms` gets, for each grant after the first, the time from the previous holder's
// release acknowledgement to this grant's reception (negative when the grant arrived first),
// and `handoff_sent_ms` the time from that release being *sent* to this grant's reception.
// With several targets (dlockd sharing one backend) connection i uses target i % n and the
// measurement's path is "http2". session_bound: as for http_pairs (path "http-sb").
Measurement http_hot(const std::vector<HttpTarget>& targets, const std::string& backend,
                     int clients, std::chrono::milliseconds duration,
                     std::vector<double>& handoff_ms, std::vector<double>& handoff_sent_ms,
                     bool session_bound = false);

// Handoff as the issue defines it, `rounds` times: the holder (on `holder_target`) takes one key,
// `waiters` connections (on `waiter_target`) ask for it with a long wait_ms, and once
// `queued()` (dlockd's dlock_waiters gauge) says they all wait, the holder releases. Records
// the time from the release's 204 being received (`handoff_ms`; negative when the grant
// arrives first) and from the release being sent (`handoff_sent_ms`) to the first waiter's 200.
// Then every waiter releases as it is granted, so the key is free for the next round.
void http_handoff(const HttpTarget& holder_target, const HttpTarget& waiter_target, int waiters,
                  int rounds, const std::function<double()>& queued,
                  std::vector<double>& handoff_ms, std::vector<double>& handoff_sent_ms);

struct FillResult {
  std::uint64_t sessions = 0;
  std::uint64_t locks = 0;
  std::uint64_t errors = 0;
  double seconds = 0;
  std::vector<std::string> session_ids;
};
// Opens `sessions` sessions (1 h TTL) and acquires `locks` distinct keys spread over them,
// through `connections` connections; the locks stay held.
FillResult http_fill(const HttpTarget& target, int connections, std::uint64_t sessions,
                     std::uint64_t locks);

// Blocked waiters: a holder takes `key`, then `waiters` connections (sessions from
// `session_ids`, round robin) each send an acquire with a long wait_ms and stay blocked.
// `while_blocked` runs once every waiter's request has been written and `settle` has passed;
// then every connection is closed. Returns how many requests were written.
std::uint64_t http_blocked_waiters(const HttpTarget& target,
                                   const std::vector<std::string>& session_ids, int waiters,
                                   std::chrono::milliseconds settle,
                                   const std::function<void()>& while_blocked);

// GET `path` on a fresh connection (e.g. etcd's /metrics); "" when it cannot be fetched.
std::string http_get_text(const HttpTarget& target, const std::string& path);

// What an HTTP request through dlockd costs without a write, at `clients` connections each
// sending one request after another (the split of the hot key's grant interval, bench/README.md
// "The HTTP floor"):
// - kFloor ("floor"): GET /healthz, answered on the io thread: the loopback round trip, Beast's
//   read and write, routing and the client's own turnaround; no worker, no store call;
// - kRead ("read"): GET /v1/locks/bench-http-probe (never held: 404), a store read on a
//   worker: the floor plus the two thread hand-offs every store call pays and one read.
enum class ProbeShape { kFloor, kRead };
Measurement http_probe(const HttpTarget& target, const std::string& backend, int clients,
                       std::chrono::milliseconds duration, ProbeShape shape);

// Keepalive throughput: `clients` connections renew `session_ids` round robin for `duration`.
Measurement http_keepalives(const HttpTarget& target, const std::string& backend, int clients,
                            const std::vector<std::string>& session_ids,
                            std::chrono::milliseconds duration);

}  // namespace dlock::bench
