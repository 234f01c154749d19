// The client over TLS (contract C6) against a Boost.Beast HTTPS server in the test, with
// certificates made at test time: a verified connection works (and carries the token), a
// server whose certificate does not verify or does not name the host is refused with TlsError
// at once, and a client certificate is sent when configured (mTLS).

#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <filesystem>
#include <mutex>
#include <thread>

#include "dlock/client.h"
#include "support/subprocess.h"
#include "support/test_certs.h"

namespace dlock::client {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using std::chrono::milliseconds;

struct TlsServerOptions {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;  // non-empty: a client certificate signed by it is required
  std::string listen_address = "127.0.0.1";
  int max_version = 0;  // e.g. TLS1_1_VERSION for a server too old to talk to
};

// Serves one connection at a time on its own thread: every request is answered
// 200 {"locks": []} and recorded with the client certificate's CN.
class TlsServer {
 public:
  explicit TlsServer(const TlsServerOptions& options)
      : context_(ssl::context::tls_server),
        acceptor_(io_, {asio::ip::make_address(options.listen_address), 0}) {
    context_.use_certificate_chain_file(options.cert_file);
    context_.use_private_key_file(options.key_file, ssl::context::pem);
    if (options.max_version != 0) {
      SSL_CTX_set_security_level(context_.native_handle(), 0);
      SSL_CTX_set_min_proto_version(context_.native_handle(), 0);
      SSL_CTX_set_max_proto_version(context_.native_handle(), options.max_version);
    }
    if (!options.client_ca_file.empty()) {
      context_.load_verify_file(options.client_ca_file);
      context_.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    }
    thread_ = std::thread([this] { serve(); });
  }
  ~TlsServer() {
    stopping_ = true;
    beast::error_code ignored;
    // Wake the blocking accept with a connection of our own.
    tcp::socket poke(io_);
    poke.connect(acceptor_.local_endpoint(), ignored);
    thread_.join();
  }

  std::string url(const std::string& host = "127.0.0.1") const {
    return "https://" + host + ":" + std::to_string(acceptor_.local_endpoint().port());
  }
  int handshakes_failed() const { return handshakes_failed_.load(); }
  std::vector<std::pair<std::string, std::string>> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  void serve() {
    while (!stopping_) {
      tcp::socket socket(io_);
      beast::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec || stopping_) continue;
      beast::ssl_stream<tcp::socket> stream(std::move(socket), context_);
      stream.handshake(ssl::stream_base::server, ec);
      if (ec) {
        ++handshakes_failed_;
        continue;
      }
      beast::flat_buffer buffer;
      for (;;) {
        http::request<http::string_body> request;
        http::read(stream, buffer, request, ec);
        if (ec) {
          // TLS 1.3: a client certificate the server refuses fails here, after the handshake.
          if (ec.category() == asio::error::get_ssl_category()) ++handshakes_failed_;
          break;
        }
        std::string common_name;
        if (X509* peer = SSL_get1_peer_certificate(stream.native_handle())) {
          char name[256] = {};
          X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, name, sizeof name);
          common_name = name;
          X509_free(peer);
        }
        {
          std::lock_guard lock(mutex_);
          requests_.emplace_back(std::string(request[http::field::authorization]), common_name);
        }
        http::response<http::string_body> response{http::status::ok, 11};
        response.set(http::field::content_type, "application/json");
        response.body() = R"({"locks":[]})";
        response.keep_alive(request.keep_alive());
        response.prepare_payload();
        http::write(stream, response, ec);
        if (ec || !request.keep_alive()) break;
      }
    }
  }

  asio::io_context io_;
  ssl::context context_;
  tcp::acceptor acceptor_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> handshakes_failed_{0};
  mutable std::mutex mutex_;
  std::vector<std::pair<std::string, std::string>> requests_;
  std::thread thread_;
};

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(dlock::testing::make_temp_dir("dlock-client-tls"));
    ca_ = new dlock::testing::TestCa(dlock::testing::make_test_ca(*dir_, "ca"));
    other_ca_ = new dlock::testing::TestCa(dlock::testing::make_test_ca(*dir_, "other-ca"));
    server_ = new dlock::testing::ServerCert(dlock::testing::make_server_cert(*ca_, *dir_, "srv"));
    client_ = new dlock::testing::ClientCert(
        dlock::testing::make_client_cert(*ca_, *dir_, "cli", "alice"));
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete client_;
    delete server_;
    delete other_ca_;
    delete ca_;
    delete dir_;
  }

  static ClientOptions options_for(const std::string& url) {
    ClientOptions options;
    options.server_url = url;
    options.tls_ca_file = ca_->cert_file;
    options.request_timeout = milliseconds(3000);
    options.retry_budget = milliseconds(5000);
    options.backoff_initial = milliseconds(5);
    options.backoff_max = milliseconds(20);
    return options;
  }

  // Expects TlsError quickly (no retrying until the budget) whose message contains `reason`.
  static void expect_tls_error(Client& client, const std::string& reason) {
    const auto started = std::chrono::steady_clock::now();
    try {
      client.list("");
      ADD_FAILURE() << "connected";
    } catch (const TlsError& error) {
      EXPECT_NE(std::string(error.what()).find(reason), std::string::npos) << error.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - started, milliseconds(2500));
  }

  static TlsServerOptions server_options() {
    return TlsServerOptions{server_->cert_file, server_->key_file, "", "127.0.0.1", 0};
  }

  static std::string* dir_;
  static dlock::testing::TestCa* ca_;
  static dlock::testing::TestCa* other_ca_;
  static dlock::testing::ServerCert* server_;
  static dlock::testing::ClientCert* client_;
};

