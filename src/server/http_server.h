#pragma once

// The HTTP/1.1 front end: Boost.Beast on one io_context, keep-alive, bounded bodies. A request
// costs a parser and a buffer, never a thread: handlers answer through a callback that may be
// invoked later from any thread (a waiting acquire answers when it is granted).

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <functional>
#include <memory>
#include <string>

namespace dlock::server {

using Request = boost::beast::http::request<boost::beast::http::string_body>;
using Response = boost::beast::http::response<boost::beast::http::string_body>;
using Reply = std::function<void(Response)>;
using Handler = std::function<void(Request&&, Reply)>;

class HttpServer {
 public:
  // Binds at once. Throws InvalidArgumentError for a malformed address, UnavailableError when
  // the address cannot be bound (ADR-0003); both name the address.
  HttpServer(boost::asio::io_context& io, const std::string& listen, std::size_t max_body_bytes,
             Handler handler);
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  boost::asio::ip::tcp::endpoint local_endpoint() const;
  void start();
  void stop_accepting();
  // Requests received and not yet answered.
  std::size_t in_flight() const { return *in_flight_; }

 private:
  void accept();

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  const std::size_t max_body_bytes_;
  Handler handler_;
  std::shared_ptr<std::atomic<std::size_t>> in_flight_;
};

}  // namespace dlock::server
