#pragma once

// The HTTP/1.1 front end: Boost.Beast on one io_context, keep-alive, bounded bodies. A request
// costs a parser and a buffer, never a thread: handlers answer through a callback that may be
// invoked later from any thread (a waiting acquire answers when it is granted).
//
// Connection limits (contract C6, docs/contracts/C5-configuration.md "Connections"):
// - a request header (request line included, at most 16 KiB, target at most 8 KiB) must arrive
//   within server.header.timeout of the connection's first byte (or of the accept), its body
//   within another header.timeout; a keep-alive connection may sit server.idle.timeout between
//   requests; an answer must be taken by the client within server.write.timeout. Each is closed
//   otherwise (slowloris, clients that stop reading).
// - beyond server.max.connections open connections, 16 more are accepted for probes and scrapes
//   only (/healthz, /readyz, /metrics; anything else 503 and closed); beyond those a new one is
//   answered 503 and closed before it is read, while the open ones carry on.
// - answers being written and not yet taken by their clients are bounded server-wide by
//   server.max.unsent.bytes: a large answer past it is 503 with Retry-After.
// - pipelining: a connection's requests are answered one at a time, in order; the next one is
//   not parsed before the previous answer is written, and read-ahead is bounded by the header
//   and body limits, so one connection holds at most one request's worth of memory.
// - a pending request whose handler armed Peer::cancellation with arm_watched() (a waiting
//   acquire) has its connection read meanwhile: the peer's EOF (a half-close too), a reset or a
//   TLS close cancels it; bytes that arrive are the next pipelined request, kept for later (once
//   they fill the read-ahead bound the connection is no longer watched). An answer for a peer
//   already gone is not written; one that is not (or not wholly) written cancels it too, so a
//   grant nobody received is given back (ADR-0007).
// - only "chunked" is accepted as Transfer-Encoding (anything else: 400, closed); HEAD answers
//   carry headers only; "Expect: 100-continue" is answered 100 (or the final 413), any other
//   expectation 417.
// - accept errors (e.g. out of file descriptors) back off 50..500 ms, are counted
//   (dlock_http_accept_errors_total) and logged at most every 10 s.
// - GET /readyz answers 503 when the server is wedged: requests other than waiting acquires have
//   been in flight with none answered for max(10 s, 2 x backend.timeout). Answers to /healthz,
//   /readyz and /metrics do not count as progress (a probe or a scrape would hide the wedge).
//   Otherwise the handler answers it.
//
// TLS (contract C6, ADR-0017; server/tls_context.h): with config.tls_enabled() every connection
// is HTTPS; the handshake counts against the first request's header timeout, and beyond
// max.connections a new connection is closed before its handshake. SIGHUP re-reads the
// certificate files for new connections (open ones keep theirs).

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/cancellation.h"
#include "server/config.h"

namespace dlock::server {

using Request = boost::beast::http::request<boost::beast::http::string_body>;
using Response = boost::beast::http::response<boost::beast::http::string_body>;
using Reply = std::function<void(Response)>;
// Who is on the other end of a request's connection.
struct Peer {
  std::string address;  // the peer's IP, without its port (the throttle key, C6)
  // mTLS: the subject CN of the client certificate the handshake verified against
  // tls.client.ca.file; nullopt without TLS, without a client CA, or without a CN.
  std::optional<std::string> client_cert_cn;
  // This request's tie to its connection (ADR-0007 "A wait belongs to its connection"): once
  // armed with arm_watched() the connection is read while the request is pending, and it is
  // cancelled when the peer closes or resets it; it is also cancelled when the answer cannot
  // be written (the peer had gone, or the write failed), and settled once it is written. Null
  // outside the HTTP server.
  core::CancellationPtr cancellation;
};
using Handler = std::function<void(Request&&, const Peer&, Reply)>;

struct ServerCounters;  // telemetry.h

// The routes of health probes and scrapes, as the Api serves them (Api::probe_routes()). The
// transport answers them on a reserve of connections beyond server.max.connections, does not
// count them as progress (that would hide a wedge), answers `readiness` 503 while wedged, and
// updates ServerCounters::wedged when `metrics` is scraped.
struct ProbeRoutes {
  std::string liveness;
  std::string readiness;
  std::string metrics;
  bool contains(std::string_view target) const {
    return target == liveness || target == readiness || target == metrics;
  }
};

class HttpServer {
 public:
  // Binds `listen` at once (throws InvalidArgumentError for a malformed address,
  // UnavailableError when it cannot be bound; both name it, ADR-0003). Uses the
  // config's body limit, connection settings and TLS files (InvalidArgumentError naming the file
  // that cannot be used).
  // `counters` (the Telemetry's) must outlive the io_context: connections update them until
  // their handlers are destroyed.
  HttpServer(boost::asio::io_context& io, const std::string& listen, const ServerConfig& config,
             ServerCounters& counters, ProbeRoutes probes, Handler handler);
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  ~HttpServer();

  boost::asio::ip::tcp::endpoint local_endpoint() const;
  void start();
  void stop_accepting();
  // Requests received and not yet answered.
  std::size_t in_flight() const;
  // Re-reads the TLS files for new connections (what SIGHUP does); false, logged, and the old
  // context kept when they do not load. False without TLS.
  bool reload_tls();

  struct Shared;  // what connections share with the server (outlives it while they live)

 private:
  void accept();
  void on_accept_error(const boost::system::error_code& error);
  void watch_sighup();

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer backoff_timer_;
  std::chrono::milliseconds backoff_{0};
  std::chrono::steady_clock::time_point last_error_log_{};
  std::size_t errors_since_log_ = 0;
  std::shared_ptr<Shared> shared_;
  std::optional<boost::asio::signal_set> sighup_;  // with TLS only
};

}  // namespace dlock::server
