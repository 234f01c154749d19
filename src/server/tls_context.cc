#include "server/tls_context.h"

#include <openssl/err.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "dlock/errors.h"
#include "server/telemetry.h"

namespace dlock::server {
namespace {

namespace ssl = boost::asio::ssl;

// OpenSSL's queued errors as one line (and the queue emptied).
std::string openssl_errors() {
  std::string text;
  while (const unsigned long code = ERR_get_error()) {
    char buffer[256];
    ERR_error_string_n(code, buffer, sizeof(buffer));
    if (!text.empty()) text += "; ";
    text += buffer;
  }
  return text.empty() ? "unknown OpenSSL error" : text;
}

[[noreturn]] void fail(const char* key, const std::string& file, const std::string& why) {
  throw InvalidArgumentError(key, std::string(key) + ": " + file + ": " + why);
}

// A clear "cannot read" before OpenSSL's less readable messages.
void check_readable(const char* key, const std::string& file) {
  std::ifstream in(file);
  if (!in) fail(key, file, std::string("cannot read: ") + std::strerror(errno));
}

}  // namespace

TlsContextPtr make_tls_context(const ServerConfig& config) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = context->native_handle();
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  // SSL_OP_NO_RENEGOTIATION refuses renegotiation either way (OpenSSL 3 already refuses a
  // client-initiated one unless SSL_OP_ALLOW_CLIENT_RENEGOTIATION). Cipher order: the client's,
  // as in Mozilla's "intermediate" (every suite left is strong).
  SSL_CTX_set_options(native, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  if (SSL_CTX_set_cipher_list(native, kTls12Ciphers) != 1) {
    throw InvalidArgumentError("tls", "TLS cipher list rejected: " + openssl_errors());
  }

  check_readable("tls.cert.file", config.tls_cert_file);
  if (SSL_CTX_use_certificate_chain_file(native, config.tls_cert_file.c_str()) != 1) {
    fail("tls.cert.file", config.tls_cert_file,
         "not a usable PEM certificate: " + openssl_errors());
  }
  check_readable("tls.key.file", config.tls_key_file);
  if (SSL_CTX_use_PrivateKey_file(native, config.tls_key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(native) != 1) {
    fail("tls.key.file", config.tls_key_file,
         "not a PEM private key matching " + config.tls_cert_file + ": " + openssl_errors());
  }

  if (!config.tls_client_ca_file.empty()) {
    const std::string& ca = config.tls_client_ca_file;
    check_readable("tls.client.ca.file", ca);
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(ca.c_str());
    if (names == nullptr || SSL_CTX_load_verify_locations(native, ca.c_str(), nullptr) != 1) {
      if (names != nullptr) sk_X509_NAME_pop_free(names, X509_NAME_free);
      fail("tls.client.ca.file", ca, "no usable PEM CA certificate: " + openssl_errors());
    }
    SSL_CTX_set_client_CA_list(native, names);  // takes ownership
    context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  } else {
    context->set_verify_mode(ssl::verify_none);
  }
  return context;
}

TlsContexts::TlsContexts(const ServerConfig& config)
    : config_(config), current_(make_tls_context(config)) {}

TlsContextPtr TlsContexts::current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

bool TlsContexts::reload() {
  try {
    auto fresh = make_tls_context(config_);
    {
      std::lock_guard lock(mutex_);
      current_ = std::move(fresh);
    }
    log_event(
        "info", "tls_reloaded",
        {{"cert_file", config_.tls_cert_file}, {"client_ca_file", config_.tls_client_ca_file}});
    return true;
  } catch (const std::exception& error) {
    log_event("error", "tls_reload_failed",
              {{"message", error.what()}, {"kept", "the previous certificate and key"}});
    return false;
  }
}

std::optional<std::string> verified_peer_common_name(SSL* ssl) {
  X509* peer = SSL_get0_peer_certificate(ssl);
  if (peer == nullptr || SSL_get_verify_result(ssl) != X509_V_OK) return std::nullopt;
  X509_NAME* subject = X509_get_subject_name(peer);
  const int index = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (index < 0) return std::nullopt;
  // Two CNs: which one names the client differs between programs, so neither does here (C6).
  if (X509_NAME_get_index_by_NID(subject, NID_commonName, index) >= 0) return std::nullopt;
  unsigned char* utf8 = nullptr;
  const int length =
      ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, index)));
  if (length < 0) return std::nullopt;
  std::string name(reinterpret_cast<const char*>(utf8), static_cast<std::size_t>(length));
  OPENSSL_free(utf8);
  if (name.find('\0') != std::string::npos) return std::nullopt;  // "admin\0.evil" is no name
  return name;
}

}  // namespace dlock::server
