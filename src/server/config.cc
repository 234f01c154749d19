#include "server/config.h"

#include <algorithm>
#include <boost/asio/ip/address_v4.hpp>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>

#include "auth/admin_token.h"
#include "dlock/duration.h"
#include "dlock/errors.h"
#include "util/backend_names.h"

extern char** environ;

namespace dlock::server {
namespace {

using Setter = std::function<void(ServerConfig&, const std::string&)>;

struct Key {
  const char* name;
  const char* default_text;
  const char* help;
  Setter set;
};

std::chrono::milliseconds duration(const std::string& text, const char* key) {
  return parse_duration(text, key);
}

std::chrono::milliseconds positive_duration(const std::string& text, const char* key) {
  const auto value = duration(text, key);
  if (value.count() <= 0) throw ConfigError(std::string(key) + ": '" + text + "' must be > 0");
  return value;
}

std::size_t count(const std::string& text, const char* key) {
  std::size_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value == 0) {
    throw ConfigError(std::string(key) + ": '" + text + "' is not a positive integer");
  }
  return value;
}

bool boolean(const std::string& text, const char* key) {
  if (text == "true" || text == "1" || text == "yes") return true;
  if (text == "false" || text == "0" || text == "no") return false;
  throw ConfigError(std::string(key) + ": '" + text + "' is not true or false");
}

const std::vector<Key>& keys() {
  static const std::vector<Key> kKeys = {
      {"lock.backend", "sqlite", "Store backend: sqlite (embedded), pg or etcd.",
       [](ServerConfig& c, const std::string& v) {
         if (std::find(backend_names::kAll.begin(), backend_names::kAll.end(), v) ==
             backend_names::kAll.end()) {
           throw ConfigError("lock.backend: '" + v + "' is not one of sqlite, pg, etcd");
         }
         c.store.backend = v;
       }},
      {"server.listen", "127.0.0.1:7070", "HTTP listen address HOST:PORT (port 0 = any free).",
       [](ServerConfig& c, const std::string& v) {
         if (v.rfind(':') == std::string::npos) {
           throw ConfigError("server.listen: '" + v + "' is not HOST:PORT");
         }
         c.listen = v;
       }},
      {"sqlite.path", "./dlock-data/dlock.db", "Database file of the embedded store.",
       [](ServerConfig& c, const std::string& v) { c.store.sqlite_path = v; }},
      {"pg.url", "", "PostgreSQL URL, e.g. postgresql://dlock@127.0.0.1:5432/dlock.",
       [](ServerConfig& c, const std::string& v) { c.store.pg_url = v; }},
      {"pg.pool.size", "8", "PostgreSQL connections per dlockd.",
       [](ServerConfig& c, const std::string& v) { c.store.pool_size = count(v, "pg.pool.size"); }},
      {"etcd.endpoints", "http://127.0.0.1:2379", "Comma-separated etcd endpoints.",
       [](ServerConfig& c, const std::string& v) { c.store.etcd_endpoints = v; }},
      {"etcd.cacert", "", "CA certificate (PEM) that https:// etcd endpoints must verify against.",
       [](ServerConfig& c, const std::string& v) { c.store.etcd_cacert = v; }},
      {"etcd.cert", "", "Client certificate (PEM) for etcd's --client-cert-auth.",
       [](ServerConfig& c, const std::string& v) { c.store.etcd_cert = v; }},
      {"etcd.key", "", "Private key (PEM) of etcd.cert.",
       [](ServerConfig& c, const std::string& v) { c.store.etcd_key = v; }},
      {"backend.timeout", "5s", "Bound on every backend call.",
       [](ServerConfig& c, const std::string& v) {
         c.store.call_timeout = duration(v, "backend.timeout");
       }},
      {"lock.default.ttl", "30s", "Lock TTL when a request names none.",
       [](ServerConfig& c, const std::string& v) {
         c.default_lock_ttl = duration(v, "lock.default.ttl");
       }},
      {"lock.max.ttl", "1h", "Largest lock or session TTL accepted (smallest is 1s).",
       [](ServerConfig& c, const std::string& v) {
         c.store.limits.max_ttl = duration(v, "lock.max.ttl");
       }},
      {"lock.max.delay", "1m",
       "Largest lock_delay_ms a session may ask for (C2 \"Lock-delay\"); 0s allows none.",
       [](ServerConfig& c, const std::string& v) {
         c.store.limits.max_lock_delay = duration(v, "lock.max.delay");
       }},
      {"lock.max.wait", "5m", "Largest wait_ms an acquire may ask for.",
       [](ServerConfig& c, const std::string& v) { c.max_wait = duration(v, "lock.max.wait"); }},
      {"session.default.ttl", "30s", "Session TTL when a request names none.",
       [](ServerConfig& c, const std::string& v) {
         c.default_session_ttl = duration(v, "session.default.ttl");
       }},
      {"server.max.waiters", "100000", "Acquire requests that may wait at once (then 429).",
       [](ServerConfig& c, const std::string& v) {
         c.max_waiters = count(v, "server.max.waiters");
       }},
      {"server.max.sessions", "100000", "Sessions this server may hold open (then 429).",
       [](ServerConfig& c, const std::string& v) {
         c.max_sessions = count(v, "server.max.sessions");
       }},
      {"server.max.body", "65536", "Largest request body in bytes (then 413).",
       [](ServerConfig& c, const std::string& v) {
         c.max_body_bytes = count(v, "server.max.body");
       }},
      {"server.header.timeout", "10s",
       "A connection whose request header has not fully arrived by then is closed.",
       [](ServerConfig& c, const std::string& v) {
         c.header_timeout = positive_duration(v, "server.header.timeout");
       }},
      {"server.idle.timeout", "60s", "A keep-alive connection idle between requests is closed.",
       [](ServerConfig& c, const std::string& v) {
         c.idle_timeout = positive_duration(v, "server.idle.timeout");
       }},
      {"server.write.timeout", "10s", "A client that does not take its answer by then is dropped.",
       [](ServerConfig& c, const std::string& v) {
         c.write_timeout = positive_duration(v, "server.write.timeout");
       }},
      {"server.max.unsent.bytes", "67108864",
       "Bytes of answers not yet taken by slow clients, server-wide; a large answer past it is "
       "answered 503.",
       [](ServerConfig& c, const std::string& v) {
         c.max_unsent_bytes = count(v, "server.max.unsent.bytes");
       }},
      {"server.max.connections", "10000",
       "Open client connections; beyond it new ones are answered 503 and closed.",
       [](ServerConfig& c, const std::string& v) {
         c.max_connections = count(v, "server.max.connections");
       }},
      {"server.workers", "16", "Threads that run blocking backend calls.",
       [](ServerConfig& c, const std::string& v) { c.workers = count(v, "server.workers"); }},
      {"tls.cert.file", "", "PEM certificate (chain) to serve HTTPS with; needs tls.key.file.",
       [](ServerConfig& c, const std::string& v) { c.tls_cert_file = v; }},
      {"tls.key.file", "", "PEM private key of tls.cert.file.",
       [](ServerConfig& c, const std::string& v) { c.tls_key_file = v; }},
      {"tls.client.ca.file", "",
       "PEM CA(s): clients must present a certificate signed by it (mTLS); its CN may name a "
       "principal.",
       [](ServerConfig& c, const std::string& v) { c.tls_client_ca_file = v; }},
      {"admin.enabled", "false", "Serve the admin API (revoke); needs admin.token.",
       [](ServerConfig& c, const std::string& v) {
         c.admin_enabled = boolean(v, "admin.enabled");
       }},
      {"admin.token", "",
       "Bearer token the admin API requires. Prefer admin.token.file or DLOCK_ADMIN_TOKEN: as a "
       "flag it shows in ps, and dlockd warns at start-up (the flag is for tests).",
       [](ServerConfig& c, const std::string& v) { c.admin_token = v; }},
      {"admin.token.file", "",
       "File whose first line is admin.token (mode 0600 or 0400: kept out of ps and the "
       "environment).",
       [](ServerConfig& c, const std::string& v) { c.admin_token_file = v; }},
      {"auth.tokens.file", "",
       "Tokens file (principal, sha256 of its bearer token, permissions; C6). Set: every /v1 "
       "route needs Authorization: Bearer. Reloaded on SIGHUP.",
       [](ServerConfig& c, const std::string& v) { c.auth_tokens_file = v; }},
      {"auth.max.sessions.per.principal", "10000",
       "Sessions one principal may hold open through this server (then 429; with auth only).",
       [](ServerConfig& c, const std::string& v) {
         c.max_sessions_per_principal = count(v, "auth.max.sessions.per.principal");
       }},
      {"auth.max.waiters.per.principal", "10000",
       "Waiting acquires one principal may have on this server (then 429; with auth only).",
       [](ServerConfig& c, const std::string& v) {
         c.max_waiters_per_principal = count(v, "auth.max.waiters.per.principal");
       }},
      {"server.insecure", "false",
       "Allow a non-loopback server.listen without both a tokens file and TLS.",
       [](ServerConfig& c, const std::string& v) { c.insecure = boolean(v, "server.insecure"); }},
      {"log.level", "info", "debug, info, warn or error.",
       [](ServerConfig& c, const std::string& v) {
         if (v != "debug" && v != "info" && v != "warn" && v != "error") {
           throw ConfigError("log.level: '" + v + "' is not debug, info, warn or error");
         }
         c.log_level = v;
       }},
      {"server.ready.file", "", "File to write the bound address to once listening.",
       [](ServerConfig& c, const std::string& v) { c.ready_file = v; }},
  };
  return kKeys;
}

const Key* find_key(std::string_view name) {
  for (const auto& key : keys()) {
    if (name == key.name) return &key;
  }
  return nullptr;
}

std::string flag_of(std::string_view name) {
  std::string flag = "--" + std::string(name);
  std::replace(flag.begin(), flag.end(), '.', '-');
  return flag;
}

std::string env_of(std::string_view name) {
  std::string env = "DLOCK_" + std::string(name);
  for (auto& c : env) c = c == '.' ? '_' : static_cast<char>(std::toupper(c));
  return env;
}

// The text and source of each key that was set, later sources replacing earlier ones.
using Applied = std::map<std::string, std::pair<std::string, std::string>>;

void apply(ServerConfig& config, const Key& key, const std::string& value,
           const std::string& source, Applied* applied = nullptr) {
  if (applied != nullptr) (*applied)[key.name] = {value, source};
  try {
    key.set(config, value);
  } catch (const ConfigError& error) {
    throw ConfigError(std::string(error.what()) + " (from " + source + ")");
  } catch (const InvalidArgumentError& error) {
    throw ConfigError(std::string(error.what()) + " (from " + source + ")");
  }
}

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

// Edit distance (insert, delete, substitute), for "did you mean".
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "; did you mean 'X'?" for the closest of `names` within 2 edits, or "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& names) {
  const std::string* best = nullptr;
  std::size_t best_distance = 3;
  for (const std::string& name : names) {
    const std::size_t d = distance(word, name);
    if (d < best_distance) {
      best = &name;
      best_distance = d;
    }
  }
  return best == nullptr ? "" : "; did you mean '" + *best + "'?";
}

