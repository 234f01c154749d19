#pragma once

// dlockd's TLS (contract C6, ADR-0017): OpenSSL contexts for Boost.Beast's ssl_stream, the
// verified client certificate's CN (mTLS), and the swap on SIGHUP.
//
// Every context has the same fixed policy: TLS 1.2 and 1.3 only, forward-secret AEAD ciphers
// only for TLS 1.2 (Mozilla "intermediate" without DHE), no renegotiation, no compression. With
// a client CA, a client certificate that verifies against it is required: the handshake fails
// without one.

#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "server/config.h"

namespace dlock::server {

// TLS 1.2 cipher suites (TLS 1.3's are OpenSSL's defaults, all AEAD).
inline constexpr char kTls12Ciphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

using TlsContextPtr = std::shared_ptr<boost::asio::ssl::context>;

// A server context from config.tls_* (tls_enabled() must be true). Throws InvalidArgumentError
// (ADR-0003) whose message names the file that cannot be read or used, or the key that does not
// match the certificate.
TlsContextPtr make_tls_context(const ServerConfig& config);

// The context new connections take. A connection keeps the one it started with, so a reload
// never disturbs connections in use.
class TlsContexts {
 public:
  // Throws as make_tls_context.
  explicit TlsContexts(const ServerConfig& config);

  TlsContextPtr current() const;
  // Re-reads the files. A set that does not load keeps the current context; both outcomes are
  // logged (tls_reloaded / tls_reload_failed, naming the file). Returns whether it swapped.
  bool reload();
  bool client_certificates_required() const { return !config_.tls_client_ca_file.empty(); }

 private:
  const ServerConfig config_;
  mutable std::mutex mutex_;
  TlsContextPtr current_;
};

// The subject CN of the peer's certificate once the handshake verified it; nullopt without a
// verified client certificate, without a CN, with more than one CN, or with a NUL in it. The
// subjectAltName is not consulted (C6 "Certificates and principals").
std::optional<std::string> verified_peer_common_name(SSL* ssl);

}  // namespace dlock::server
