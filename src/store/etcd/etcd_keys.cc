#include "store/etcd/etcd_keys.h"

#include <algorithm>

#include <charconv>
#include <utility>

#include "dlock/errors.h"
#include "util/limits.h"
#include "util/store_key.h"

namespace dlock::store::etcd {
namespace {

constexpr std::string_view kLockSegment = "/lock/";
constexpr std::string_view kSessionLocksSegment = "/locks/";
constexpr std::string_view kSessionHoldersSegment = "/holders/";
// Four decimal digits per limit and slot in a permit slot key.
static_assert(limits::kMaxSemaphoreLimit < 10000);
constexpr std::size_t kSlotDigits = 4;

// '\0' -> "\0\xff": order- and prefix-preserving, and never "\0" followed by another byte.
std::string escape(std::string_view key) {
  std::string out;
  out.reserve(key.size() + 2);
  for (const char c : key) {
    out.push_back(c);
    if (c == '\0') out.push_back('\xff');
  }
  return out;
}

// "/dlock_holders/<escaped key>\0h": every holder key of `key` starts with it.
std::string holder_base(std::string_view key) {
  std::string base(kHolderPrefix);
  base.append(escape(key));
  base.push_back('\0');
  base.push_back('h');
  return base;
}

// "/dlock_delay/<escaped key>\0": every marker and delay key of `key` starts with it.
std::string delay_base(std::string_view key) {
  std::string base(kDelayPrefix);
  base.append(escape(key));
  base.push_back('\0');
  return base;
}

// Undoes escape() on `rest` up to its terminating '\0' (not followed by '\xff'); the key and
// the index of that '\0', or std::nullopt when there is none or the key is empty.
std::optional<std::pair<std::string, std::size_t>> unescape_name(std::string_view rest) {
  std::string key;
  for (std::size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] != '\0') {
      key.push_back(rest[i]);
    } else if (i + 1 < rest.size() && rest[i + 1] == '\xff') {
      key.push_back('\0');
      ++i;
    } else {
      if (key.empty()) return std::nullopt;
      return std::make_pair(std::move(key), i);
    }
  }
  return std::nullopt;
}

std::string digits(std::uint32_t value) {
  std::string out = std::to_string(value);
  return std::string(kSlotDigits - std::min(kSlotDigits, out.size()), '0') + out;
}

KeyRange prefix_range(std::string prefix) {
  std::string end = prefix_range_end(prefix);
  return KeyRange{std::move(prefix), std::move(end)};
}

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
  // "<ns>/lock/<name>": the namespace holds no '/', so store_key's split ends it at the first one.
  const auto parts = store_key::split(etcd_key.substr(kRootPrefix.size()));
  if (!parts || parts->ns.empty()) return std::nullopt;
  const std::string_view lock_segment = kLockSegment.substr(1);  // "lock/", after the split's '/'
  if (!parts->key.starts_with(lock_segment)) return std::nullopt;
  const std::string_view name = parts->key.substr(lock_segment.size());
  if (name.empty()) return std::nullopt;
  return store_key::join(parts->ns, name);
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

std::string session_holder_key(std::string_view session_id, std::string_view key) {
  return session_holders_prefix(session_id) + std::string(key);
}

std::string session_holders_prefix(std::string_view session_id) {
  return std::string(kSessionPrefix) + std::string(session_id) +
         std::string(kSessionHoldersSegment);
}

std::optional<SessionKeyParts> parse_session_key(std::string_view etcd_key) {
  if (!etcd_key.starts_with(kSessionPrefix)) return std::nullopt;
  const std::string_view rest = etcd_key.substr(kSessionPrefix.size());
  const auto slash = rest.find('/');
  const std::string_view session_id = rest.substr(0, slash);
  if (!is_session_id(session_id)) return std::nullopt;
  if (slash == std::string_view::npos) return SessionKeyParts{std::string(session_id), ""};
  const std::string_view tail = rest.substr(slash);
  for (const auto segment : {kSessionLocksSegment, kSessionHoldersSegment}) {
    if (tail.starts_with(segment) && tail.size() > segment.size()) {
      return SessionKeyParts{std::string(session_id), std::string(tail.substr(segment.size())),
                             segment == kSessionHoldersSegment};
    }
  }
  return std::nullopt;
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
  const auto parts = store_key::split(prefix);
  if (!parts || parts->ns.empty()) return std::string(kRootPrefix) + std::string(prefix);
  return std::string(kRootPrefix) + std::string(parts->ns) + std::string(kLockSegment) +
         std::string(parts->key);
}

