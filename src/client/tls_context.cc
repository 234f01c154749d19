#include "client/tls_context.h"

#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>

#include "dlock/errors.h"

namespace dlock::client::detail {
namespace {

namespace ssl = boost::asio::ssl;

[[noreturn]] void cannot_load(const std::string& name, const std::string& what,
                              const std::string& path, const boost::system::error_code& ec) {
  throw InvalidArgumentError(
      name, name + ": cannot load " + what + " from '" + path + "': " + ec.message());
}

}  // namespace

TlsContextPtr make_tls_context(const TlsFiles& files) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
  // Modern defaults only (contract C6): no SSL 3, TLS 1.0 or 1.1, no renegotiation.
  SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_compression);
  SSL_CTX_set_options(context->native_handle(), SSL_OP_NO_RENEGOTIATION);
  context->set_verify_mode(ssl::verify_peer);
  boost::system::error_code ec;
  if (!files.ca_file.empty()) {
    context->load_verify_file(files.ca_file, ec);
    if (ec) cannot_load(files.ca_name, "CA certificates", files.ca_file, ec);
  } else {
    context->set_default_verify_paths(ec);
    if (ec) cannot_load(files.ca_name, "the system's CA certificates", "(default)", ec);
  }
  if (files.cert_file.empty() && !files.key_file.empty()) {
    throw InvalidArgumentError(files.cert_name, files.key_name + " is set but " + files.cert_name +
                                                    " is not: a client key needs its certificate");
  }
  if (!files.cert_file.empty()) {
    context->use_certificate_chain_file(files.cert_file, ec);
    if (ec) cannot_load(files.cert_name, "a client certificate", files.cert_file, ec);
    const std::string& key = files.key_file.empty() ? files.cert_file : files.key_file;
    const std::string& key_name = files.key_file.empty() ? files.cert_name : files.key_name;
    context->use_private_key_file(key, ssl::context::pem, ec);
    if (ec) cannot_load(key_name, "the client key", key, ec);
    if (SSL_CTX_check_private_key(context->native_handle()) != 1) {
      throw InvalidArgumentError(
          key_name, key_name + ": the key in '" + key + "' does not match the client certificate");
    }
  }
  return context;
}

}  // namespace dlock::client::detail
