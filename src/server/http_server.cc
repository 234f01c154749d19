// The HTTP front end (http_server.h). Over ~500 lines: the Connection class template —
// reading, watching a pending request's connection (ADR-0007), writing — reads best whole.

#include "server/http_server.h"

#include <boost/algorithm/string/predicate.hpp>
#include <boost/algorithm/string/trim.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream_base.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <csignal>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "dlock/errors.h"
#include "server/error_mapping.h"
#include "server/telemetry.h"
#include "server/tls_context.h"

namespace dlock::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr std::size_t kMaxHeaderBytes = 16 * 1024;  // request line and headers
constexpr std::size_t kMaxTargetBytes = 8 * 1024;
// Connections accepted beyond max_connections for health probes and scrapes only (/healthz,
// /readyz, /metrics): a server whose slots are all taken (long polls, a flood) still answers
// its probes; any other request on such a connection is 503 and the connection closed.
constexpr std::size_t kProbeConnections = 16;
// Answers up to this size are always written; larger ones count against max_unsent_bytes.
constexpr std::size_t kLargeAnswerBytes = 64 * 1024;

struct HttpServer::Shared {
  Shared(ServerCounters& counters, ProbeRoutes probes)
      : counters(counters), probes(std::move(probes)) {}
  ServerCounters& counters;
  const ProbeRoutes probes;
  std::size_t max_body_bytes;
  milliseconds header_timeout, idle_timeout, write_timeout, stall_timeout;
  std::size_t max_connections;
  std::size_t max_unsent_bytes;
  Handler handler;
  std::shared_ptr<TlsContexts> tls;  // null: plain HTTP
  std::atomic<std::size_t> in_flight{0};
  std::atomic<std::size_t> open{0};
  // Last time a request was answered, or the in-flight count (waiting acquires aside) left 0.
  std::atomic<steady_clock::rep> last_progress{steady_clock::now().time_since_epoch().count()};

  std::size_t busy() const {  // in flight and not a waiting acquire
    const auto waiting = counters.waiters.load();
    const auto flying = in_flight.load();
    return waiting > 0 && static_cast<std::size_t>(waiting) >= flying
               ? 0
               : flying - static_cast<std::size_t>(std::max<std::int64_t>(waiting, 0));
  }
  void progress() { last_progress = steady_clock::now().time_since_epoch().count(); }
  // Takes `bytes` of the server-wide budget of unsent answers (server.max.unsent.bytes); false,
  // taking nothing, when they do not fit. Small answers always fit (they may overdraw it: their
  // total is bounded by max_connections x kLargeAnswerBytes).
  bool reserve_unsent(std::size_t bytes) {
    auto& unsent = counters.unsent_bytes;
    auto current = unsent.load();
    do {
      if (bytes > kLargeAnswerBytes &&
          static_cast<std::size_t>(std::max<std::int64_t>(current, 0)) + bytes > max_unsent_bytes) {
        return false;
      }
    } while (!unsent.compare_exchange_weak(current, current + static_cast<std::int64_t>(bytes)));
    return true;
  }
  void release_unsent(std::size_t bytes) {
    counters.unsent_bytes -= static_cast<std::int64_t>(bytes);
  }
  // Requests other than waiting acquires in flight, none answered for stall_timeout.
  bool wedged() const {
    const auto idle = steady_clock::now() -
                      steady_clock::time_point(steady_clock::duration(last_progress.load()));
    return busy() > 0 && idle >= stall_timeout;
  }
};

namespace {

using Shared = HttpServer::Shared;

using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

std::string address_of(const tcp::socket& socket) {
  boost::system::error_code error;
  const auto endpoint = socket.remote_endpoint(error);
  if (error) return {};
  return endpoint.address().to_string();
}

// One client connection, plain (PlainStream) or TLS (TlsStream, over its own context).
template <class Stream>
class Connection : public std::enable_shared_from_this<Connection<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  Connection(tcp::socket socket, std::shared_ptr<Shared> shared, TlsContextPtr tls = nullptr,
             bool probes_only = false)
      : probes_only_(probes_only),
        tls_(std::move(tls)),
        peer_{
            .address = address_of(socket), .client_cert_cn = std::nullopt, .cancellation = nullptr},
        stream_(make_stream(std::move(socket), tls_.get())),
        shared_(std::move(shared)),
        // Read-ahead (pipelined bytes) is bounded: one request's header and body at most.
        buffer_(kMaxHeaderBytes + shared_->max_body_bytes + 4096) {
    ++shared_->open;
    ++shared_->counters.connections_open;
  }
  ~Connection() {
    --shared_->open;
    --shared_->counters.connections_open;
  }

