#pragma once

// The client's TLS configuration (contract C6): one OpenSSL context per Client, shared by the
// connections to every https:// server. TLS 1.2 or later, the peer verified against the CA
// files given (else the system's trust store), an optional client certificate for mTLS.

#include <memory>
#include <string>

namespace boost::asio::ssl {
class context;
}

namespace dlock::client::detail {

struct TlsFiles {
  std::string ca_file;    // PEM CA certificates; empty: the system's default verify paths
  std::string cert_file;  // PEM client certificate (chain); empty: none
  std::string key_file;   // PEM key of cert_file; empty: cert_file
  // How the three are named in errors (the option, a flag or an environment variable).
  std::string ca_name = "tls_ca_file";
  std::string cert_name = "tls_cert_file";
  std::string key_name = "tls_key_file";
};

using TlsContextPtr = std::shared_ptr<boost::asio::ssl::context>;

// Throws InvalidArgumentError naming the option when a file cannot be loaded (the message
// names the path, never file contents).
TlsContextPtr make_tls_context(const TlsFiles& files);

}  // namespace dlock::client::detail