std::vector<std::string> key_names() {
  std::vector<std::string> names;
  for (const auto& key : keys()) names.emplace_back(key.name);
  return names;
}

// A value written as "..." or '...': the file takes values as written, so the quotes would be
// part of it (a duration '"30s"' is no duration; a path would name another file). Refused with
// the fix, never echoing the value (it may be a token).
void refuse_quotes(const std::string& where, const std::string& name, const std::string& value) {
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
      value.back() == value.front()) {
    throw ConfigError(where + ": " + name +
                      ": the value is in quotes; values are taken as written, without quotes "
                      "or escapes (" +
                      name + " = VALUE)");
  }
}

void apply_file(ServerConfig& config, const std::string& path, Applied* applied) {
  std::ifstream in(path);
  if (!in) throw ConfigError("--config: cannot read " + path);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    const auto equals = line.find('=');
    const std::string where = path + ":" + std::to_string(number);
    if (equals == std::string::npos) throw ConfigError(where + ": expected 'key = value'");
    const std::string name = trim(line.substr(0, equals));
    const Key* key = find_key(name);
    if (key == nullptr) {
      throw ConfigError(where + ": unknown key '" + name + "'" + did_you_mean(name, key_names()));
    }
    const std::string value = trim(line.substr(equals + 1));
    refuse_quotes(where, name, value);
    apply(config, *key, value, where, applied);
  }
}

