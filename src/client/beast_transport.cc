#include "client/beast_transport.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <charconv>
#include <memory>
#include <mutex>
#include <vector>

namespace dlock::client::detail {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr std::size_t kMaxResponseBytes = 64 * 1024 * 1024;

using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// One keep-alive connection, plain or TLS. Beast's synchronous calls take no timeout, so each
// operation is started asynchronously on the connection's private io_context and run to
// completion on the calling thread: a blocking call whose deadline tcp_stream enforces by
// closing the socket (under TLS too: the TLS stream reads and writes through it).
struct Connection {
  asio::io_context io;
  std::optional<beast::tcp_stream> plain;
  std::optional<TlsStream> tls;
  beast::flat_buffer buffer;

  beast::tcp_stream& tcp() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
  // Calls `use` with the stream HTTP goes through.
  template <typename Use>
  void with_stream(Use&& use) {
    if (tls) {
      use(*tls);
    } else {
      use(*plain);
    }
  }

  // Runs the io_context until the operation started by `start` completes.
  template <typename Start>
  beast::error_code run(Start&& start) {
    beast::error_code result;
    start([&result](beast::error_code ec, auto&&...) { result = ec; });
    io.restart();
    io.run();
    return result;
  }
};

http::verb to_verb(Method method) {
  switch (method) {
    case Method::kGet:
      return http::verb::get;
    case Method::kPost:
      return http::verb::post;
    case Method::kDelete:
      return http::verb::delete_;
  }
  return http::verb::get;
}

std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value) {
  // Only the delta-seconds form: dlockd never sends an HTTP date.
  long seconds = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (error != std::errc() || end != value.data() + value.size() || seconds < 0) {
    return std::nullopt;
  }
  return std::chrono::seconds(seconds);
}

// Raised inside the transport when a reused connection turns out to be closed by the server
// before it answered: the request is re-sent on a fresh connection.
struct StaleConnection {
  beast::error_code error;
};

class BeastTransport : public Transport {
 public:
  BeastTransport(ServerAddress address, std::size_t max_idle, TlsContextPtr tls)
      : address_(std::move(address)), max_idle_(max_idle), tls_(std::move(tls)) {
    if (address_.tls && !tls_) throw std::logic_error("an https:// transport needs a TLS context");
    host_header_ =
        address_.host.find(':') != std::string::npos ? "[" + address_.host + "]" : address_.host;
    host_header_ += ":" + address_.port;
  }

  HttpResponse send(const HttpRequest& request, std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const http::request<http::string_body> message = build(request);
    if (std::unique_ptr<Connection> idle = take_idle()) {
      try {
        return finish(std::move(idle), message, deadline, /*reused=*/true);
      } catch (const StaleConnection&) {
        // The server closed it (idle timeout, restart); the rest of the pool is likely stale
        // too. Fall through to a fresh connection.
        drop_idle();
      }
    }
    return finish(connect(deadline), message, deadline, /*reused=*/false);
  }

 private:
  http::request<http::string_body> build(const HttpRequest& request) const {
    http::request<http::string_body> message{to_verb(request.method),
                                             address_.base_path + request.target, 11};
    message.set(http::field::host, host_header_);
    message.set(http::field::user_agent, "dlock-client/0.1");
    message.set(http::field::accept, "application/json");
    for (const auto& [name, value] : request.headers) message.set(name, value);
    if (!request.body.empty()) {
      message.set(http::field::content_type, "application/json");
      message.body() = request.body;
    }
    message.keep_alive(true);
    message.prepare_payload();
    return message;
  }

  static std::chrono::steady_clock::duration remaining(std::chrono::steady_clock::time_point d) {
    return std::max(d - std::chrono::steady_clock::now(), std::chrono::steady_clock::duration(0));
  }

  std::unique_ptr<Connection> connect(std::chrono::steady_clock::time_point deadline) {
    auto connection = std::make_unique<Connection>();
    if (address_.tls) {
      connection->tls.emplace(connection->io, *tls_);
    } else {
      connection->plain.emplace(connection->io);
    }
    beast::error_code ec;
    tcp::resolver resolver(connection->io);
    const auto endpoints = resolver.resolve(address_.host, address_.port, ec);
    if (ec) {
      throw TransportError(TransportError::Kind::kNotSent,
                           "cannot resolve " + address_.host + ": " + ec.message());
    }
    connection->tcp().expires_after(remaining(deadline));
    ec = connection->run(
        [&](auto handler) { connection->tcp().async_connect(endpoints, std::move(handler)); });
    if (ec) {
      throw TransportError(TransportError::Kind::kNotSent,
                           "cannot connect to " + host_header_ + ": " + ec.message());
    }
    connection->tcp().socket().set_option(tcp::no_delay(true), ec);
    if (connection->tls) handshake(*connection);
    return connection;
  }

