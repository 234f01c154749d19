// Fuzz target (a): the HTTP request path of dlockd without sockets. Raw bytes go through Beast's
// request parser, configured as src/server/http_server.cc configures it, and each complete
// request (up to kMaxRequests, pipelined) goes through Api::handle: the route table, the query
// and percent-decoding, the JSON body reader and the input checks, then the LockService on an
// in-memory store (tests/support/fake_store.h). Every request must be answered, with a status
// the contract knows and, for a JSON answer, a body that is valid JSON (UTF-8 included).
//
// The placeholder "@SID@" in the input is replaced by the ID of a session opened before the
// input runs (IDs are random, so the fuzzer could not guess one), so acquire, extend and release
// reach the store.

#include <boost/asio/buffer.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/json/parse.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <string>
#include <string_view>
#include <thread>

#include "core/lock_service.h"
#include "server/api.h"
#include "server/config.h"
#include "server/telemetry.h"
#include "support/fake_store.h"

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using namespace dlock;
using std::chrono::milliseconds;

constexpr int kMaxRequests = 8;
constexpr std::size_t kHeaderLimit = 16 * 1024;  // as HttpServer's parser
constexpr auto kAnswerTimeout = std::chrono::seconds(10);

const server::ServerConfig& config() {
  static const server::ServerConfig config = [] {
    server::ServerConfig c;
    c.max_wait = milliseconds(5);  // waits end quickly; the answer must still come
    c.max_body_bytes = 4096;
    c.admin_enabled = true;
    c.admin_token = "fuzz-admin";
    c.workers = 1;
    return c;
  }();
  return config;
}

server::Telemetry& telemetry() {
  static server::Telemetry telemetry = [] {
    server::set_log_level("error");
    return server::Telemetry("fake");
  }();
  return telemetry;
}

// A fresh store and service per input, so an input replays the same way alone or in a run.
class Harness {
 public:
  Harness()
      : guard_(asio::make_work_guard(io_)),
        io_thread_([this] { io_.run(); }),
        service_(store_, io_, options(), telemetry()),
        api_(service_, telemetry(), config()) {
    api_.set_ready(true);
  }
  ~Harness() {
    service_.shutdown();
    guard_.reset();
    io_.stop();
    io_thread_.join();
  }

  std::string open_session() {
    std::promise<std::string> id;
    service_.open_session("fuzz", milliseconds(60000), [&id](core::Outcome<SessionInfo> outcome) {
      id.set_value(outcome.value ? outcome.value->session_id : std::string("none"));
    });
    return id.get_future().get();
  }

  server::Response handle(server::Request&& request) {
    auto answer = std::make_shared<std::promise<server::Response>>();
    auto future = answer->get_future();
    api_.handle(std::move(request),
                [answer](server::Response response) { answer->set_value(std::move(response)); });
    if (future.wait_for(kAnswerTimeout) != std::future_status::ready) __builtin_trap();
    return future.get();
  }

 private:
  static core::ServiceOptions options() {
    core::ServiceOptions o;
    o.workers = 1;
    o.max_wait = config().max_wait;
    o.reap_interval = milliseconds(60000);
    o.retry_backoff = milliseconds(1);
    return o;
  }

  testing::FakeStore store_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  std::thread io_thread_;
  core::LockService service_;
  server::Api api_;
};

void check_answer(const server::Response& response) {
  const unsigned status = response.result_int();
  if (status < 200 || status > 599) __builtin_trap();
  const auto type = response[http::field::content_type];
  if (type.starts_with("application/json")) {
    boost::system::error_code error;
    (void)boost::json::parse(response.body(), error);
    if (error) __builtin_trap();  // an answer the client could not read (invalid UTF-8, say)
  }
}

std::string with_session(std::string_view input, const std::string& session_id) {
  std::string text(input);
  constexpr std::string_view kPlaceholder = "@SID@";
  for (auto at = text.find(kPlaceholder); at != std::string::npos;
       at = text.find(kPlaceholder, at + session_id.size())) {
    text.replace(at, kPlaceholder.size(), session_id);
  }
  return text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)telemetry();
  Harness harness;
  const std::string text = with_session(std::string_view(reinterpret_cast<const char*>(data), size),
                                        harness.open_session());
  std::string_view rest = text;
  for (int i = 0; i < kMaxRequests && !rest.empty(); ++i) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(config().max_body_bytes);
    parser.header_limit(kHeaderLimit);
    boost::beast::error_code error;
    while (!parser.is_done()) {
      const auto used = parser.put(asio::buffer(rest.data(), rest.size()), error);
      rest.remove_prefix(used);
      // need_more, or nothing taken (an empty buffer in a chunk's body): read on while bytes
      // are taken, else the input has ended, as if the peer closed the connection.
      if (error == http::error::need_more || (!error && used == 0)) {
        error = {};
        if (used > 0) continue;
        parser.put_eof(error);
        break;
      }
      if (error) break;
    }
    // A parse error closes the connection (HttpServer answers 413 or 400 first): nothing more.
    if (error || !parser.is_done()) break;
    auto request = parser.release();
    const bool keep_alive = request.keep_alive();
    const auto response = harness.handle(std::move(request));
    check_answer(response);
    if (!keep_alive || !response.keep_alive()) break;
  }
  return 0;
}
