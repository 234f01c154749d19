#pragma once

// The store key of a lock is "<ns>/<key>" (contract C3, "Namespaces"): the namespace, one '/', then
// the key as the API shows it. The namespace never holds a '/' (src/server/input_checks.cc), so
// the first '/' ends it; the key may hold more. The one place that joins and splits it.

#include <optional>
#include <string>
#include <string_view>

namespace dlock::store_key {

inline constexpr char kSeparator = '/';

inline std::string join(std::string_view ns, std::string_view key) {
  std::string joined;
  joined.reserve(ns.size() + 1 + key.size());
  joined.append(ns);
  joined.push_back(kSeparator);
  joined.append(key);
  return joined;
}

struct Parts {
  std::string_view ns;
  std::string_view key;
};

// Splits at the first '/'; nullopt when there is none.
inline std::optional<Parts> split(std::string_view stored) {
  const auto slash = stored.find(kSeparator);
  if (slash == std::string_view::npos) return std::nullopt;
  return Parts{stored.substr(0, slash), stored.substr(slash + 1)};
}

// The key as the API shows it: without its namespace (the whole text if it has none).
inline std::string_view api_key(std::string_view stored) {
  const auto parts = split(stored);
  return parts ? parts->key : stored;
}

}  // namespace dlock::store_key