  // Verifies the server's certificate chain and that it names the URL's host, then shakes
  // hands. Throws TransportError kTlsFailed when verification fails or the server refuses us.
  void handshake(Connection& connection) {
    SSL* ssl = connection.tls->native_handle();
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    beast::error_code ec;
    asio::ip::make_address(address_.host, ec);
    const bool ip_literal = !ec;
    const bool named = ip_literal ? X509_VERIFY_PARAM_set1_ip_asc(param, address_.host.c_str())
                                  : X509_VERIFY_PARAM_set1_host(param, address_.host.c_str(), 0);
    // SNI carries host names only (RFC 6066), never an IP literal.
    if (named != 1 || (!ip_literal && SSL_set_tlsext_host_name(ssl, address_.host.c_str()) != 1)) {
      throw TransportError(TransportError::Kind::kTlsFailed,
                           "cannot set up TLS name checks for " + address_.host);
    }
    ec = connection.run([&](auto handler) {
      connection.tls->async_handshake(asio::ssl::stream_base::client, std::move(handler));
    });
    if (!ec) return;
    if (ec == beast::error::timeout) {
      throw TransportError(TransportError::Kind::kNotSent,
                           "TLS handshake with " + host_header_ + " timed out");
    }
    std::string reason = ec.message();
    if (const long verify = SSL_get_verify_result(ssl); verify != X509_V_OK) {
      reason = std::string("certificate verify failed: ") + X509_verify_cert_error_string(verify);
    }
    throw TransportError(TransportError::Kind::kTlsFailed,
                         "TLS handshake with " + host_header_ + " failed: " + reason);
  }

  std::pair<HttpResponse, bool> exchange(Connection& connection,
                                         const http::request<http::string_body>& message,
                                         std::chrono::steady_clock::time_point deadline,
                                         bool reused) {
    connection.tcp().expires_after(remaining(deadline));
    beast::error_code ec = connection.run([&](auto handler) {
      connection.with_stream(
          [&](auto& stream) { http::async_write(stream, message, std::move(handler)); });
    });
    if (ec) {
      if (reused && ec != beast::error::timeout) throw StaleConnection{ec};
      throw TransportError(TransportError::Kind::kMaybeSent,
                           "sending to " + host_header_ + " failed: " + ec.message());
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxResponseBytes);
    ec = connection.run([&](auto handler) {
      connection.with_stream([&](auto& stream) {
        http::async_read(stream, connection.buffer, parser, std::move(handler));
      });
    });
    if (ec) {
      const bool closed_before_answer =
          !parser.got_some() &&
          (ec == http::error::end_of_stream || ec == asio::error::eof ||
           ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
           ec == asio::ssl::error::stream_truncated);
      if (reused && closed_before_answer) throw StaleConnection{ec};
      // Under TLS 1.3 the server checks our certificate after the client's handshake is done:
      // its refusal arrives as an alert instead of the answer, and the request was not served.
      if (!parser.got_some() && ec.category() == asio::error::get_ssl_category()) {
        throw TransportError(TransportError::Kind::kTlsFailed,
                             "TLS with " + host_header_ + " failed: " + ec.message());
      }
      throw TransportError(TransportError::Kind::kMaybeSent,
                           "reading from " + host_header_ + " failed: " + ec.message());
    }
    http::response<http::string_body> response = parser.release();
    HttpResponse out;
    out.status = static_cast<int>(response.result_int());
    out.body = std::move(response.body());
    if (auto it = response.find(http::field::retry_after); it != response.end()) {
      out.retry_after = parse_retry_after(it->value());
    }
    return {std::move(out), response.keep_alive()};
  }

  HttpResponse finish(std::unique_ptr<Connection> connection,
                      const http::request<http::string_body>& message,
                      std::chrono::steady_clock::time_point deadline, bool reused) {
    auto [response, keep_alive] = exchange(*connection, message, deadline, reused);
    if (keep_alive) give_back(std::move(connection));
    return response;
  }

  void drop_idle() {
    std::lock_guard lock(mutex_);
    idle_.clear();
  }

  std::unique_ptr<Connection> take_idle() {
    std::lock_guard lock(mutex_);
    if (idle_.empty()) return nullptr;
    auto connection = std::move(idle_.back());
    idle_.pop_back();
    return connection;
  }

  void give_back(std::unique_ptr<Connection> connection) {
    std::lock_guard lock(mutex_);
    if (idle_.size() < max_idle_) idle_.push_back(std::move(connection));
  }

  const ServerAddress address_;
  const std::size_t max_idle_;
  const TlsContextPtr tls_;
  std::string host_header_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Connection>> idle_;
};

}  // namespace

TransportPtr make_beast_transport(ServerAddress address, std::size_t max_idle_connections,
                                  TlsContextPtr tls) {
  return std::make_unique<BeastTransport>(std::move(address), max_idle_connections, std::move(tls));
}

const char* to_string(Method method) noexcept {
  switch (method) {
    case Method::kGet:
      return "GET";
    case Method::kPost:
      return "POST";
    case Method::kDelete:
      return "DELETE";
  }
  return "GET";
}

}  // namespace dlock::client::detail
