#pragma once

// Server URL parsing and the percent-encoding C3 prescribes: a key is one path segment
// ("payouts/batch-17" travels as "payouts%2Fbatch-17").

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock::client::detail {

struct ServerAddress {
  std::string host;
  std::string port;
  // Path prefix without a trailing slash ("" or e.g. "/dlock"), prepended to every /v1 target.
  std::string base_path;
  // https:// (default port 443) rather than http:// (default port 80).
  bool tls = false;
};

// Accepts http(s)://host[:port][/prefix]. Throws InvalidArgumentError(field "server") for
// anything else.
ServerAddress parse_server_url(std::string_view url);

// Splits a comma-separated list of server URLs ("http://a:7070,http://b:7070"), dropping
// blanks around and between the commas.
std::vector<std::string> split_server_list(std::string_view list);

// Encodes every byte outside RFC 3986 "unreserved" (A-Z a-z 0-9 - . _ ~), so '/', '?', '%',
// '#', spaces and UTF-8 all survive as one path segment or one query value.
std::string percent_encode(std::string_view text);

// "?a=1&b=x%2Fy" from the non-empty values, or "" when all are empty.
std::string query_string(const std::vector<std::pair<std::string, std::string>>& params);

// "/v1/elections/<name percent-encoded><action>?ns=..&<query>" (C3 "Elections"); `action` is
// "" (the read and observe) or "/campaign", "/proclaim", "/resign".
std::string election_target(const std::string& name, const std::string& action,
                            const std::string& ns,
                            std::vector<std::pair<std::string, std::string>> query = {});

}  // namespace dlock::client::detail