  void start() {
    asio::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if constexpr (kTls) {
        self->handshake();
      } else {
        self->read_header();
      }
    });
  }

 private:
  static Stream make_stream(tcp::socket socket, asio::ssl::context* tls) {
    if constexpr (kTls) {
      return Stream(std::move(socket), *tls);
    } else {
      return Stream(std::move(socket));
    }
  }

  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

  // The handshake and then the first request header share one header_timeout (a slow
  // handshake is a slowloris too).
  void handshake() {
    lowest().expires_after(shared_->header_timeout);
    stream_.async_handshake(
        asio::ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code error) {
          if (error) return self->on_handshake_error(error);
          self->peer_.client_cert_cn = verified_peer_common_name(self->stream_.native_handle());
          log_event("debug", "tls_handshake",
                    {{"peer", self->peer_.address},
                     {"protocol", SSL_get_version(self->stream_.native_handle())},
                     {"client_cert_cn", self->peer_.client_cert_cn.value_or("")}});
          self->read_header(/*keep_deadline=*/true);
        });
  }

  void on_handshake_error(beast::error_code error) {
    if (error == beast::error::timeout) ++shared_->counters.connections_timed_out;
    log_event("debug", "tls_handshake_failed",
              {{"peer", peer_.address}, {"message", error.message()}});
  }

  // No more to send: a TCP FIN, after TLS's close_notify (bounded by write_timeout).
  void close_send() {
    if constexpr (kTls) {
      lowest().expires_after(shared_->write_timeout);
      stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {});
    } else {
      beast::error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    }
  }

  // Keep-alive: wait up to idle_timeout for the next request's first byte.
  void next_request() {
    if (buffer_.size() > 0) return read_header();  // pipelined: already here
    lowest().expires_after(shared_->idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096), [self = this->shared_from_this()](
                                                       beast::error_code error, std::size_t n) {
      if (error) return self->on_error(error);
      self->buffer_.commit(n);
      self->read_header();
    });
  }

  void read_header(bool keep_deadline = false) {
    parser_.emplace();
    parser_->body_limit(shared_->max_body_bytes);
    parser_->header_limit(kMaxHeaderBytes);
    if (!keep_deadline) lowest().expires_after(shared_->header_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](
                                beast::error_code error, std::size_t) { self->on_header(error); });
  }

  void on_header(beast::error_code error) {
    if (error) return on_error(error);
    const auto& request = parser_->get();
    if (request.target().size() > kMaxTargetBytes) {
      return refuse(414,
                    "request target longer than " + std::to_string(kMaxTargetBytes) + " bytes");
    }
    if (const auto coding = request[http::field::transfer_encoding]; !coding.empty()) {
      std::string text(coding);
      boost::algorithm::trim(text);
      if (!boost::algorithm::iequals(text, "chunked")) {
        // Read as if it had no body, the body would be taken for the next request.
        return refuse(400, "Transfer-Encoding '" + text + "' is not supported (only chunked)");
      }
    }
    if (const auto expect = request[http::field::expect]; !expect.empty()) {
      if (!boost::algorithm::iequals(expect, "100-continue")) {
        return refuse(417, "unsupported expectation '" + std::string(expect) + "'");
      }
      const auto length = parser_->content_length();
      if (length && *length > shared_->max_body_bytes) return too_large();
      if (!parser_->is_done()) return send_continue();
    }
    read_body();
  }

  void send_continue() {
    static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
    lowest().expires_after(shared_->write_timeout);
    asio::async_write(stream_, asio::buffer(kContinue, sizeof(kContinue) - 1),
                      [self = this->shared_from_this()](beast::error_code error, std::size_t) {
                        if (error) return self->on_error(error);
                        self->read_body();
                      });
  }

  void read_body() {
    if (parser_->is_done()) return on_request();
    lowest().expires_after(shared_->header_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code error, std::size_t) {
                       if (error) return self->on_error(error);
                       self->on_request();
                     });
  }

  void on_error(beast::error_code error) {
    if (error == http::error::body_limit) return too_large();
    if (error == http::error::header_limit) {
      return refuse(431,
                    "request header larger than " + std::to_string(kMaxHeaderBytes) + " bytes");
    }
    if (error == beast::error::timeout) {
      ++shared_->counters.connections_timed_out;
      return;  // tcp_stream closed the socket
    }
    if (error == http::error::end_of_stream) return close_send();
    if (error.category() == http::make_error_code(http::error::bad_target).category()) {
      // Any other parse error of the request itself (bad target, method, headers, chunking).
      return refuse(400, "malformed HTTP request: " + error.message());
    }
    // connection reset and friends: nothing to answer
  }

  void too_large() {
    auto response = error_response(
        413, "payload_too_large",
        "request body larger than " + std::to_string(shared_->max_body_bytes) + " bytes");
    response.keep_alive(false);  // the rest of the body is still on the wire
    write(std::move(response), false);
  }

  // A request this server will not read on: answered, then the connection is closed.
  void refuse(unsigned status, const std::string& message) {
    auto response =
        error_response(status, to_string(ErrorCode::kInvalidArgument), message, "request");
    response.keep_alive(false);
    write(std::move(response), false);
  }

  void on_request() {
    Request request = parser_->release();
    const bool head = request.method() == http::verb::head;
    // Health probes and scrapes: never refused for want of a connection slot, and answering
    // them is not progress (it would hide a wedge from the readiness probe).
    const bool probe = shared_->probes.contains(request.target());
    if (probes_only_ && !probe) {
      // A connection of the probes' reserve: anything else waits for a regular slot.
      ++shared_->counters.connections_rejected;
      auto response =
          error_response(503, to_string(ErrorCode::kUnavailable), "too many open connections");
      response.set(http::field::retry_after, "1");
      response.keep_alive(false);
      return write(std::move(response), head);
    }
    const bool keep_alive = request.keep_alive() && !probes_only_;
    if (request.target() == shared_->probes.readiness && shared_->wedged()) {
      auto response = error_response(503, to_string(ErrorCode::kUnavailable),
                                     "wedged: requests in flight and none answered for " +
                                         std::to_string(shared_->stall_timeout.count()) + " ms");
      response.keep_alive(keep_alive);
      return write(std::move(response), head);
    }
    // dlock_wedged (C4): what /readyz would answer, as of this scrape.
    if (request.target() == shared_->probes.metrics) shared_->counters.wedged = shared_->wedged();
    lowest().expires_never();  // a waiting acquire may legitimately take minutes
    if (shared_->busy() == 0) shared_->progress();
    ++shared_->in_flight;
    auto self = this->shared_from_this();
    pending_ = true;
    // The handler asks for the connection to be watched by arming the cancellation (for this
    // request only: a late ask is ignored once the next request is being handled).
    cancellation_ =
        std::make_shared<core::Cancellation>([weak = this->weak_from_this(), number = ++requests_] {
          if (const auto alive = weak.lock()) {
            asio::post(alive->stream_.get_executor(), [alive, number] {
              if (number == alive->requests_) alive->watch_peer();
            });
          }
        });
    Peer peer = peer_;
    peer.cancellation = cancellation_;
    shared_->handler(std::move(request), peer, [self, keep_alive, head, probe](Response response) {
      asio::post(self->stream_.get_executor(),
                 [self, keep_alive, head, probe, response = std::move(response)]() mutable {
                   --self->shared_->in_flight;
                   if (!probe) self->shared_->progress();
                   response.keep_alive(keep_alive && response.keep_alive());
                   self->answer(std::move(response), head);
                 });
    });
  }

  // --- watching a pending request's connection (ADR-0007 "A wait belongs to its connection")

  // A read while the request is pending: its EOF or error means the peer has gone; its bytes
  // are the next pipelined request, kept in buffer_ (the stream takes one read at a time, so
  // the answer waits for this read to end, see answer()).
  void watch_peer() {
    if (!pending_ || watching_ || peer_gone_) return;
    const auto room = buffer_.max_size() - buffer_.size();
    if (room == 0) return;  // read-ahead is full: no longer watched
    watching_ = true;
    stream_.async_read_some(
        buffer_.prepare(std::min<std::size_t>(room, 4096)),
        [self = this->shared_from_this()](beast::error_code error, std::size_t n) {
          self->on_watched(error, n);
        });
  }

  void on_watched(beast::error_code error, std::size_t n) {
    watching_ = false;
    if (!error) {
      buffer_.commit(n);
    } else if (error != asio::error::operation_aborted) {
      peer_gone_ = true;  // EOF, reset, TLS close: nobody will read an answer
    }
    if (answer_) {
      auto [response, head] = std::move(*answer_);
      answer_.reset();
      return answer(std::move(response), head);
    }
    if (!peer_gone_) return watch_peer();
    if (pending_) cancellation_->cancel();  // the handler's answer comes, and is not written
  }

  // The handler's answer. Not written to a peer already gone: its cancellation undoes it.
  void answer(Response response, bool head) {
    pending_ = false;
    if (peer_gone_) return undelivered();
    if (watching_) {
      answer_.emplace(std::move(response), head);
      lowest().cancel();  // ends the watch read; on_watched() then comes back here
      return;
    }
    write(std::move(response), head);
  }

  void undelivered() {
    if (auto cancellation = std::exchange(cancellation_, nullptr)) cancellation->cancel();
  }

  void write(Response response, bool head) {
    // HEAD: the headers a GET would have (Content-Length included), no body.
    if (head) response.body().clear();
    std::size_t unsent = response.body().size();
    if (!shared_->reserve_unsent(unsent)) {
      // Clients that do not take their answers hold the budget: shed this one (it was built,
      // and goes now), keep the connection (ADR-0007: undelivered, so a grant is given back).
      ++shared_->counters.answers_shed;
      const bool keep_alive = response.keep_alive();
      response = error_response(503, to_string(ErrorCode::kUnavailable),
                                "too many answers not yet taken by their clients "
                                "(server.max.unsent.bytes); retry");
      response.set(http::field::retry_after, "1");
      response.keep_alive(keep_alive);
      response.prepare_payload();
      undelivered();
      unsent = response.body().size();
      shared_->reserve_unsent(unsent);
    }
    auto message = std::make_shared<Response>(std::move(response));
    lowest().expires_after(shared_->write_timeout);  // a client that stops reading is dropped
    http::async_write(
        stream_, *message,
        [self = this->shared_from_this(), message, unsent](beast::error_code error, std::size_t) {
          self->shared_->release_unsent(unsent);
          if (error) {
            if (error == beast::error::timeout) {
              ++self->shared_->counters.connections_timed_out;
            }
            return self->undelivered();
          }
          if (auto cancellation = std::exchange(self->cancellation_, nullptr)) {
            cancellation->settle();
          }
          if (!message->keep_alive()) return self->close_send();
          self->next_request();
        });
  }

  const bool probes_only_;  // accepted beyond max_connections: probes only (kProbeConnections)
  TlsContextPtr tls_;       // the context this connection started with (null: plain)
  Peer peer_;
  Stream stream_;
  std::shared_ptr<Shared> shared_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  // The request being answered (null between requests, and for answers written by this class).
  core::CancellationPtr cancellation_;
  std::uint64_t requests_ = 0;                       // handed to the handler so far
  bool pending_ = false;                             // its handler has not answered yet
  bool watching_ = false;                            // a watch_peer() read is outstanding
  bool peer_gone_ = false;                           // a watch read ended with EOF or an error
  std::optional<std::pair<Response, bool>> answer_;  // (response, head) waiting for that read
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