std::string* TlsTest::dir_ = nullptr;
dlock::testing::TestCa* TlsTest::ca_ = nullptr;
dlock::testing::TestCa* TlsTest::other_ca_ = nullptr;
dlock::testing::ServerCert* TlsTest::server_ = nullptr;
dlock::testing::ClientCert* TlsTest::client_ = nullptr;

TEST_F(TlsTest, VerifiedConnectionWorksAndCarriesTheToken) {
  TlsServer server(server_options());
  for (const std::string host : {"127.0.0.1", "localhost"}) {
    ClientOptions options = options_for(server.url(host));
    options.token = "dlk_tls-token";
    Client client(options);
    EXPECT_TRUE(client.list("").empty());
    EXPECT_TRUE(client.list("").empty());  // kept alive
  }
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 4U);
  EXPECT_EQ(requests[0].first, "Bearer dlk_tls-token");
  EXPECT_EQ(requests[0].second, "");  // no client certificate configured, none sent
  EXPECT_EQ(server.handshakes_failed(), 0);
}

TEST_F(TlsTest, WrongCaIsRefusedAtOnce) {
  TlsServer server(server_options());
  ClientOptions options = options_for(server.url());
  options.tls_ca_file = other_ca_->cert_file;
  Client client(options);
  expect_tls_error(client, "certificate verify failed");
  EXPECT_TRUE(server.requests().empty());
}

TEST_F(TlsTest, CertificateMustNameTheHost) {
  // The certificate names 127.0.0.1 and localhost; 127.0.0.2 is the same machine.
  TlsServerOptions listen = server_options();
  listen.listen_address = "127.0.0.2";
  TlsServer server(listen);
  Client client(options_for(server.url("127.0.0.2")));
  expect_tls_error(client, "mismatch");
  EXPECT_TRUE(server.requests().empty());
}

TEST_F(TlsTest, OldProtocolsAreRefused) {
  TlsServerOptions old = server_options();
  old.max_version = TLS1_1_VERSION;
  TlsServer server(old);
  Client client(options_for(server.url()));
  expect_tls_error(client, "TLS");
  EXPECT_TRUE(server.requests().empty());
}

TEST_F(TlsTest, ClientCertificateIsSentWhenConfigured) {
  TlsServerOptions mtls = server_options();
  mtls.client_ca_file = ca_->cert_file;
  TlsServer server(mtls);
  ClientOptions options = options_for(server.url());
  options.tls_cert_file = client_->cert_file;
  options.tls_key_file = client_->key_file;
  Client client(options);
  EXPECT_TRUE(client.list("").empty());
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1U);
  EXPECT_EQ(requests[0].second, "alice");
}

TEST_F(TlsTest, ServerRequiringACertificateRefusesClientWithout) {
  TlsServerOptions mtls = server_options();
  mtls.client_ca_file = ca_->cert_file;
  TlsServer server(mtls);
  Client client(options_for(server.url()));
  expect_tls_error(client, "TLS");
  EXPECT_TRUE(server.requests().empty());
}

TEST_F(TlsTest, UnreadableFilesNameTheOption) {
  ClientOptions options = options_for("https://127.0.0.1:1");
  options.tls_ca_file = *dir_ + "/missing.crt";
  try {
    Client client(options);
    ADD_FAILURE() << "accepted a missing CA file";
  } catch (const InvalidArgumentError& error) {
    EXPECT_EQ(error.field(), "tls_ca_file");
    EXPECT_NE(std::string(error.what()).find("missing.crt"), std::string::npos);
  }
  options = options_for("https://127.0.0.1:1");
  options.tls_cert_file = client_->cert_file;
  options.tls_key_file = server_->key_file;  // not the certificate's key
  EXPECT_THROW(Client client(options), InvalidArgumentError);
}

}  // namespace
}  // namespace dlock::client
