#include "fake_server.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <thread>

namespace dlock::client::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct FakeServer::Impl {
  explicit Impl(FakeServer& server) : owner(server) {}

  asio::awaitable<void> serve(tcp::socket socket) {
    beast::flat_buffer buffer;
    for (;;) {
      http::request<http::string_body> request;
      auto [read_error, read_bytes] =
          co_await http::async_read(socket, buffer, request, asio::as_tuple(asio::use_awaitable));
      if (read_error) co_return;
      FakeRequest recorded{std::string(request.method_string()), std::string(request.target()),
                           request.body(), std::string(request[http::field::authorization])};
      FakeResponse answer = owner.handler_(recorded);
      owner.record(std::move(recorded));
      if (answer.delay.count() > 0) {
        asio::steady_timer timer(socket.get_executor(), answer.delay);
        co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      }
      http::response<http::string_body> response{static_cast<http::status>(answer.status), 11};
      response.set(http::field::content_type, "application/json");
      for (const auto& [name, value] : answer.headers) response.set(name, value);
      response.body() = answer.body;
      response.keep_alive(request.keep_alive());
      response.prepare_payload();
      auto [write_error, write_bytes] =
          co_await http::async_write(socket, response, asio::as_tuple(asio::use_awaitable));
      if (write_error || !request.keep_alive() || answer.close_silently) co_return;
    }
  }

  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [error, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
      if (error) co_return;
      ++owner.connections_;
      asio::co_spawn(io, serve(std::move(socket)), asio::detached);
    }
  }

  FakeServer& owner;
  asio::io_context io;
  tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  std::thread thread;
};

FakeServer::FakeServer(Handler handler)
    : handler_(std::move(handler)), impl_(std::make_unique<Impl>(*this)) {
  asio::co_spawn(impl_->io, impl_->accept_loop(), asio::detached);
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

FakeServer::~FakeServer() {
  impl_->io.stop();
  impl_->thread.join();
}

std::string FakeServer::url() const {
  return "http://127.0.0.1:" + std::to_string(impl_->acceptor.local_endpoint().port());
}

void FakeServer::record(FakeRequest request) {
  {
    std::lock_guard lock(mutex_);
    requests_.push_back(std::move(request));
  }
  changed_.notify_all();
}

std::vector<FakeRequest> FakeServer::requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

bool FakeServer::wait_for_requests(const std::function<bool(const FakeRequest&)>& match,
                                   std::size_t count, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] {
    std::size_t seen = 0;
    for (const FakeRequest& request : requests_) seen += match(request) ? 1 : 0;
    return seen >= count;
  });
}

std::string error_body(const std::string& code, const std::string& message,
                       const std::string& field) {
  std::string body = R"({"error":{"code":")" + code + R"(","message":")" + message + '"';
  if (!field.empty()) body += R"(,"field":")" + field + '"';
  return body + "}}";
}

}  // namespace dlock::client::testing