// Over server.max.connections: a canned 503, written without waiting, then closed. With TLS
// only closed: a plain-text answer would mean nothing to a TLS client, and a handshake is the
// work being shed.
void turn_away(tcp::socket socket, bool tls) {
  // Built once, the wire code from the one table (src/api/errors.cc).
  static const std::string kBusy = [] {
    const std::string body = std::string(R"({"error":{"code":")") +
                             to_string(ErrorCode::kUnavailable) +
                             R"(","message":"too many open connections"}})";
    return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
           "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  }();
  boost::system::error_code ignored;
  socket.non_blocking(true, ignored);
  if (!tls) socket.send(asio::buffer(kBusy), 0, ignored);
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
}

}  // namespace

HttpServer::HttpServer(asio::io_context& io, const std::string& listen, const ServerConfig& config,
                       ServerCounters& counters, ProbeRoutes probes, Handler handler)
    : io_(io),
      acceptor_(asio::make_strand(io)),
      backoff_timer_(acceptor_.get_executor()),
      shared_(std::make_shared<Shared>(counters, std::move(probes))) {
  shared_->max_body_bytes = config.max_body_bytes;
  shared_->header_timeout = config.header_timeout;
  shared_->idle_timeout = config.idle_timeout;
  shared_->write_timeout = config.write_timeout;
  shared_->stall_timeout =
      std::max<milliseconds>(std::chrono::seconds(10), 2 * config.store.call_timeout);
  shared_->max_connections = config.max_connections;
  shared_->max_unsent_bytes = config.max_unsent_bytes;
  shared_->handler = std::move(handler);
  if (config.tls_enabled()) {
    shared_->tls = std::make_shared<TlsContexts>(config);
    sighup_.emplace(acceptor_.get_executor(), SIGHUP);
  }
  const auto endpoint = parse_endpoint(listen);
  boost::system::error_code error;
  acceptor_.open(endpoint.protocol(), error);
  if (!error) acceptor_.set_option(asio::socket_base::reuse_address(true), error);
  if (!error) acceptor_.bind(endpoint, error);
  if (!error) acceptor_.listen(asio::socket_base::max_listen_connections, error);
  if (error) throw UnavailableError("cannot listen on " + listen + ": " + error.message());
}

