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
// - beyond server.max.connections open connections, a new one is answered 503 and closed while
//   the open ones carry on.
// - pipelining: a connection's requests are answered one at a time, in order; the next one is
//   not read before the previous answer is written, and read-ahead is bounded by the header and
//   body limits, so one connection holds at most one request's worth of memory.
// - only "chunked" is accepted as Transfer-Encoding (anything else: 400, closed); HEAD answers
//   carry headers only; "Expect: 100-continue" is answered 100 (or the final 413), any other
//   expectation 417.
// - accept errors (e.g. out of file descriptors) back off 50..500 ms, are counted
//   (dlock_http_accept_errors_total) and logged at most every 10 s.
// - GET /readyz answers 503 when the server is wedged: requests other than waiting acquires have
//   been in flight with none answered for max(10 s, 2 x backend.timeout). Otherwise the handler
//   answers it.

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "server/config.h"

namespace dlock::server {

using Request = boost::beast::http::request<boost::beast::http::string_body>;
using Response = boost::beast::http::response<boost::beast::http::string_body>;
using Reply = std::function<void(Response)>;
using Handler = std::function<void(Request&&, Reply)>;

class HttpServer {
 public:
  // Binds `listen` at once (throws InvalidArgumentError for a malformed address,
  // UnavailableError when it cannot be bound; both name it, ADR-0003). Uses the
  // config's body limit and connection settings.
  HttpServer(boost::asio::io_context& io, const std::string& listen, const ServerConfig& config,
             Handler handler);
  // Default connection settings (ServerConfig's).
  HttpServer(boost::asio::io_context& io, const std::string& listen, std::size_t max_body_bytes,
             Handler handler);
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  ~HttpServer();

  boost::asio::ip::tcp::endpoint local_endpoint() const;
  void start();
  void stop_accepting();
  // Requests received and not yet answered.
  std::size_t in_flight() const;

  struct Shared;  // what connections share with the server (outlives it while they live)

 private:
  void accept();
  void on_accept_error(const boost::system::error_code& error);

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer backoff_timer_;
  std::chrono::milliseconds backoff_{0};
  std::chrono::steady_clock::time_point last_error_log_{};
  std::size_t errors_since_log_ = 0;
  std::shared_ptr<Shared> shared_;
};

}  // namespace dlock::server
