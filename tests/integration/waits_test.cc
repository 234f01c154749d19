// A waiting acquire belongs to its connection (ADR-0007 "A wait belongs to its connection", C3)
// against a real dlockd on every backend: a waiter whose client closes or resets its socket
// leaves the queue at once (the dlock_waiters gauge drops, its place under server.max.waiters
// is free, the next waiter is handed the lock at the release, not at the gone waiter's TTL); a
// grant whose answer cannot be written is given back; a request pipelined behind a waiting
// acquire is not taken for a close.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "auth/crypto.h"
#include "auth/permissions.h"
#include "auth/tokens_file.h"
#include "support/dlockd_backends.h"
#include "support/dlockd_process.h"
#include "support/raw_socket.h"
#include "support/subprocess.h"
#include "support/test_certs.h"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
namespace json = boost::json;

std::string acquire_body(const std::string& session, int wait_ms) {
  return json::serialize(
      json::object{{"session_id", session}, {"ttl_ms", 30000}, {"wait_ms", wait_ms}});
}

// The raw bytes of a waiting acquire (for a RawSocket).
std::string acquire_request(const std::string& key, const std::string& session, int wait_ms,
                            const std::string& extra_headers = "") {
  const auto body = acquire_body(session, wait_ms);
  return "POST /v1/locks/" + key +
         "/acquire HTTP/1.1\r\nHost: t\r\nContent-Type: " + "application/json\r\n" + extra_headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

class WaitsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void start(std::vector<std::string> args = {}) {
    DlockdOptions options = dlockd_options(GetParam(), "dlock_waits");
    options.extra_args = std::move(args);
    dlockd_ = std::make_unique<DlockdProcess>(options);
    key_ = "waits-" + std::to_string(::getpid()) + "-" + std::to_string(++keys_);
  }

  const std::string& address() const { return dlockd_->address(); }

  std::string open_session(const std::string& owner) {
    const auto result = http_call(address(), "POST", "/v1/sessions",
                                  json::serialize(json::object{{"owner", owner}}));
    EXPECT_EQ(result.status, 201) << result.body;
    return result.status == 201 ? std::string(result.json.at("session_id").as_string()) : "";
  }

  HttpResult acquire(const std::string& session, int wait_ms = 0) {
    return http_call(address(), "POST", "/v1/locks/" + key_ + "/acquire",
                     acquire_body(session, wait_ms));
  }

  int release(const std::string& session, const HttpResult& grant) {
    const auto token = std::to_string(grant.json.at("fencing_token").to_number<std::uint64_t>());
    return http_call(address(), "DELETE",
                     "/v1/locks/" + key_ + "?session_id=" + session + "&fencing_token=" + token)
        .status;
  }

  // The key's holder's session, or "" when it is free.
  std::string holder() {
    const auto result = http_call(address(), "GET", "/v1/locks/" + key_);
    if (result.status != 200) return "";
    const auto* owner = result.json.as_object().if_contains("session_id");
    return owner ? std::string(owner->as_string()) : "?";
  }

  bool waiters_become(int value, std::chrono::milliseconds within = 3s) {
    const std::string line =
        "dlock_waiters{backend=\"" + GetParam() + "\"} " + std::to_string(value) + "\n";
    return wait_for(
        [&] {
          return http_call(address(), "GET", "/metrics").body.find(line) != std::string::npos;
        },
        within);
  }

  // dlockd started (with `args`), session a_ holding the key (grant_), and session b_ waiting
  // for it on a socket of its own (b_socket_: a 30 s acquire, then `trailer`).
  void a_holds_b_waits(std::vector<std::string> args = {}, const std::string& trailer = "") {
    start(std::move(args));
    a_ = open_session("a");
    b_ = open_session("b");
    grant_ = acquire(a_);
    ASSERT_EQ(grant_.status, 200) << grant_.body;
    b_socket_ = std::make_unique<RawSocket>(address());
    ASSERT_TRUE(b_socket_->send(acquire_request(key_, b_, 30000) + trailer));
    ASSERT_TRUE(waiters_become(1));
  }
  int release_a() { return release(a_, grant_); }

  std::unique_ptr<DlockdProcess> dlockd_;
  std::string key_;
  static inline int keys_ = 0;
  std::string a_, b_;
  HttpResult grant_;
  std::unique_ptr<RawSocket> b_socket_;
};