HttpServer::~HttpServer() = default;

tcp::endpoint HttpServer::local_endpoint() const { return acceptor_.local_endpoint(); }

std::size_t HttpServer::in_flight() const { return shared_->in_flight; }

void HttpServer::start() {
  if (sighup_) watch_sighup();
  accept();
}

bool HttpServer::reload_tls() { return shared_->tls && shared_->tls->reload(); }

void HttpServer::watch_sighup() {
  sighup_->async_wait([this](const boost::system::error_code& error, int) {
    if (error) return;
    reload_tls();
    watch_sighup();
  });
}

void HttpServer::stop_accepting() {
  asio::post(acceptor_.get_executor(), [this] {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    backoff_timer_.cancel();
    if (sighup_) sighup_->cancel(ignored);
  });
}

void HttpServer::accept() {
  acceptor_.async_accept(asio::make_strand(io_), [this](beast::error_code error,
                                                        tcp::socket socket) {
    if (error == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (error) return on_accept_error(error);
    backoff_ = milliseconds(0);
    const bool probes_only = shared_->open >= shared_->max_connections;
    if (shared_->open >= shared_->max_connections + kProbeConnections) {
      ++shared_->counters.connections_rejected;
      turn_away(std::move(socket), shared_->tls != nullptr);
    } else if (shared_->tls) {
      socket.set_option(tcp::no_delay(true), error);
      std::make_shared<Connection<TlsStream>>(std::move(socket), shared_, shared_->tls->current(),
                                              probes_only)
          ->start();
    } else {
      socket.set_option(tcp::no_delay(true), error);
      std::make_shared<Connection<PlainStream>>(std::move(socket), shared_, nullptr, probes_only)
          ->start();
    }
    accept();
  });
}

// Out of descriptors (EMFILE, ENFILE), buffers or memory: retrying at once would spin a core
// while the condition lasts, so back off 50 ms doubling to 500 ms; count every error and log at
// most once per 10 s with the number since the last line.
void HttpServer::on_accept_error(const boost::system::error_code& error) {
  ++shared_->counters.accept_errors;
  ++errors_since_log_;
  const auto now = steady_clock::now();
  if (now - last_error_log_ >= std::chrono::seconds(10)) {
    log_event("error", "accept_error",
              {{"message", error.message()},
               {"errors_since_last_log", errors_since_log_},
               {"open_connections", shared_->open.load()}});
    last_error_log_ = now;
    errors_since_log_ = 0;
  }
  if (error == asio::error::connection_aborted) return accept();  // that client gave up
  backoff_ = std::clamp(backoff_ * 2, milliseconds(50), milliseconds(500));
  backoff_timer_.expires_after(backoff_);
  backoff_timer_.async_wait([this](const boost::system::error_code& waited) {
    if (waited || !acceptor_.is_open()) return;
    accept();
  });
}

}  // namespace dlock::server
