#pragma once

// The session half of the etcd store (docs/adr/0006-etcd-store.md): a session is an etcd lease
// carrying the session's record, /dlock/_sessions/<id>. The ID is 128 random bits (C2), never
// the lease ID; the record, put on the lease, maps it to the lease and dies with it. Every
// dlockd sharing the etcd resolves an ID through the record; each caches what it resolved.
// A session's grants are found through their index entries.

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dlock/errors.h"
#include "dlock/lock_store.h"
#include "store/etcd/etcd_client.h"
#include "store/etcd/etcd_keys.h"
#include "store/etcd/etcd_leases.h"
#include "store/etcd/etcd_records.h"

namespace dlock::store::etcd {

SessionNotFoundError session_not_found(std::string_view session_id);

// The keys one reap pass reads of the session prefix (docs/adr/0022): at the default reap
// interval (1 s, core::ServiceOptions::reap_interval) each dlockd reads at most this many keys per
// second there.
inline constexpr std::int64_t kReapPageKeys = 1000;

// A bounded, resumable walk over the keys of a prefix (the reaper's scan, docs/adr/0022): each
// next() reads one page of at most `page_keys` keys (keys only) from where the last one stopped,
// at etcd's current revision, and the page after the prefix's last starts over at its beginning.
// So a reap pass reads one page whatever the number of keys; a full walk over N keys takes about
// N / page_keys passes. Thread-safe.
//
// etcd 3.4 answers a Range after walking every key from its start to its range_end, not just the
// page (for the count it returns), so a page read up to the prefix's end costs etcd in
// proportion to all the keys after it. The walk therefore reads slices of the prefix: the key
// space after the prefix is cut at evenly spaced 3-digit lower-case hex boundaries (session IDs
// are random hex), and a page never reads past its slice's end. The number of slices is chosen
// at the start of each walk from the keys the last walk saw, so that a slice holds about 7/8 of
// a page (1 slice, the whole prefix, for the first walk and for few keys; at most kMaxSlices). Any
// key under the prefix lies in exactly one slice, hex or not.
class PrefixCursor {
 public:
  PrefixCursor(std::string prefix, std::int64_t page_keys)
      : prefix_(std::move(prefix)), page_keys_(page_keys) {}
  etcdserverpb::RangeResponse next(EtcdClient& client);
  // Walks finished so far (the last page of the last slice read), for tests.
  std::uint64_t walks() const;

  static constexpr std::uint64_t kMaxSlices = 4096;

 private:
  // The first key of slice `index` of `count` (the prefix itself for slice 0).
  std::string slice_start(std::uint64_t index, std::uint64_t count) const;

  mutable std::mutex mutex_;
  const std::string prefix_;
  const std::int64_t page_keys_;
  std::uint64_t slices_ = 1;     // this walk's
  std::uint64_t slice_ = 0;      // the slice being read
  std::string resume_at_;        // the next page's first key; empty: the slice's beginning
  std::uint64_t keys_seen_ = 0;  // by this walk so far
  std::uint64_t walks_ = 0;
};

class Sessions {
 public:
  Sessions(EtcdClient& client, GrantLeases& leases)
      : client_(client),
        leases_(leases),
        reap_cursor_(std::string(kSessionPrefix), kReapPageKeys) {}
  Sessions(const Sessions&) = delete;
  Sessions& operator=(const Sessions&) = delete;

  SessionInfo open(std::string_view owner_id, std::chrono::milliseconds ttl,
                   std::chrono::milliseconds lock_delay);
  SessionInfo heartbeat(std::string_view session_id);
  // SessionRegistry::try_heartbeat_async: for a session whose record is cached and whose lease
  // is known to live past EtcdClient::kSharedStreamMargin, while the shared keep-alive stream is
  // open (KeepAliveStream::start_async); anything else is heartbeat's to do.
  bool try_heartbeat_async(std::string_view session_id, SessionRegistry::HeartbeatDone& done);
  std::optional<SessionInfo> get(std::string_view session_id);
  std::vector<LockInfo> close(std::string_view session_id);
  // SessionRegistry::list_sessions: a walk of the session records from `after`, each read as
  // get() reads it (one LeaseTimeToLive per record), filtered by owner.
  std::vector<SessionInfo> list(std::string_view owner_prefix, std::string_view after,
                                std::size_t limit);
  // SessionRegistry::session_grants: the grants its index entries name that are still its own.
  std::vector<LockInfo> grants(std::string_view session_id);
  // Ends the grants whose session ended first (their own leases would keep them): of the
  // sessions with index entries on the next page of the session prefix (PrefixCursor), so a
  // pass reads one page however many sessions live (docs/adr/0022).
  ReapReport reap_expired();

  // The record of `session_id` (its owner, TTL and lease): from the cache, else from etcd.
  // std::nullopt when there is none (never opened, closed or expired).
  std::optional<SessionRecord> lookup(std::string_view session_id);
  // The lock-delay of `session_id` as far as this store knows without asking etcd: std::nullopt
  // when the session is not cached (a caller that must not miss a marker then assumes one).
  std::optional<std::chrono::milliseconds> cached_lock_delay(std::string_view session_id);
  // Evidence that the session ended: drop it from the cache.
  void forget(std::string_view session_id);
  // Until when the session's lease (and every session-bound grant on it) is certain to live: as
  // noted by an open or heartbeat through this store, else asked of etcd (whole seconds, rounded
  // down). std::nullopt when the lease is gone.
  std::optional<SteadyClock::time_point> alive_until(const SessionRecord& record);
  // For a session-bound grant: the live session's record and alive_until; SessionNotFoundError
  // when it is gone.
  struct LiveSession {
    SessionRecord record;
    SteadyClock::time_point until;
  };
  LiveSession live(std::string_view session_id);

 private:
  void remember(const std::string& session_id, const SessionRecord& record);
  // heartbeat's answer once etcd renewed `record`'s lease for `renewed_seconds` (0: the lease
  // is gone: the session is forgotten and SessionNotFoundError thrown), counted from the send.
  SessionInfo renewed(std::string_view session_id, const SessionRecord& record,
                      std::int64_t renewed_seconds, WallClock::time_point sent_at,
                      SteadyClock::time_point steady_sent_at);
  // The session-bound grants of `record`'s session, read before its lease is revoked.
  std::vector<LockInfo> session_bound_grants(std::string_view session_id,
                                             const SessionRecord& record);

  EtcdClient& client_;
  GrantLeases& leases_;
  std::mutex cache_mutex_;
  // Session ID -> its record. A record never changes while its lease lives, and a lease found
  // gone evicts it; bounded (one entry dropped when full), a miss only costs one Range.
  std::unordered_map<std::string, SessionRecord> cache_;
  PrefixCursor reap_cursor_;
};

}  // namespace dlock::store::etcd
