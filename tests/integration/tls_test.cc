// HTTPS and mTLS against a real dlockd (contract C6 "TLS", ADR-0017), with certificates made at
// test time: HTTPS answers and plain HTTP on the TLS port does not; TLS 1.0/1.1 and legacy
// ciphers are refused even to a client willing to use them; with a client CA, no certificate or
// one from another CA is refused and a good one's CN reaches the server; SIGHUP swaps the
// certificate for new connections while an open one carries on, and a bad new set is refused and
// the old kept; start-up with an unusable file fails naming it; the handshake counts against the
// header timeout.

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <signal.h>
#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "support/dlockd_process.h"
#include "support/subprocess.h"
#include "support/test_certs.h"

namespace dlock::testing {
namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
namespace http = boost::beast::http;
using namespace std::chrono_literals;

struct ClientOptions {
  std::string ca_file;  // verify the server against it; empty: no verification
  std::string cert_file, key_file;
  // A client willing to speak TLS 1.0/1.1 or legacy ciphers (security level 0): only the
  // server's policy can refuse them.
  int max_version = 0;
  std::string tls12_ciphers;

  ClientOptions& trust(const std::string& ca) { return ca_file = ca, *this; }
  ClientOptions& present(const std::string& cert, const std::string& key) {
    cert_file = cert;
    key_file = key;
    return *this;
  }
  ClientOptions& at_most(int version) { return max_version = version, *this; }
  ClientOptions& ciphers(const std::string& list) { return tls12_ciphers = list, *this; }
};

// A synchronous HTTPS client: connects and handshakes in the constructor (throws
// std::runtime_error naming the failure), then requests on that one keep-alive connection.
class TlsClient {
 public:
  TlsClient(const std::string& address, const ClientOptions& options)
      : context_(ssl::context::tls_client), stream_(io_, make_context(options)) {
    const auto colon = address.rfind(':');
    boost::system::error_code error;
    stream_.next_layer().connect(
        {asio::ip::make_address(address.substr(0, colon)),
         static_cast<unsigned short>(std::stoi(address.substr(colon + 1)))},
        error);
    if (error) throw std::runtime_error("connect: " + error.message());
    timeval timeout{5, 0};
    ::setsockopt(stream_.next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout,
                 sizeof(timeout));
    stream_.handshake(ssl::stream_base::client, error);
    if (error) throw std::runtime_error("handshake: " + error.message());
  }

  // Throws std::runtime_error when no answer comes (e.g. TLS 1.3 reports a refused client
  // certificate only after the client's handshake finished).
  int get(const std::string& target) { return request(http::verb::get, target); }

  // `authorization`: the Authorization header's value, none when empty.
  int request(http::verb method, const std::string& target, const std::string& authorization = "") {
    http::request<http::empty_body> request{method, target, 11};
    request.set(http::field::host, "localhost");
    if (!authorization.empty()) request.set(http::field::authorization, authorization);
    request.prepare_payload();
    boost::system::error_code error;
    http::write(stream_, request, error);
    if (error) throw std::runtime_error("write: " + error.message());
    http::response<http::string_body> response;
    http::read(stream_, buffer_, response, error);
    if (error) throw std::runtime_error("read: " + error.message());
    return response.result_int();
  }

  std::string protocol() { return SSL_get_version(stream_.native_handle()); }

  // Whether the server presented the certificate in `pem_file`.
  bool server_presented(const std::string& pem_file) {
    X509* peer = SSL_get0_peer_certificate(stream_.native_handle());
    FILE* file = std::fopen(pem_file.c_str(), "r");
    if (file == nullptr || peer == nullptr) throw std::runtime_error("no certificate to compare");
    X509* expected = PEM_read_X509(file, nullptr, nullptr, nullptr);
    std::fclose(file);
    const bool same = expected != nullptr && X509_cmp(peer, expected) == 0;
    X509_free(expected);
    return same;
  }

