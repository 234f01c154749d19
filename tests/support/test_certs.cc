#include "support/test_certs.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "support/subprocess.h"

namespace dlock::testing {
namespace {

// The openssl tool on PATH (Subprocess does not search PATH).
std::string openssl_path() {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  for (std::size_t start = 0; start <= dirs.size();) {
    const auto end = std::min(dirs.find(':', start), dirs.size());
    const std::string candidate = dirs.substr(start, end - start) + "/openssl";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  throw std::runtime_error("openssl not found on PATH (Debian package openssl)");
}

void openssl(const std::string& dir, std::vector<std::string> args) {
  SubprocessOptions options;
  options.argv = {openssl_path()};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.log_path = dir + "/openssl.log";
  const int status = run_command(options, std::chrono::seconds(60));
  if (status != 0) {
    std::ifstream log(options.log_path);
    std::stringstream text;
    text << log.rdbuf();
    throw std::runtime_error("openssl " + args.front() + " failed (" + std::to_string(status) +
                             "): " + text.str());
  }
}

// A key and a certificate for /CN=`common_name` with `extensions` (openssl -extfile syntax),
// signed by `ca`: <dir>/<name>.crt and <dir>/<name>.key (mode 0600).
std::pair<std::string, std::string> sign_leaf(const TestCa& ca, const std::string& dir,
                                              const std::string& name,
                                              const std::string& common_name,
                                              const std::string& extensions_text) {
  const std::string cert_file = dir + "/" + name + ".crt";
  const std::string key_file = dir + "/" + name + ".key";
  const std::string request = dir + "/" + name + ".csr";
  const std::string extensions = dir + "/" + name + ".ext";
  std::ofstream(extensions) << extensions_text;
  openssl(dir, {"req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + common_name, "-keyout",
                key_file, "-out", request});
  openssl(dir, {"x509", "-req", "-in", request, "-CA", ca.cert_file, "-CAkey", ca.key_file,
                "-CAcreateserial", "-days", "2", "-extfile", extensions, "-out", cert_file});
  std::filesystem::permissions(
      key_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  return {cert_file, key_file};
}

}  // namespace

TestCa make_test_ca(const std::string& dir, const std::string& name) {
  TestCa ca{dir + "/" + name + ".crt", dir + "/" + name + ".key"};
  openssl(dir, {"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                "/CN=" + name, "-keyout", ca.key_file, "-out", ca.cert_file, "-addext",
                "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"});
  return ca;
}

ServerCert make_server_cert(const TestCa& ca, const std::string& dir, const std::string& name) {
  const auto [cert_file, key_file] =
      sign_leaf(ca, dir, name, "localhost",
                "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n");
  return ServerCert{cert_file, key_file};
}

ClientCert make_client_cert(const TestCa& ca, const std::string& dir, const std::string& name,
                            const std::string& common_name) {
  const auto [cert_file, key_file] =
      sign_leaf(ca, dir, name, common_name, "extendedKeyUsage=clientAuth\n");
  return ClientCert{cert_file, key_file};
}

}  // namespace dlock::testing