KeyRange holder_range(std::string_view key) { return prefix_range(holder_base(key)); }
KeyRange shared_range(std::string_view key) { return prefix_range(holder_base(key) + "s"); }
KeyRange permit_range(std::string_view key) { return prefix_range(holder_base(key) + "p"); }

KeyRange permit_range_of_limit(std::string_view key, std::uint32_t limit) {
  return prefix_range(holder_base(key) + "p" + digits(limit));
}

std::string shared_holder_key(std::string_view key, std::string_view session_id) {
  return holder_base(key) + "s" + std::string(session_id);
}

std::string permit_slot_key(std::string_view key, std::uint32_t limit, std::uint32_t slot) {
  return holder_base(key) + "p" + digits(limit) + digits(slot);
}

std::optional<std::string> parse_holder_key(std::string_view etcd_key) {
  if (!etcd_key.starts_with(kHolderPrefix)) return std::nullopt;
  const std::string_view rest = etcd_key.substr(kHolderPrefix.size());
  auto name = unescape_name(rest);
  if (!name || name->second + 1 >= rest.size() || rest[name->second + 1] != 'h') {
    return std::nullopt;
  }
  return std::move(name->first);
}

std::optional<PermitSlot> parse_permit_slot(std::string_view etcd_key) {
  const auto key = parse_holder_key(etcd_key);
  if (!key) return std::nullopt;
  const std::string base = holder_base(*key) + "p";
  if (!etcd_key.starts_with(base) || etcd_key.size() != base.size() + 2 * kSlotDigits) {
    return std::nullopt;
  }
  const std::string_view numbers = etcd_key.substr(base.size());
  PermitSlot slot;
  const auto* first = numbers.data();
  if (std::from_chars(first, first + kSlotDigits, slot.limit).ec != std::errc() ||
      std::from_chars(first + kSlotDigits, first + 2 * kSlotDigits, slot.slot).ec != std::errc()) {
    return std::nullopt;
  }
  return slot;
}

std::string holder_scan_prefix_for(std::string_view prefix) {
  return std::string(kHolderPrefix) + escape(prefix);
}

KeyRange delay_state_range(std::string_view key) { return prefix_range(delay_base(key)); }
KeyRange marker_range(std::string_view key) { return prefix_range(delay_base(key) + "m"); }
KeyRange delay_range(std::string_view key) { return prefix_range(delay_base(key) + "d"); }

std::string marker_key(std::string_view key, std::string_view grant_key) {
  return delay_base(key) + "m" + std::string(grant_key);
}

std::string delay_key(std::string_view key, std::string_view grant_key) {
  return delay_base(key) + "d" + std::string(grant_key);
}

std::string delay_scan_prefix_for(std::string_view prefix) {
  return std::string(kDelayPrefix) + escape(prefix);
}

std::optional<DelayStateKey> parse_delay_state_key(std::string_view etcd_key) {
  if (!etcd_key.starts_with(kDelayPrefix)) return std::nullopt;
  const std::string_view rest = etcd_key.substr(kDelayPrefix.size());
  auto name = unescape_name(rest);
  if (!name || name->second + 2 >= rest.size()) return std::nullopt;
  const char kind = rest[name->second + 1];
  if (kind != 'm' && kind != 'd') return std::nullopt;
  return DelayStateKey{std::move(name->first), kind == 'm',
                       std::string(rest.substr(name->second + 2))};
}

}  // namespace dlock::store::etcd