// The TLS keys come as a set: cert and key together, a client CA only with them.
void check_tls(const ServerConfig& config) {
  if (config.tls_cert_file.empty() != config.tls_key_file.empty()) {
    throw ConfigError("tls.cert.file and tls.key.file must be given together");
  }
  if (!config.tls_client_ca_file.empty() && !config.tls_enabled()) {
    throw ConfigError("tls.client.ca.file needs tls.cert.file and tls.key.file (mTLS is TLS)");
  }
}

// admin.token.file, the admin token's strength, and the safe default (contract C6).
void finish_auth(ServerConfig& config) {
  if (!config.admin_token_file.empty()) {
    if (!config.admin_token.empty()) {
      throw ConfigError("admin.token and admin.token.file are both set: choose one");
    }
    config.admin_token = auth::read_admin_token_file(config.admin_token_file);
  }
  if (!config.admin_token.empty()) auth::check_admin_token(config.admin_token);
  if (!is_loopback_listen(config.listen) && !config.insecure &&
      !(config.auth_enabled() && config.tls_enabled())) {
    const std::string missing = !config.auth_enabled() && !config.tls_enabled()
                                    ? "auth.tokens.file and TLS"
                                : config.auth_enabled() ? "TLS"
                                                        : "auth.tokens.file";
    throw ConfigError("server.listen: " + config.listen +
                      " is not a loopback address: refusing to serve it without both "
                      "auth.tokens.file and TLS (missing " +
                      missing + "; server.insecure = true to do it anyway)");
  }
}

