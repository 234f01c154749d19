#include "fake_server.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <thread>

namespace dlock::client::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// Classic callback-style Beast (no coroutines: GCC 12 miscompiles Asio coroutines under TSan).
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, FakeServer::Handler& handler,
             std::function<void(FakeRequest)> record)
      : socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        handler_(handler),
        record_(std::move(record)) {}

  void read() {
    request_ = {};
    http::async_read(socket_, buffer_, request_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       if (!ec) self->answer();
                     });
  }

 private:
  void answer() {
    FakeRequest recorded{std::string(request_.method_string()), std::string(request_.target()),
                         request_.body(), std::string(request_[http::field::authorization])};
    answer_ = handler_(recorded);
    record_(std::move(recorded));
    timer_.expires_after(answer_.delay);
    timer_.async_wait([self = shared_from_this()](beast::error_code) { self->write(); });
  }

  void write() {
    response_ = {static_cast<http::status>(answer_.status), 11};
    response_.set(http::field::content_type, "application/json");
    for (const auto& [name, value] : answer_.headers) response_.set(name, value);
    response_.body() = answer_.body;
    response_.keep_alive(request_.keep_alive());
    response_.prepare_payload();
    http::async_write(socket_, response_,
                      [self = shared_from_this()](beast::error_code ec, std::size_t) {
                        if (ec || !self->request_.keep_alive() || self->answer_.close_silently) {
                          beast::error_code ignored;
                          self->socket_.shutdown(tcp::socket::shutdown_both, ignored);
                          return;
                        }
                        self->read();
                      });
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  FakeServer::Handler& handler_;
  std::function<void(FakeRequest)> record_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
  FakeResponse answer_;
};

struct FakeServer::Impl {
  explicit Impl(FakeServer& server) : owner(server) {}

  void accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec) return;
      ++owner.connections_;
      std::make_shared<Connection>(std::move(socket), owner.handler_, [this](FakeRequest r) {
        owner.record(std::move(r));
      })->read();
      accept();
    });
  }

  FakeServer& owner;
  asio::io_context io;
  tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  std::thread thread;
};

FakeServer::FakeServer(Handler handler)
    : handler_(std::move(handler)), impl_(std::make_unique<Impl>(*this)) {
  impl_->accept();
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

std::vector<FakeRequest> FakeServer::requests_to(const std::string& method,
                                                 const std::string& prefix) const {
  std::vector<FakeRequest> out;
  for (const FakeRequest& request : requests()) {
    if (request.method == method && request.target.rfind(prefix, 0) == 0) out.push_back(request);
  }
  return out;
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
