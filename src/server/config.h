#pragma once

// dlockd configuration (contract C5). Sources, later wins: the --config file ("key = value"
// lines, # comments), the environment (DLOCK_ + key upper-cased, '.' -> '_'), then flags
// (--key-with-dashes VALUE or --key-with-dashes=VALUE). An unknown key in the file or on the
// command line, or a bad value anywhere, stops start-up with a message naming it.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dlock/errors.h"
#include "store/factory.h"

namespace dlock::server {

struct ServerConfig {
  store::StoreConfig store;
  std::string listen = "127.0.0.1:7070";
  std::chrono::milliseconds default_lock_ttl{30000};
  std::chrono::milliseconds default_session_ttl{30000};
  std::chrono::milliseconds max_wait{std::chrono::minutes(5)};
  std::size_t max_waiters = 100000;
  std::size_t max_sessions = 100000;
  std::size_t max_body_bytes = 64 * 1024;
  std::size_t workers = 16;
  // Connections (contract C6; src/server/http_server.h): a request header must arrive within
  // header_timeout (slowloris), a keep-alive connection may sit idle idle_timeout between
  // requests, a response must be taken within write_timeout, and beyond max_connections open
  // connections new ones are answered 503 and closed.
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds idle_timeout{60000};
  std::chrono::milliseconds write_timeout{10000};
  std::size_t max_connections = 10000;
  // Bytes of answers being written and not yet taken by their clients, server-wide. An answer
  // body over kLargeAnswerBytes that would take the total past it is answered 503 instead, so
  // clients that ask for large lists and stop reading cannot multiply dlockd's memory.
  std::size_t max_unsent_bytes = 64 * 1024 * 1024;
  // TLS (contract C6, ADR-0017): HTTPS when cert and key are given; with client_ca, a client
  // certificate signed by it is required (mTLS). Re-read on SIGHUP.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  bool tls_enabled() const { return !tls_cert_file.empty(); }
  bool admin_enabled = false;
  std::string admin_token;  // from admin.token or the first line of admin.token.file
  // admin.token came from the command line (--admin-token), where `ps` shows it: dlockd warns
  // at start-up (C6; for tests only).
  bool admin_token_on_command_line = false;
  // Contract C6, ADR-0016: a tokens file turns authentication on for every /v1 route.
  std::string auth_tokens_file;
  std::string admin_token_file;
  std::size_t max_sessions_per_principal = 10000;
  std::size_t max_waiters_per_principal = 10000;
  // Serve a non-loopback address without a tokens file and TLS (C6 "Safe by default").
  bool insecure = false;
  std::string log_level = "info";
  // Where to write the bound address once listening (tests and supervisors; port 0 works).
  std::string ready_file;

  bool auth_enabled() const { return !auth_tokens_file.empty(); }
};

// Whether HOST of a HOST:PORT listen address is a loopback address (127.0.0.0/8, ::1,
// localhost).
bool is_loopback_listen(const std::string& listen);

// Thrown for a bad command line, file or value; what() names the key and the source. An
// InvalidArgumentError (ADR-0003) whose field is "config".
class ConfigError : public InvalidArgumentError {
 public:
  explicit ConfigError(const std::string& message) : InvalidArgumentError("config", message) {}
};

// One setting as it took effect: its text and where it came from ("default", "environment
// DLOCK_X", "<file>:<line>", "--flag").
struct EffectiveSetting {
  std::string key;
  std::string value;
  std::string source;
};

struct ParsedCommandLine {
  ServerConfig config;
  bool help = false;
  // --check-config: validate (load_config, and what start-up checks before the store: the TLS
  // files, the tokens file) and exit 0, or 2 naming the key. --print-config: print the
  // effective configuration (print_config) and exit. Command line only, not settings.
  bool check_config = false;
  bool print_config = false;
  // Every key in keys order, as it took effect.
  std::vector<EffectiveSetting> settings;
  // Not fatal: DLOCK_* environment variables that are no dlockd setting nor a variable of the
  // dlock CLI (C5, "Environment"), each with the nearest setting's variable when close.
  std::vector<std::string> warnings;
  // --etcd-raise-revision-to N (command line only, not a setting): instead of serving, raise
  // the etcd cluster's revision to at least N and exit (ADR-0010). 0 = serve as usual.
  std::int64_t etcd_raise_revision_to = 0;
};

ParsedCommandLine load_config(const std::vector<std::string>& args);

// The man-style --help text: every key with its flag, environment variable and default.
std::string help_text();

// --print-config: "key = value" for every key in the file format (so the output is a valid
// --config file), each preceded by a "# from SOURCE" comment when not the default. Secrets are
// redacted: admin.token, and the password in pg.url.
std::string print_config(const ParsedCommandLine& parsed);

}  // namespace dlock::server
