#pragma once

// Certificates made at test time with the openssl command line tool: a throw-away CA and a
// server certificate it signed for 127.0.0.1 and localhost. For TLS fixtures (PostgreSQL with
// ssl=on) and for tests that must see a certificate that does not verify (another CA).

#include <string>

namespace dlock::testing {

struct TestCa {
  std::string cert_file;  // PEM
  std::string key_file;
};

struct ServerCert {
  std::string cert_file;  // PEM, subjectAltName IP:127.0.0.1, DNS:localhost
  std::string key_file;   // PEM, mode 0600
};

// A self-signed CA named `name` in `dir` (files <name>.crt, <name>.key). Throws
// std::runtime_error (with openssl's output) when openssl fails.
TestCa make_test_ca(const std::string& dir, const std::string& name);

// A server certificate signed by `ca`, in `dir` (files <name>.crt, <name>.key).
ServerCert make_server_cert(const TestCa& ca, const std::string& dir, const std::string& name);

struct ClientCert {
  std::string cert_file;  // PEM, CN = the common name asked for, extendedKeyUsage clientAuth
  std::string key_file;   // PEM, mode 0600
};

// A client certificate (mTLS) for `common_name` signed by `ca`, in `dir` (<name>.crt/.key).
ClientCert make_client_cert(const TestCa& ca, const std::string& dir, const std::string& name,
                            const std::string& common_name);

}  // namespace dlock::testing