// Variables of the dlock CLI and of what `dlock run` gives its command (docs/cli.md): they
// share the DLOCK_ prefix and may well be in dlockd's environment.
constexpr std::string_view kClientVariables[] = {
    "DLOCK_SERVER",      "DLOCK_TOKEN",         "DLOCK_TOKEN_FILE", "DLOCK_CACERT",
    "DLOCK_CERT",        "DLOCK_KEY",           "DLOCK_NAMESPACE",  "DLOCK_OWNER",
    "DLOCK_CLOCK_DRIFT", "DLOCK_FENCING_TOKEN", "DLOCK_SESSION_ID", "DLOCK_LOCK_MODE",
    "DLOCK_LEADER_VALUE"};

// Variables of the project's build, test and benchmark scripts (CONTRIBUTING.md): a developer's
// shell or a test's environment has them, and a test's dlockd inherits them.
constexpr std::string_view kToolingVariables[] = {"DLOCK_JOBS",
                                                  "DLOCK_TARGETS",
                                                  "DLOCK_BUILD_TYPE",
                                                  "DLOCK_TEST_JOBS",
                                                  "DLOCK_VENV",
                                                  "DLOCK_SAFETY_LONG",
                                                  "DLOCK_MUTATIONS_LONG",
                                                  "DLOCK_MUTATION_ROW_BUDGET",
                                                  "DLOCK_TEST_FILTER",
                                                  "DLOCK_LIN_SECONDS",
                                                  "DLOCK_FUZZ_SECONDS",
                                                  "DLOCK_FUZZ_URL",
                                                  "DLOCK_FUZZ_TOKEN",
                                                  "DLOCK_PG_BIN_DIR",
                                                  "DLOCK_FAIL_FSYNC_WHEN",
                                                  "DLOCK_CLIENT_HARNESS",
                                                  "DLOCK_CLIENT_SCENARIOS",
                                                  "DLOCK_CLIENT_BACKENDS",
                                                  "DLOCK_CLIENT_ENV",
                                                  "DLOCK_PYTHON_CLIENT",
                                                  "DLOCK_DOC_PAGES",
                                                  "DLOCK_DOC_RUNNER_ARGS",
                                                  "DLOCK_BENCH"};

std::vector<std::string> environment_warnings() {
  std::vector<std::string> settings;
  for (const auto& key : keys()) settings.push_back(env_of(key.name));
  std::vector<std::string> warnings;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const std::string name(text.substr(0, text.find('=')));
    if (name.rfind("DLOCK_", 0) != 0) continue;
    if (std::find(settings.begin(), settings.end(), name) != settings.end()) continue;
    if (std::find(std::begin(kClientVariables), std::end(kClientVariables), name) !=
            std::end(kClientVariables) ||
        std::find(std::begin(kToolingVariables), std::end(kToolingVariables), name) !=
            std::end(kToolingVariables)) {
      continue;
    }
    warnings.push_back("environment " + name + " is not a dlockd setting (ignored)" +
                       did_you_mean(name, settings));
  }
  std::sort(warnings.begin(), warnings.end());
  return warnings;
}