 private:
  ssl::context& make_context(const ClientOptions& options) {
    SSL_CTX* native = context_.native_handle();
    if (!options.ca_file.empty()) {
      context_.load_verify_file(options.ca_file);
      context_.set_verify_mode(ssl::verify_peer);
    }
    if (!options.cert_file.empty()) {
      context_.use_certificate_chain_file(options.cert_file);
      context_.use_private_key_file(options.key_file, ssl::context::pem);
    }
    if (options.max_version != 0 || !options.tls12_ciphers.empty()) {
      SSL_CTX_set_security_level(native, 0);
      SSL_CTX_set_min_proto_version(native, TLS1_VERSION);
    }
    if (options.max_version != 0) SSL_CTX_set_max_proto_version(native, options.max_version);
    if (!options.tls12_ciphers.empty()) {
      SSL_CTX_set_max_proto_version(native, TLS1_2_VERSION);
      SSL_CTX_set_cipher_list(native, options.tls12_ciphers.c_str());
    }
    return context_;
  }

  asio::io_context io_;
  ssl::context context_;
  ssl::stream<asio::ip::tcp::socket> stream_;
  boost::beast::flat_buffer buffer_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Whether any request got an answer over a connection made with `options`.
bool answered(const std::string& address, const ClientOptions& options, std::string* why) {
  try {
    TlsClient client(address, options);
    client.get("/healthz");
    return true;
  } catch (const std::exception& error) {
    *why = error.what();
    return false;
  }
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/dlock-tls-XXXXXX";
    dir_ = mkdtemp(pattern);
    ca_ = make_test_ca(dir_, "ca");
    server_ = make_server_cert(ca_, dir_, "server");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  DlockdOptions options(std::vector<std::string> extra = {}) {
    DlockdOptions options;
    options.extra_args = {"--tls-cert-file", server_.cert_file, "--tls-key-file", server_.key_file};
    options.extra_args.insert(options.extra_args.end(), extra.begin(), extra.end());
    return options;
  }
  ClientOptions verifying() const { return ClientOptions().trust(ca_.cert_file); }

  std::string dir_;
  TestCa ca_;
  ServerCert server_;
};

TEST_F(TlsTest, ServesHttpsAndPlainHttpOnTheTlsPortGetsNoAnswer) {
  DlockdProcess dlockd(options());
  TlsClient client(dlockd.address(), verifying());
  EXPECT_EQ(client.get("/healthz"), 200);
  EXPECT_EQ(client.get("/v1/locks"), 200);  // keep-alive: a second request on the connection
  EXPECT_EQ(client.protocol(), "TLSv1.3");

  bool plain_answered = false;
  try {
    plain_answered = http_call(dlockd.address(), "GET", "/healthz").status != 0;
  } catch (const std::exception&) {
  }
  EXPECT_FALSE(plain_answered);
  TlsClient again(dlockd.address(), verifying());  // still serving
  EXPECT_EQ(again.get("/healthz"), 200);
}

TEST_F(TlsTest, Tls12IsServedButTls10And11AreRefused) {
  DlockdProcess dlockd(options());
  TlsClient tls12(dlockd.address(), verifying().at_most(TLS1_2_VERSION));
  EXPECT_EQ(tls12.get("/healthz"), 200);
  EXPECT_EQ(tls12.protocol(), "TLSv1.2");

  for (const int version : {TLS1_1_VERSION, TLS1_VERSION}) {
    std::string why;
    EXPECT_FALSE(answered(dlockd.address(), ClientOptions().at_most(version), &why)) << version;
    EXPECT_NE(why.find("handshake"), std::string::npos) << why;
  }
}

TEST_F(TlsTest, LegacyTls12CiphersAreRefused) {
  DlockdProcess dlockd(options());
  std::string why;
  // Without forward secrecy (RSA key exchange), or CBC with SHA-1/SHA-256 MACs.
  for (const char* cipher :
       {"AES128-SHA", "AES256-SHA256", "ECDHE-RSA-AES128-SHA", "ECDHE-RSA-AES256-SHA384"}) {
    EXPECT_FALSE(answered(dlockd.address(), ClientOptions().ciphers(cipher), &why)) << cipher;
  }
  EXPECT_TRUE(
      answered(dlockd.address(), ClientOptions().ciphers("ECDHE-RSA-AES128-GCM-SHA256"), &why))
      << why;
}

TEST_F(TlsTest, MutualTlsRequiresAClientCertificateFromTheClientCa) {
  const auto alice = make_client_cert(ca_, dir_, "alice", "alice");
  const auto other_ca = make_test_ca(dir_, "other-ca");
  const auto mallory = make_client_cert(other_ca, dir_, "mallory", "alice");
  DlockdProcess dlockd(options({"--tls-client-ca-file", ca_.cert_file}));

  std::string why;
  EXPECT_FALSE(answered(dlockd.address(), verifying(), &why)) << "no client certificate";
  EXPECT_FALSE(
      answered(dlockd.address(), verifying().present(mallory.cert_file, mallory.key_file), &why))
      << "a certificate from another CA";
  TlsClient client(dlockd.address(), verifying().present(alice.cert_file, alice.key_file));
  EXPECT_EQ(client.get("/healthz"), 200);
  // The CN reached the server (http_server's tls_handshake line; the same value is
  // Peer::client_cert_cn of every request on the connection).
  EXPECT_TRUE(wait_for(
      [&] {
        return read_file(dlockd.log_path()).find(R"("client_cert_cn":"alice")") !=
               std::string::npos;
      },
      5s));
}

// C6: without a bearer token, a verified client certificate whose CN names a principal of the
// tokens file authenticates as that principal (a "-" line is certificate-only); another CN, from
// the same trusted CA, is not a principal.
TEST_F(TlsTest, ClientCertificateCnNamesAPrincipalOfTheTokensFile) {
  const auto alice = make_client_cert(ca_, dir_, "alice", "alice");
  const auto bob = make_client_cert(ca_, dir_, "bob", "bob");
  const std::string tokens = dir_ + "/tokens";
  std::ofstream(tokens) << "alice - read:*\n";
  DlockdProcess dlockd(
      options({"--tls-client-ca-file", ca_.cert_file, "--auth-tokens-file", tokens}));
  TlsClient as_alice(dlockd.address(), verifying().present(alice.cert_file, alice.key_file));
  EXPECT_EQ(as_alice.get("/v1/locks?prefix="), 200);
  TlsClient as_bob(dlockd.address(), verifying().present(bob.cert_file, bob.key_file));
  EXPECT_EQ(as_bob.get("/v1/locks?prefix="), 401);
}

// C6 "Certificates and principals": a certificate names only a certificate-only principal (a
// "-" line of the tokens file), by its one subject CN. Never the built-in `admin` of admin.token
// (a CN=admin certificate from the trusted CA gets no admin rights), never a principal that has a
// bearer token, and no principal when the subject has two CNs.
TEST_F(TlsTest, ACertificateNamesOnlyACertificateOnlyPrincipalNeverAdmin) {
  const std::string admin_token = "dlk_admin-token-for-tls-tests-only-0123456789";
  const std::string token_file = dir_ + "/admin-token";
  std::ofstream(token_file) << admin_token << "\n";
  std::filesystem::permissions(token_file, std::filesystem::perms::owner_read);
  const std::string tokens = dir_ + "/tokens";
  std::ofstream(tokens) << "carol - read:*\n"
                        << "bob 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef "
                           "admin:*\n";
  DlockdProcess dlockd(options({"--tls-client-ca-file", ca_.cert_file, "--auth-tokens-file", tokens,
                                "--admin-token-file", token_file}));
  const std::string revoke = "/v1/admin/locks/k/revoke?ns=a";

  const auto admin = make_client_cert(ca_, dir_, "admin", "admin");
  TlsClient as_admin(dlockd.address(), verifying().present(admin.cert_file, admin.key_file));
  EXPECT_EQ(as_admin.request(http::verb::post, revoke), 401) << "CN=admin revoked as admin";
  EXPECT_EQ(as_admin.get("/v1/locks?ns=a"), 401) << "CN=admin is a principal";
  // The admin token itself still works on that connection: a bearer token decides.
  EXPECT_EQ(as_admin.request(http::verb::post, revoke, "Bearer " + admin_token), 200);

  const auto bob = make_client_cert(ca_, dir_, "bob", "bob");
  TlsClient as_bob(dlockd.address(), verifying().present(bob.cert_file, bob.key_file));
  EXPECT_EQ(as_bob.request(http::verb::post, revoke), 401) << "a token principal by certificate";

  const auto carol = make_client_cert(ca_, dir_, "carol", "carol");
  TlsClient as_carol(dlockd.address(), verifying().present(carol.cert_file, carol.key_file));
  EXPECT_EQ(as_carol.get("/v1/locks?ns=a"), 200);
  EXPECT_EQ(as_carol.request(http::verb::post, revoke), 403);  // read:* only

  // Two CNs (the first names carol): ambiguous, so no principal.
  const auto twice = make_client_cert(ca_, dir_, "twice", "carol/CN=admin");
  TlsClient as_twice(dlockd.address(), verifying().present(twice.cert_file, twice.key_file));
  EXPECT_EQ(as_twice.get("/v1/locks?ns=a"), 401);
}

TEST_F(TlsTest, SighupSwapsTheCertificateForNewConnectionsAndKeepsOpenOnes) {
  DlockdProcess dlockd(options());
  TlsClient before(dlockd.address(), verifying());
  EXPECT_EQ(before.get("/healthz"), 200);
  EXPECT_TRUE(before.server_presented(server_.cert_file));
  const std::string first_cert = dir_ + "/first.crt";
  std::filesystem::copy_file(server_.cert_file, first_cert);

  const auto next = make_server_cert(ca_, dir_, "next");
  std::filesystem::copy_file(next.cert_file, server_.cert_file,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(next.key_file, server_.key_file,
                             std::filesystem::copy_options::overwrite_existing);
  ASSERT_EQ(::kill(dlockd.pid(), SIGHUP), 0);
  ASSERT_TRUE(wait_for(
      [&] { return read_file(dlockd.log_path()).find("tls_reloaded") != std::string::npos; }, 5s));

  TlsClient after(dlockd.address(), verifying());
  EXPECT_EQ(after.get("/healthz"), 200);
  EXPECT_TRUE(after.server_presented(next.cert_file));
  EXPECT_EQ(before.get("/healthz"), 200);  // the open connection carries on, on its context
  EXPECT_TRUE(before.server_presented(first_cert));

  // A bad new set (a key that does not match) is refused, logged, and the last good one kept.
  std::filesystem::copy_file(ca_.key_file, server_.key_file,
                             std::filesystem::copy_options::overwrite_existing);
  ASSERT_EQ(::kill(dlockd.pid(), SIGHUP), 0);
  ASSERT_TRUE(wait_for(
      [&] { return read_file(dlockd.log_path()).find("tls_reload_failed") != std::string::npos; },
      5s));
  EXPECT_NE(read_file(dlockd.log_path()).find(server_.key_file), std::string::npos);
  TlsClient kept(dlockd.address(), verifying());
  EXPECT_EQ(kept.get("/healthz"), 200);
  EXPECT_TRUE(kept.server_presented(next.cert_file));
  EXPECT_TRUE(dlockd.process().running());
}

TEST_F(TlsTest, StartUpWithAnUnusableFileFailsNamingIt) {
  const auto expect_refused = [](DlockdOptions options, const std::string& needle) {
    try {
      DlockdProcess dlockd(std::move(options));
      ADD_FAILURE() << "dlockd started; expected a failure naming " << needle;
    } catch (const std::runtime_error& error) {
      EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
    }
  };
  auto missing = options();
  missing.extra_args[1] = dir_ + "/missing.crt";
  expect_refused(missing, dir_ + "/missing.crt");
  auto mismatched = options();
  mismatched.extra_args[3] = ca_.key_file;  // the CA's key, not the server certificate's
  expect_refused(mismatched, ca_.key_file);
  auto half = options();
  half.extra_args.resize(2);
  expect_refused(half, "tls.cert.file and tls.key.file");
  auto bad_ca = options({"--tls-client-ca-file", server_.key_file});
  expect_refused(bad_ca, "tls.client.ca.file");
}

TEST_F(TlsTest, TheHandshakeCountsAgainstTheHeaderTimeout) {
  DlockdProcess dlockd(options({"--server-header-timeout", "1s"}));
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  const auto& address = dlockd.address();
  socket.connect({asio::ip::make_address("127.0.0.1"),
                  static_cast<unsigned short>(std::stoi(address.substr(address.rfind(':') + 1)))});
  timeval timeout{5, 0};  // ::recv, not asio's read: asio would wait past SO_RCVTIMEO
  ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  const auto start = std::chrono::steady_clock::now();
  char byte = 0;
  const auto received = ::recv(socket.native_handle(), &byte, 1, 0);  // no ClientHello sent
  const int error = errno;
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(received == 0 || (received < 0 && error != EAGAIN && error != EWOULDBLOCK))
      << "expected the server to close the connection at the header timeout, got " << received
      << " errno " << error;
  EXPECT_LT(waited, 4s);
  EXPECT_GT(waited, 500ms);
}

}  // namespace
}  // namespace dlock::testing