// (a) and (c): B closes its socket while it waits behind A; C, queued behind B, is handed the
// lock at A's release, and the gauge falls back to 0.
TEST_P(WaitsTest, ClosedWaiterLeavesAtOnceAndTheNextWaiterIsHandedTheLock) {
  ASSERT_NO_FATAL_FAILURE(a_holds_b_waits());
  const auto c = open_session("c");
  HttpResult c_answer;
  std::atomic<bool> c_answered{false};
  std::thread c_waits([&] {
    c_answer = acquire(c, 20000);
    c_answered = true;
  });
  ASSERT_TRUE(waiters_become(2));
  b_socket_->close();
  EXPECT_TRUE(waiters_become(1, 2s)) << "the closed waiter stayed queued";
  ASSERT_EQ(release_a(), 204);
  EXPECT_TRUE(wait_for([&] { return c_answered.load(); }, 3s))
      << "the waiter behind the closed one was not handed the lock at the release";
  c_waits.join();
  EXPECT_EQ(c_answer.status, 200) << c_answer.body;
  EXPECT_EQ(holder(), c);
  EXPECT_TRUE(waiters_become(0));
}

// (a) without a next waiter: the release frees the key, nobody holds it.
TEST_P(WaitsTest, ResetWaiterIsNeverGrantedAndTheReleaseFreesTheKey) {
  ASSERT_NO_FATAL_FAILURE(a_holds_b_waits());
  b_socket_->reset();
  EXPECT_TRUE(waiters_become(0, 2s)) << "the reset waiter stayed queued";
  ASSERT_EQ(release_a(), 204);
  EXPECT_EQ(holder(), "") << "the key went to the waiter that had gone";
}

// (b): with server.max.waiters=1, the place a gone waiter held is free for a new waiter.
TEST_P(WaitsTest, GoneWaitersPlaceUnderMaxWaitersIsFree) {
  ASSERT_NO_FATAL_FAILURE(a_holds_b_waits({"--server-max-waiters", "1"}));
  EXPECT_EQ(acquire(open_session("d"), 5000).status, 429) << "max.waiters is 1";
  b_socket_->reset();
  ASSERT_TRUE(waiters_become(0, 2s));
  const auto e = open_session("e");
  RawSocket e_socket(address());
  ASSERT_TRUE(e_socket.send(acquire_request(key_, e, 30000)));
  ASSERT_TRUE(waiters_become(1)) << "a new waiter was not accepted";
  ASSERT_EQ(release_a(), 204);
  const auto answer = e_socket.receive("}");
  EXPECT_NE(answer.find("HTTP/1.1 200"), std::string::npos) << answer;
  EXPECT_EQ(holder(), e);
}