// pg.url with its password replaced: the URL form's user:PASSWORD@ and the keyword form's
// password=... .
std::string redact_pg_url(const std::string& url) {
  std::string out = url;
  if (const auto scheme = out.find("://"); scheme != std::string::npos) {
    const auto at = out.find('@', scheme + 3);
    const auto colon = out.find(':', scheme + 3);
    if (at != std::string::npos && colon != std::string::npos && colon < at) {
      out.replace(colon + 1, at - colon - 1, "REDACTED");
    }
  }
  for (std::size_t at = out.find("password="); at != std::string::npos;
       at = out.find("password=", at + 1)) {
    const auto end = out.find_first_of(" &", at);
    out.replace(at + 9, (end == std::string::npos ? out.size() : end) - at - 9, "REDACTED");
  }
  return out;
}

}  // namespace

bool is_loopback_listen(const std::string& listen) {
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost" || host == "::1") return true;
  boost::system::error_code error;
  const auto address = boost::asio::ip::make_address_v4(host, error);
  return !error && address.is_loopback();
}

ParsedCommandLine load_config(const std::vector<std::string>& args) {
  ParsedCommandLine parsed;
  std::vector<std::pair<const Key*, std::string>> flags;
  std::string config_file;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg == "-h" || arg == "--help") {
      parsed.help = true;
      return parsed;
    }
    std::string value;
    bool has_value = false;
    if (const auto equals = arg.find('='); arg.rfind("--", 0) == 0 && equals != std::string::npos) {
      value = arg.substr(equals + 1);
      arg = arg.substr(0, equals);
      has_value = true;
    }
    if (arg == "--check-config" || arg == "--print-config") {
      if (has_value) throw ConfigError(arg + " takes no value");
      (arg == "--check-config" ? parsed.check_config : parsed.print_config) = true;
      continue;
    }
    if (arg == "--etcd-raise-revision-to") {
      if (!has_value) {
        if (i + 1 >= args.size()) throw ConfigError(arg + " needs a value");
        value = args[++i];
      }
      std::int64_t target = 0;
      const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), target);
      if (error != std::errc() || end != value.data() + value.size() || target <= 0) {
        throw ConfigError(arg + ": '" + value + "' is not a positive revision");
      }
      parsed.etcd_raise_revision_to = target;
      continue;
    }
    const Key* key = nullptr;
    if (arg != "--config") {
      for (const auto& candidate : keys()) {
        if (flag_of(candidate.name) == arg) key = &candidate;
      }
      if (key == nullptr) {
        std::vector<std::string> flags = {"--config", "--check-config", "--print-config"};
        for (const auto& candidate : keys()) flags.push_back(flag_of(candidate.name));
        throw ConfigError("unknown option '" + arg + "'" + did_you_mean(arg, flags) +
                          " (see --help)");
      }
    }
    if (!has_value) {
      if (i + 1 >= args.size()) throw ConfigError(arg + " needs a value");
      value = args[++i];
    }
    if (key == nullptr) {
      config_file = value;
    } else {
      flags.emplace_back(key, value);
    }
  }
  Applied applied;
  if (!config_file.empty()) apply_file(parsed.config, config_file, &applied);
  for (const auto& key : keys()) {
    if (const char* value = std::getenv(env_of(key.name).c_str())) {
      apply(parsed.config, key, value, "environment " + env_of(key.name), &applied);
    }
  }
  parsed.warnings = environment_warnings();
  for (const auto& [key, value] : flags) {
    apply(parsed.config, *key, value, flag_of(key->name), &applied);
    if (std::string_view(key->name) == "admin.token") {
      parsed.config.admin_token_on_command_line = !value.empty();
    }
  }
  check_tls(parsed.config);
  finish_auth(parsed.config);
  if (parsed.config.admin_enabled && parsed.config.admin_token.empty()) {
    throw ConfigError(
        "admin.enabled is true but admin.token is empty: refusing to serve an "
        "unauthenticated admin API");
  }
  if (parsed.config.store.backend == backend_names::kPg && parsed.config.store.pg_url.empty()) {
    throw ConfigError("pg.url is required when lock.backend is pg");
  }
  check_ttl(parsed.config.default_lock_ttl, parsed.config.store.limits, "lock.default.ttl");
  check_ttl(parsed.config.default_session_ttl, parsed.config.store.limits, "session.default.ttl");
  for (const auto& key : keys()) {
    const auto found = applied.find(key.name);
    parsed.settings.push_back(
        found == applied.end()
            ? EffectiveSetting{key.name, key.default_text, "default"}
            : EffectiveSetting{key.name, found->second.first, found->second.second});
  }
  return parsed;
}

