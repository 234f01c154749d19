#include "server/http_server.h"

#include "dlock/errors.h"
#include "server/error_mapping.h"

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>
#include <optional>
#include <stdexcept>

namespace dlock::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// Idle keep-alive connections are closed after this long without a request.
constexpr auto kIdleTimeout = std::chrono::seconds(120);

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, std::size_t max_body_bytes, const Handler& handler,
             std::shared_ptr<std::atomic<std::size_t>> in_flight)
      : stream_(std::move(socket)),
        max_body_bytes_(max_body_bytes),
        handler_(handler),
        in_flight_(std::move(in_flight)) {}

  void start() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read(); });
  }

 private:
  void read() {
    parser_.emplace();
    parser_->body_limit(max_body_bytes_);
    parser_->header_limit(16 * 1024);
    stream_.expires_after(kIdleTimeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code error, std::size_t) {
                       self->on_read(error);
                     });
  }

  void on_read(beast::error_code error) {
    if (error == http::error::body_limit) {
      auto response =
          error_response(413, "payload_too_large",
                         "request body larger than " + std::to_string(max_body_bytes_) + " bytes");
      response.keep_alive(false);  // the rest of the body is still on the wire
      return write(std::move(response));
    }
    if (error == http::error::end_of_stream || error == beast::error::timeout) {
      stream_.socket().shutdown(tcp::socket::shutdown_send, error);
      return;
    }
    if (error) {
      // Any other parse error of the request itself (bad target, method, headers, chunking).
      if (error.category() == http::make_error_code(http::error::bad_target).category()) {
        auto response = error_response(400, "invalid_argument",
                                       "malformed HTTP request: " + error.message(), "request");
        response.keep_alive(false);
        return write(std::move(response));
      }
      return;  // connection reset and friends: nothing to answer
    }
    stream_.expires_never();  // a waiting acquire may legitimately take minutes
    ++*in_flight_;
    Request request = parser_->release();
    const bool keep_alive = request.keep_alive();
    auto self = shared_from_this();
    handler_(std::move(request), [self, keep_alive](Response response) {
      asio::post(self->stream_.get_executor(),
                 [self, keep_alive, response = std::move(response)]() mutable {
                   --*self->in_flight_;
                   response.keep_alive(keep_alive && response.keep_alive());
                   self->write(std::move(response));
                 });
    });
  }

  void write(Response response) {
    auto message = std::make_shared<Response>(std::move(response));
    http::async_write(stream_, *message,
                      [self = shared_from_this(), message](beast::error_code error, std::size_t) {
                        if (error) return;
                        if (!message->keep_alive()) {
                          self->stream_.socket().shutdown(tcp::socket::shutdown_send, error);
                          return;
                        }
                        self->read();
                      });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  const std::size_t max_body_bytes_;
  const Handler& handler_;
  std::shared_ptr<std::atomic<std::size_t>> in_flight_;
};

tcp::endpoint parse_endpoint(const std::string& listen) {
  const auto colon = listen.rfind(':');
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty() || host == "localhost") host = "127.0.0.1";
  boost::system::error_code error;
  const auto address = asio::ip::make_address(host, error);
  if (error) {
    throw InvalidArgumentError("server.listen",
                               "server.listen: '" + host + "' is not an IP address");
  }
  int port = -1;
  try {
    port = std::stoi(listen.substr(colon + 1));
  } catch (...) {
  }
  if (port < 0 || port > 65535) {
    throw InvalidArgumentError("server.listen", "server.listen: bad port in " + listen);
  }
  return {address, static_cast<unsigned short>(port)};
}

}  // namespace

HttpServer::HttpServer(asio::io_context& io, const std::string& listen, std::size_t max_body_bytes,
                       Handler handler)
    : io_(io),
      acceptor_(asio::make_strand(io)),
      max_body_bytes_(max_body_bytes),
      handler_(std::move(handler)),
      in_flight_(std::make_shared<std::atomic<std::size_t>>(0)) {
  const auto endpoint = parse_endpoint(listen);
  boost::system::error_code error;
  acceptor_.open(endpoint.protocol(), error);
  if (!error) acceptor_.set_option(asio::socket_base::reuse_address(true), error);
  if (!error) acceptor_.bind(endpoint, error);
  if (!error) acceptor_.listen(asio::socket_base::max_listen_connections, error);
  if (error) throw UnavailableError("cannot listen on " + listen + ": " + error.message());
}

tcp::endpoint HttpServer::local_endpoint() const { return acceptor_.local_endpoint(); }

void HttpServer::start() { accept(); }

void HttpServer::stop_accepting() {
  asio::post(acceptor_.get_executor(), [this] {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
  });
}

void HttpServer::accept() {
  acceptor_.async_accept(
      asio::make_strand(io_), [this](beast::error_code error, tcp::socket socket) {
        if (error == asio::error::operation_aborted || !acceptor_.is_open()) return;
        if (!error) {
          socket.set_option(tcp::no_delay(true), error);
          std::make_shared<Connection>(std::move(socket), max_body_bytes_, handler_, in_flight_)
              ->start();
        }
        accept();
      });
}

}  // namespace dlock::server
