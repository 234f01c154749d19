#pragma once

// The size limits of contract C3, defined once. The server checks the tight, documented limits
// at its boundary (src/server/input_checks.cc); the looser field limit is checked for every store
// at the store boundary (util::ValidatingBackend, src/util/validating_backend.h), and any key the
// server lets through satisfies it.
// TTL bounds are configuration (TtlLimits in include/dlock/lock_store.h, lock.min.ttl and
// lock.max.ttl); the longest wait is server.max.wait (ServerConfig::max_wait), checked by the
// server and again by the lock service with the same value.

#include <cstddef>
#include <cstdint>

namespace dlock::limits {

inline constexpr std::size_t kMaxKeyBytes = 512;        // a key as the API shows it
inline constexpr std::size_t kMaxNamespaceBytes = 64;   // `ns`
inline constexpr std::size_t kMaxOwnerBytes = 256;      // a session's owner
inline constexpr std::size_t kMaxSessionIdBytes = 128;  // as the API accepts it
inline constexpr std::size_t kMaxListLimit = 1000;      // GET /v1/locks ?limit=
inline constexpr std::size_t kDefaultListLimit = 100;
// The most permits a semaphore may have (`limit`, ADR-0020): etcd keeps one key per permit.
inline constexpr std::uint32_t kMaxSemaphoreLimit = 1024;
// The longest value of an election's leader (`value`, ADR-0020), in bytes.
inline constexpr std::size_t kMaxLeaderValueBytes = 1024;
// What a store accepts for any text field, the "<ns>/<key>" store key included.
inline constexpr std::size_t kMaxStoreFieldBytes = 1024;

static_assert(kMaxNamespaceBytes + 1 + kMaxKeyBytes <= kMaxStoreFieldBytes,
              "every store key the API can form must pass the stores' own check");
static_assert(kMaxOwnerBytes <= kMaxStoreFieldBytes && kMaxSessionIdBytes <= kMaxStoreFieldBytes);

}  // namespace dlock::limits
