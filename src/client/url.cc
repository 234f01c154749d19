#include "client/url.h"

#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>

#include <algorithm>

#include "dlock/errors.h"

namespace dlock::client::detail {

ServerAddress parse_server_url(std::string_view url) {
  auto parsed = boost::urls::parse_absolute_uri(url);
  if (!parsed) {
    throw InvalidArgumentError("server", "server URL '" + std::string(url) +
                                             "' is not an absolute URL like http://host:7070");
  }
  const boost::urls::url_view& view = *parsed;
  if (view.scheme() != "http" && view.scheme() != "https") {
    throw InvalidArgumentError(
        "server", "server URL '" + std::string(url) + "' must use http:// or https://");
  }
  ServerAddress address;
  address.tls = view.scheme() == "https";
  address.host = std::string(view.encoded_host());
  if (address.host.empty()) {
    throw InvalidArgumentError("server", "server URL '" + std::string(url) + "' has no host");
  }
  // Bracketed IPv6 literals travel without brackets to the resolver.
  if (address.host.size() > 2 && address.host.front() == '[') {
    address.host = address.host.substr(1, address.host.size() - 2);
  }
  address.port = view.has_port() ? std::string(view.port()) : (address.tls ? "443" : "80");
  address.base_path = std::string(view.encoded_path());
  while (!address.base_path.empty() && address.base_path.back() == '/') {
    address.base_path.pop_back();
  }
  if (view.has_query() || view.has_fragment() || view.has_userinfo()) {
    throw InvalidArgumentError("server", "server URL '" + std::string(url) +
                                             "' must not carry credentials, a query or a fragment");
  }
  return address;
}

std::vector<std::string> split_server_list(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    const auto comma = std::min(list.find(','), list.size());
    std::string_view item = list.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    list.remove_prefix(std::min(comma + 1, list.size()));
  }
  return out;
}

std::string percent_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  // "." and ".." as a whole segment are dot-segments that proxies and URL libraries collapse;
  // spelled %2E they reach the server as the key the caller named.
  if (text == "." || text == "..") return text.size() == 1 ? "%2E" : "%2E%2E";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    const bool unreserved = (byte >= 'A' && byte <= 'Z') || (byte >= 'a' && byte <= 'z') ||
                            (byte >= '0' && byte <= '9') || byte == '-' || byte == '.' ||
                            byte == '_' || byte == '~';
    if (unreserved) {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0x0F]);
    }
  }
  return out;
}

std::string query_string(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string out;
  for (const auto& [name, value] : params) {
    if (value.empty()) continue;
    out += out.empty() ? '?' : '&';
    out += name;
    out += '=';
    out += percent_encode(value);
  }
  return out;
}

std::string election_target(const std::string& name, const std::string& action,
                            const std::string& ns,
                            std::vector<std::pair<std::string, std::string>> query) {
  query.emplace(query.begin(), "ns", ns);
  return "/v1/elections/" + percent_encode(name) + action + query_string(query);
}

}  // namespace dlock::client::detail
