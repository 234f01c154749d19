#include "store/etcd/etcd_keys.h"

#include <algorithm>

#include <charconv>

#include "dlock/errors.h"
#include "util/store_key.h"

namespace dlock::store::etcd {
namespace {

constexpr std::string_view kLockSegment = "/lock/";
constexpr std::string_view kSessionLocksSegment = "/locks/";

}  // namespace

std::string format_lock_key(std::string_view key) {
  const auto parts = store_key::split(key);
  if (!parts || parts->ns.empty() || parts->key.empty()) {
    throw InvalidArgumentError("key",
                               "key must be <namespace>/<name>, got '" + std::string(key) + "'");
  }
  std::string etcd_key(kRootPrefix);
  etcd_key.append(parts->ns);
  etcd_key.append(kLockSegment);
  etcd_key.append(parts->key);
  return etcd_key;
}

std::optional<std::string> parse_lock_key(std::string_view etcd_key) {
  if (!etcd_key.starts_with(kRootPrefix)) return std::nullopt;
  const std::string_view rest = etcd_key.substr(kRootPrefix.size());
  // The namespace holds no '/', so the first "/lock/" ends it.
  const auto segment = rest.find(kLockSegment);
  if (segment == std::string_view::npos || segment == 0) return std::nullopt;
  if (rest.substr(0, segment).find('/') != std::string_view::npos) return std::nullopt;
  const std::string_view name = rest.substr(segment + kLockSegment.size());
  if (name.empty()) return std::nullopt;
  return store_key::join(rest.substr(0, segment), name);
}

bool is_session_id(std::string_view session_id) {
  return session_id.size() == 32 && std::all_of(session_id.begin(), session_id.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string session_record_key(std::string_view session_id) {
  return std::string(kSessionPrefix) + std::string(session_id);
}

std::string session_lock_key(std::string_view session_id, std::string_view key) {
  return session_locks_prefix(session_id) + std::string(key);
}

std::string session_locks_prefix(std::string_view session_id) {
  return std::string(kSessionPrefix) + std::string(session_id) + std::string(kSessionLocksSegment);
}

std::optional<SessionKeyParts> parse_session_key(std::string_view etcd_key) {
  if (!etcd_key.starts_with(kSessionPrefix)) return std::nullopt;
  const std::string_view rest = etcd_key.substr(kSessionPrefix.size());
  const auto slash = rest.find('/');
  const std::string_view session_id = rest.substr(0, slash);
  if (!is_session_id(session_id)) return std::nullopt;
  if (slash == std::string_view::npos) return SessionKeyParts{std::string(session_id), ""};
  const std::string_view tail = rest.substr(slash);
  if (!tail.starts_with(kSessionLocksSegment) || tail.size() == kSessionLocksSegment.size()) {
    return std::nullopt;
  }
  return SessionKeyParts{std::string(session_id),
                         std::string(tail.substr(kSessionLocksSegment.size()))};
}

std::string prefix_range_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

std::string scan_prefix_for(std::string_view prefix) {
  const auto slash = prefix.find('/');
  if (slash == std::string_view::npos || slash == 0) {
    return std::string(kRootPrefix) + std::string(prefix);
  }
  return std::string(kRootPrefix) + std::string(prefix.substr(0, slash)) +
         std::string(kLockSegment) + std::string(prefix.substr(slash + 1));
}

}  // namespace dlock::store::etcd
