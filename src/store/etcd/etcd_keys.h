#pragma once

// The etcd key layout (seed T-030): one key per lock, /dlock/<namespace>/lock/<key>; one record
// per session, /dlock/_sessions/<session_id>; and one index entry per grant,
// /dlock/_sessions/<session_id>/locks/<namespace>/<key>, attached to the grant's lease so it
// lives exactly as long as the grant. Only this file knows the layout.
//
// Holder sets (docs/adr/0020-more-primitives-design.md) live under a root of their own,
// /dlock_holders/<escaped SPI key>\0, so no name's holders share a range with another name's
// keys or with any lock key (a store key may hold '/' and even '\0'; the escaping turns each
// '\0' of the key into "\0\xff", so the terminating "\0" followed by 'h' ends the name):
//   <H>hs<session_id>        a shared holder (one per session)
//   <H>hp<LLLL><IIII>        permit slot IIII of a name with LLLL permits (4 decimal digits each:
//                            the limit is part of the key, so "no holder of another limit" is
//                            two range compares and no limit record can outlive its permits)
// and the session index entry of a holder, /dlock/_sessions/<session_id>/holders/<SPI key>,
// whose value (HolderEntry) names the holder key.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dlock::store::etcd {

inline constexpr std::string_view kRootPrefix = "/dlock/";
inline constexpr std::string_view kSessionPrefix = "/dlock/_sessions/";

// "<namespace>/<key>" (split at the first '/') -> "/dlock/<namespace>/lock/<key>". Throws
// InvalidArgumentError("key") when the key has no namespace or no name.
std::string format_lock_key(std::string_view key);

// The inverse of format_lock_key; std::nullopt for an etcd key that is not a lock key (a session
// record, anything outside /dlock/).
std::optional<std::string> parse_lock_key(std::string_view etcd_key);

// A session ID is 128 random bits in 32 lowercase hex digits (never the lease ID: C2, ADR-0006);
// the session record maps it to its lease. False when `session_id` cannot be one.
bool is_session_id(std::string_view session_id);

// The session's record (owner, TTL, lease ID), put on the session's lease.
std::string session_record_key(std::string_view session_id);

// The index entry naming `key` (an SPI key) among the grants of `session_id`, and the prefix of
// all of them.
std::string session_lock_key(std::string_view session_id, std::string_view key);
std::string session_locks_prefix(std::string_view session_id);

// The session index entry of `session_id`'s holder of `key`, and the prefix of all of them.
std::string session_holder_key(std::string_view session_id, std::string_view key);
std::string session_holders_prefix(std::string_view session_id);

// For a key under kSessionPrefix: the session ID it belongs to and, for an index entry, the SPI
// key of the grant it names (empty for the session record itself). std::nullopt otherwise.
struct SessionKeyParts {
  std::string session_id;
  std::string lock_key;
  // The entry names a holder (session_holder_key), not an exclusive grant.
  bool holder = false;
};
std::optional<SessionKeyParts> parse_session_key(std::string_view etcd_key);

// The smallest key greater than every key starting with `prefix` (etcd's range_end for a
// prefix range); "\0" (all keys) when no such key exists.
std::string prefix_range_end(std::string_view prefix);

// Where a scan for SPI keys starting with `prefix` begins: lock keys of one namespace when the
// prefix names it, otherwise every namespace starting with the prefix (callers filter with
// parse_lock_key and the SPI prefix, which also drops session records).
std::string scan_prefix_for(std::string_view prefix);

inline constexpr std::string_view kHolderPrefix = "/dlock_holders/";

// A range of etcd keys, [begin, end).
struct KeyRange {
  std::string begin;
  std::string end;
};

// The holder keys of one SPI key (every mode), its shared holders, and its permit slots.
KeyRange holder_range(std::string_view key);
KeyRange shared_range(std::string_view key);
KeyRange permit_range(std::string_view key);
// The permit slots of `key` for a limit of `limit`.
KeyRange permit_range_of_limit(std::string_view key, std::uint32_t limit);
std::string shared_holder_key(std::string_view key, std::string_view session_id);
std::string permit_slot_key(std::string_view key, std::uint32_t limit, std::uint32_t slot);

// The SPI key of a holder key; std::nullopt for any other etcd key.
std::optional<std::string> parse_holder_key(std::string_view etcd_key);
// For a permit slot key: its limit and slot. std::nullopt for any other key.
struct PermitSlot {
  std::uint32_t limit = 0;
  std::uint32_t slot = 0;
};
std::optional<PermitSlot> parse_permit_slot(std::string_view etcd_key);

// Where a scan for holder keys of SPI keys starting with `prefix` begins (a prefix range).
std::string holder_scan_prefix_for(std::string_view prefix);

// Lock-delay (docs/adr/0020, etcd_delays.h) lives under a root of its own, escaped as for
// holders: /dlock_delay/<escaped SPI key>\0, then
//   m<grant key>   the delay marker of the grant whose etcd key (lock or holder key) follows,
//                  lease-less, put by the granting Txn of a session with a lock-delay
//   d<grant key>   a running delay of that (ended) grant, on a lease of the delay's length
inline constexpr std::string_view kDelayPrefix = "/dlock_delay/";
// Every marker and delay of `key`; its markers; its running delays.
KeyRange delay_state_range(std::string_view key);
KeyRange marker_range(std::string_view key);
KeyRange delay_range(std::string_view key);
std::string marker_key(std::string_view key, std::string_view grant_key);
std::string delay_key(std::string_view key, std::string_view grant_key);
// For a marker or delay key: the SPI key, whether it is a marker, and the grant key it names.
struct DelayStateKey {
  std::string key;
  bool marker = false;
  std::string grant_key;
};
std::optional<DelayStateKey> parse_delay_state_key(std::string_view etcd_key);
// Where a scan for the markers and delays of SPI keys starting with `prefix` begins (a prefix
// range; escape() keeps prefixes).
std::string delay_scan_prefix_for(std::string_view prefix);

}  // namespace dlock::store::etcd