std::string print_config(const ParsedCommandLine& parsed) {
  std::ostringstream out;
  out << "# dlockd effective configuration (secrets redacted); usable as --config FILE\n";
  for (const EffectiveSetting& setting : parsed.settings) {
    std::string value = setting.value;
    if (setting.key == "admin.token" && !value.empty()) value = "REDACTED";
    if (setting.key == "pg.url") value = redact_pg_url(value);
    if (setting.source != "default") out << "# from " << setting.source << '\n';
    out << setting.key << " =" << (value.empty() ? "" : " " + value) << '\n';
  }
  return out.str();
}

std::string help_text() {
  std::ostringstream out;
  out << "dlockd - the dlock lock server: sessions, locks with fencing tokens, HTTP/JSON API\n\n"
         "USAGE\n  dlockd [--config FILE] [--KEY VALUE]...\n"
         "  dlockd [--config FILE] [--KEY VALUE]... --check-config | --print-config\n"
         "  dlockd --version\n\n"
         "Every setting below can come from, later winning: the --config FILE (lines\n"
         "'key = value', values without quotes, '#' comments), the environment variable\n"
         "shown, or the flag.\n"
         "Durations are written 500ms, 30s, 5m or 1h. An unknown key or a bad value stops\n"
         "start-up with a message naming it.\n\nSETTINGS\n";
  for (const auto& key : keys()) {
    out << "  " << flag_of(key.name) << " VALUE\n      " << key.help << "\n      key " << key.name
        << ", env " << env_of(key.name) << ", default "
        << (*key.default_text ? key.default_text : "(none)") << "\n";
  }
  out << "\nEXAMPLES\n  dlockd                                   # embedded store in ./dlock-data\n"
         "  dlockd --lock-backend pg --pg-url postgresql://dlock@db/dlock\n"
         "  DLOCK_LOCK_BACKEND=etcd dlockd --etcd-endpoints http://10.0.0.1:2379\n\n"
         "CHECKING A CONFIGURATION\n"
         "  --check-config  validate the settings, the TLS files and the tokens file as\n"
         "      start-up does (without opening the store); exit 0, or 2 with the error\n"
         "      naming the key.\n"
         "  --print-config  print the effective settings (file, environment and flags\n"
         "      applied) as a --config file, secrets redacted; exit 0.\n"
         "  A DLOCK_* environment variable that is no setting (nor one of the dlock CLI's)\n"
         "  is warned about on stderr and ignored.\n\n"
         "SIGNALS\n  SIGTERM, SIGINT: stop accepting, answer waiters 503, finish in-flight "
         "requests, exit 0.\n"
         "  SIGHUP: re-read auth.tokens.file (sessions and locks stay; a bad file is\n"
         "      logged and the old table kept) and, with TLS, the certificate, key and\n"
         "      client CA for new connections (a bad new set is logged, the old one kept).\n"
         "      Without either, it is logged and changes nothing.\n\n"
         "AFTER AN ETCD SNAPSHOT RESTORE (docs/fencing.md, ADR-0010)\n"
         "  dlockd --etcd-endpoints URLS --etcd-raise-revision-to N\n"
         "      Do not serve: write a scratch key until the cluster's revision is at least N\n"
         "      (the highest fencing token issued before the restore, plus a margin), print\n"
         "      progress, exit 0. Run it before any dlockd serves the restored cluster.\n";
  return out.str();
}

}  // namespace dlock::server