// A request pipelined behind a waiting acquire is the next request, not a close: both are
// answered, in order, on the same connection. Sent once the acquire waits, so that it is the
// watching read that receives it.
TEST_P(WaitsTest, RequestPipelinedBehindAWaitIsAnsweredAfterIt) {
  ASSERT_NO_FATAL_FAILURE(a_holds_b_waits());
  ASSERT_TRUE(b_socket_->send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
  EXPECT_FALSE(waiters_become(0, 300ms)) << "the pipelined request cancelled the wait";
  ASSERT_EQ(release_a(), 204);
  const auto answers = b_socket_->receive("\"status\"");
  const auto granted_at = answers.find("HTTP/1.1 200");
  ASSERT_NE(granted_at, std::string::npos) << answers;
  EXPECT_NE(answers.find("fencing_token"), std::string::npos) << answers;
  EXPECT_NE(answers.find("HTTP/1.1 200", granted_at + 1), std::string::npos) << answers;
  EXPECT_EQ(holder(), b_);
}

// A grant whose answer cannot be written is given back at once, not held until its TTL. The
// waiter pipelines more than the read-ahead bound (so the connection is no longer watched, as
// after a burst of pipelined requests) and then resets: only the failed write tells.
TEST_P(WaitsTest, GrantThatCannotBeWrittenIsGivenBack) {
  // Read-ahead: 16 KiB of header + 1 KiB of body + 4 KiB.
  ASSERT_NO_FATAL_FAILURE(
      a_holds_b_waits({"--server-max-body", "1024"}, std::string(32 * 1024, 'x')));
  b_socket_->reset();
  EXPECT_FALSE(waiters_become(0, 300ms)) << "the reset was seen: this test needs it unseen";
  ASSERT_EQ(release_a(), 204);
  EXPECT_TRUE(wait_for([&] { return holder().empty(); }, 3s))
      << "the undelivered grant is still held (its TTL is 30 s)";
}

INSTANTIATE_TEST_SUITE_P(Backends, WaitsTest, ::testing::ValuesIn(dlockd_backends()),
                         [](const auto& info) { return info.param; });

// With authentication, a gone waiter's place under auth.max.waiters.per.principal is free too
// (contract C6; one backend: the count is the server's).
TEST(WaitsWithAuth, GoneWaitersPlaceUnderItsPrincipalsQuotaIsFree) {
  char pattern[] = "/tmp/dlock-waits-auth-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  const auto token = auth::random_token();
  std::ofstream(dir + "/tokens") << auth::tokens_file_line("alice", token,
                                                           auth::parse_permissions("lock:*"))
                                 << "\n";
  DlockdOptions options;
  options.dir = dir;
  options.extra_args = {"--auth-tokens-file", dir + "/tokens", "--auth-max-waiters-per-principal",
                        "1"};
  DlockdProcess dlockd(options);
  const std::map<std::string, std::string> bearer = {{"Authorization", "Bearer " + token}};
  const auto call = [&](const std::string& method, const std::string& target,
                        const std::string& body = "") {
    return http_call(dlockd.address(), method, target, body, bearer);
  };
  const auto session = [&] {
    return std::string(
        call("POST", "/v1/sessions", R"({"owner":"app"})").json.at("session_id").as_string());
  };
  const auto holder = session();
  const auto waiter = session();
  ASSERT_EQ(call("POST", "/v1/locks/q/acquire", acquire_body(holder, 0)).status, 200);
  RawSocket b(dlockd.address());
  ASSERT_TRUE(
      b.send(acquire_request("q", waiter, 30000, "Authorization: Bearer " + token + "\r\n")));
  const auto waiters = [&](const std::string& value) {
    return wait_for(
        [&] {
          return http_call(dlockd.address(), "GET", "/metrics")
                     .body.find("dlock_waiters{backend=\"sqlite\"} " + value + "\n") !=
                 std::string::npos;
        },
        3s);
  };
  ASSERT_TRUE(waiters("1"));
  EXPECT_EQ(call("POST", "/v1/locks/q/acquire", acquire_body(waiter, 5000)).status, 429)
      << "alice may wait once";
  b.close();
  ASSERT_TRUE(waiters("0"));
  EXPECT_EQ(call("POST", "/v1/locks/q/acquire", acquire_body(waiter, 100)).status, 409)
      << "the gone waiter still counts against alice";
  std::filesystem::remove_all(dir);
}

// Long polls hold connections: a principal's waiting requests (observers of an election, waiting
// acquires) may take at most a quarter of server.max.connections, so a read-only principal
// cannot take every slot; other principals and health probes keep theirs (C6 "Connections").
TEST(WaitsWithAuth, OnePrincipalsLongPollsTakeAtMostAQuarterOfTheConnections) {
  char pattern[] = "/tmp/dlock-waits-share-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  const auto reader_token = auth::random_token();
  const auto writer_token = auth::random_token();
  std::ofstream(dir + "/tokens")
      << auth::tokens_file_line("reader", reader_token, auth::parse_permissions("read:*")) << "\n"
      << auth::tokens_file_line("writer", writer_token, auth::parse_permissions("lock:*")) << "\n";
  DlockdOptions options;
  options.dir = dir;
  options.extra_args = {"--auth-tokens-file", dir + "/tokens", "--server-max-connections", "12"};
  DlockdProcess dlockd(options);
  const auto as = [&](const std::string& token) {
    return std::map<std::string, std::string>{{"Authorization", "Bearer " + token}};
  };
  const auto writer_session = std::string(
      http_call(dlockd.address(), "POST", "/v1/sessions", R"({"owner":"w"})", as(writer_token))
          .json.at("session_id")
          .as_string());
  const auto campaign =
      http_call(dlockd.address(), "POST", "/v1/elections/e/campaign",
                R"({"session_id":")" + writer_session + R"(","value":"v"})", as(writer_token));
  ASSERT_EQ(campaign.status, 200) << campaign.body;
  const auto token = std::to_string(campaign.json.at("fencing_token").to_number<std::int64_t>());
  const std::string poll = "GET /v1/elections/e?after_token=" + token +
                           "&after_value=v&wait_ms=60000 HTTP/1.1\r\nHost: t\r\nAuthorization: "
                           "Bearer " +
                           reader_token + "\r\n\r\n";
  // 12 / 4 = 3 long polls for the reader (the scrape below is the fourth connection); the
  // fourth poll is refused at once.
  std::vector<std::unique_ptr<RawSocket>> polls;
  for (int i = 0; i < 3; ++i) {
    polls.push_back(std::make_unique<RawSocket>(dlockd.address()));
    ASSERT_TRUE(polls.back()->send(poll));
  }
  ASSERT_TRUE(wait_for(
      [&] {
        return http_call(dlockd.address(), "GET", "/metrics")
                   .body.find("dlock_http_connections_open 4\n") != std::string::npos;
      },
      3s));
  RawSocket fourth(dlockd.address());
  fourth.set_receive_timeout(3000ms);
  const auto refused = fourth.exchange(poll);
  EXPECT_NE(refused.find("429"), std::string::npos) << refused;
  EXPECT_NE(refused.find("principal reader (limit 3)"), std::string::npos) << refused;
  // Another principal still waits, and a probe is answered.
  EXPECT_NE(http_call(dlockd.address(), "GET",
                      "/v1/elections/e?after_token=" + token + "&after_value=v&wait_ms=200", "",
                      as(writer_token))
                .status,
            429);
  EXPECT_EQ(http_call(dlockd.address(), "GET", "/healthz").status, 200);
  // A poll that ends frees its place.
  polls.front()->close();
  polls.erase(polls.begin());
  EXPECT_TRUE(wait_for(
      [&] {
        RawSocket again(dlockd.address());
        again.set_receive_timeout(300ms);
        again.send(poll);
        return again.receive().empty();  // waiting, not refused
      },
      3s));
  std::filesystem::remove_all(dir);
}

// --- over TLS (one backend: the watching is the HTTP server's, whatever the store) -----------

namespace asio = boost::asio;
namespace http = boost::beast::http;

// A synchronous HTTPS client on one connection (the test trusts whatever certificate it gets).
class TlsConnection {
 public:
  explicit TlsConnection(const std::string& address) : stream_(io_, context_) {
    const auto colon = address.rfind(':');
    stream_.next_layer().connect(
        {asio::ip::make_address(address.substr(0, colon)),
         static_cast<unsigned short>(std::stoi(address.substr(colon + 1)))});
    timeval timeout{5, 0};
    ::setsockopt(stream_.next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout,
                 sizeof(timeout));
    stream_.handshake(asio::ssl::stream_base::client);
  }

  void send(http::verb method, const std::string& target, const std::string& body = "") {
    http::request<http::string_body> request{method, target, 11};
    request.set(http::field::host, "localhost");
    if (!body.empty()) request.set(http::field::content_type, "application/json");
    request.body() = body;
    request.prepare_payload();
    http::write(stream_, request);
  }
  HttpResult receive() {
    http::response<http::string_body> response;
    http::read(stream_, buffer_, response);
    HttpResult result;
    result.status = response.result_int();
    result.body = response.body();
    if (response[http::field::content_type] == "application/json") {
      result.json = json::parse(result.body);
    }
    return result;
  }
  HttpResult call(http::verb method, const std::string& target, const std::string& body = "") {
    send(method, target, body);
    return receive();
  }
  // Closes the TCP connection without a TLS close_notify: a client that died.
  void drop() {
    boost::system::error_code ignored;
    stream_.next_layer().close(ignored);
  }

 private:
  asio::io_context io_;
  asio::ssl::context context_{asio::ssl::context::tls_client};
  asio::ssl::stream<asio::ip::tcp::socket> stream_;
  boost::beast::flat_buffer buffer_;
};

TEST(WaitsOverTls, DroppedWaiterLeavesAtOnceAndIsNeverGranted) {
  char pattern[] = "/tmp/dlock-waits-tls-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  const auto ca = make_test_ca(dir, "ca");
  const auto cert = make_server_cert(ca, dir, "server");
  DlockdOptions options;
  options.extra_args = {"--tls-cert-file", cert.cert_file, "--tls-key-file", cert.key_file};
  DlockdProcess dlockd(options);
  const auto waiters = [&] {
    const auto body = TlsConnection(dlockd.address()).call(http::verb::get, "/metrics").body;
    const std::string name = "dlock_waiters{backend=\"sqlite\"} ";
    const auto at = body.find(name);
    return at == std::string::npos ? -1 : std::stoi(body.substr(at + name.size()));
  };
  TlsConnection a(dlockd.address());
  const auto session = [&](const std::string& owner) {
    const auto opened =
        a.call(http::verb::post, "/v1/sessions", json::serialize(json::object{{"owner", owner}}));
    return std::string(opened.json.at("session_id").as_string());
  };
  const auto a_session = session("a");
  const auto b_session = session("b");
  const auto grant =
      a.call(http::verb::post, "/v1/locks/tls-key/acquire", acquire_body(a_session, 0));
  ASSERT_EQ(grant.status, 200) << grant.body;
  TlsConnection b(dlockd.address());
  b.send(http::verb::post, "/v1/locks/tls-key/acquire", acquire_body(b_session, 30000));
  ASSERT_TRUE(wait_for([&] { return waiters() == 1; }, 3s));
  b.drop();
  EXPECT_TRUE(wait_for([&] { return waiters() == 0; }, 2s)) << "the dropped waiter stayed queued";
  const auto token = std::to_string(grant.json.at("fencing_token").to_number<std::uint64_t>());
  EXPECT_EQ(a.call(http::verb::delete_,
                   "/v1/locks/tls-key?session_id=" + a_session + "&fencing_token=" + token)
                .status,
            204);
  EXPECT_EQ(a.call(http::verb::get, "/v1/locks/tls-key").status, 404)
      << "the key went to the waiter that had gone";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dlock::testing
