#pragma once

// The keep-alive HTTP/1.1 connection every HTTP path of dlock-bench drives (http_load.cc,
// sessions_scale.cc): callbacks on one io_context, no thread per connection.

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "http_load.h"

namespace dlock::bench::http_detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// The first few unexpected answers, to stderr: a benchmark's errors must be explainable.
inline void report_unexpected(const char* what, int status, const std::string& body) {
  static int reported = 0;
  if (reported++ < 5) std::fprintf(stderr, "[dlock-bench] %s: %d %s\n", what, status, body.c_str());
}

inline std::string json_string_field(const std::string& body, const std::string& name) {
  const std::string needle = "\"" + name + "\":\"";
  const auto at = body.find(needle);
  if (at == std::string::npos) return "";
  const auto start = at + needle.size();
  return body.substr(start, body.find('"', start) - start);
}

inline std::string json_number_field(const std::string& body, const std::string& name) {
  const std::string needle = "\"" + name + "\":";
  const auto at = body.find(needle);
  if (at == std::string::npos) return "";
  const auto start = at + needle.size();
  auto end = start;
  while (end < body.size() && body[end] >= '0' && body[end] <= '9') ++end;
  return body.substr(start, end - start);
}

// One keep-alive connection: send a request, read the response, hand it to `done`.
class Connection {
 public:
  using Done = std::function<void(int status, const std::string& body)>;

  Connection(asio::io_context& io, const HttpTarget& target) {
    tcp::socket socket(io);
    socket.connect({asio::ip::make_address(target.host), target.port});
    socket.set_option(tcp::no_delay(true));
    if (target.tls) {
      // The chain is verified against the bench's CA; the name is not checked (the bench's
      // certificate is made for 127.0.0.1 and localhost, where dlockd listens).
      tls_.emplace(std::move(socket), *target.tls);
      tls_->handshake(asio::ssl::stream_base::client);
    } else {
      plain_.emplace(std::move(socket));
    }
    host_ = target.host + ":" + std::to_string(target.port);
    if (!target.token.empty()) authorization_ = "Bearer " + target.token;
  }

  void send(http::verb verb, std::string target, std::string body, Done done) {
    request_ = {};
    request_.method(verb);
    request_.target(target);
    request_.version(11);
    request_.keep_alive(true);
    request_.set(http::field::host, host_);
    if (!authorization_.empty()) request_.set(http::field::authorization, authorization_);
    if (!body.empty()) request_.set(http::field::content_type, "application/json");
    request_.body() = std::move(body);
    request_.prepare_payload();
    done_ = std::move(done);
    if (tls_) return exchange(*tls_);
    exchange(*plain_);
  }

  std::string session_id;
  std::string owner;

 private:
  // Writes request_, reads response_, calls done_.
  template <class Stream>
  void exchange(Stream& stream) {
    http::async_write(stream, request_, [this, &stream](beast::error_code ec, std::size_t) {
      if (ec) return fail(ec);
      response_ = {};
      http::async_read(stream, buffer_, response_, [this](beast::error_code ec2, std::size_t) {
        if (ec2) return fail(ec2);
        auto done = std::move(done_);
        done(static_cast<int>(response_.result_int()), response_.body());
      });
    });
  }

  void fail(beast::error_code ec) {
    auto done = std::move(done_);
    if (done) done(-1, ec.message());
  }

  std::optional<tcp::socket> plain_;
  std::optional<beast::ssl_stream<tcp::socket>> tls_;  // as dlockd: coalesced writes
  std::string host_;
  std::string authorization_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
  Done done_;
};

// Connection i goes to targets[i % targets.size()].
inline std::vector<std::unique_ptr<Connection>> open_connections(
    asio::io_context& io, const std::vector<HttpTarget>& targets, int count) {
  std::vector<std::unique_ptr<Connection>> connections;
  for (int i = 0; i < count; ++i) {
    connections.push_back(
        std::make_unique<Connection>(io, targets[static_cast<std::size_t>(i) % targets.size()]));
  }
  return connections;
}

}  // namespace dlock::bench::http_detail
