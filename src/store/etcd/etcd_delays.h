#pragma once

// Lock-delay on etcd (docs/adr/0020-more-primitives-design.md "Lock-delay", C2 "Lock-delay").
// A lease expiry deletes a grant key without a trace and etcd has no clock a Txn can read, so:
// - the granting Txn of a session with a lock-delay also puts a lease-less *marker*
//   (etcd_keys.h: marker_key(name, grant key), value: the delay in ms); a release deletes it in
//   the same Txn, a hand-over rewrites (or deletes) it for the new holder's session;
// - a marker whose grant key is gone is a grant that ended without a release. Whoever finds one
//   (an acquire that was refused because of it, the reaper) *converts* it in one Txn, guarded by
//   the marker being unchanged and the grant key absent, into a delay key on a fresh lease of
//   ceil(delay / 1 s) s, granted after the grant was seen gone: the delay starts no earlier than
//   the end, measured by etcd's lease clock;
// - revoke deletes the grants and their markers and puts their delay keys in one Txn (a lease
//   granted before that Txn, so one second longer);
// - every acquire Txn guards on the name's delay state: exclusive grants (and every grant while
//   no holder of the name has a marker) on the whole state range being empty (one compare);
//   a holder, while live holders have markers, on no delay key, no marker written since a read
//   that found every marker's grant alive, and each of those grants unchanged;
// - the store's release watch covers the state range, so a delay key's deletion (its lease
//   expired) wakes the waiters.
// With no lock-delay nothing is written: an acquire carries one more compare, a refused one one
// more read in its failure branch.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlock/types.h"
#include "store/etcd/etcd_client.h"
#include "store/etcd/etcd_sessions.h"

namespace dlock::store::etcd {

// What settle_delays found: `delayed` when a delay runs (or was started now); otherwise the live
// grants that have markers, as of `revision`, for delay_guard.
struct DelayState {
  bool delayed = false;
  std::int64_t revision = 0;
  std::vector<std::pair<std::string, std::int64_t>> marked_grants;  // grant key, mod revision
};

// The compare(s) that keep an acquire Txn of `key` from granting during a delay: no marker and
// no delay at all (`seen` null), or what `seen` (not delayed) allows.
void add_delay_guard(etcdserverpb::TxnRequest& request, std::string_view key,
                     const DelayState* seen = nullptr);
// A failure-branch read of `key`'s delay state; delay_state_seen tells, from the answer's
// `index`-th response, whether it held anything (then settle_delays says more).
void add_delay_state_read(etcdserverpb::TxnRequest& request, std::string_view key);
bool delay_state_seen(const etcdserverpb::TxnResponse& response, int index);

// The marker of grant `grant_key` of `key` for a session with `delay` (nothing when 0).
void add_marker_put(etcdserverpb::TxnRequest& request, std::string_view key,
                    const std::string& grant_key, std::chrono::milliseconds delay);
// The marker's delete, unless `delay` says for sure the session has none (it wrote no marker).
void add_marker_delete(etcdserverpb::TxnRequest& request, std::string_view key,
                       const std::string& grant_key,
                       std::optional<std::chrono::milliseconds> delay);
// A hand-over to a session with `next_delay` of a grant of a session with `previous_delay`.
void add_marker_handover(etcdserverpb::TxnRequest& request, std::string_view key,
                         const std::string& grant_key, std::chrono::milliseconds next_delay,
                         std::optional<std::chrono::milliseconds> previous_delay);

// Reads `key`'s delay state with its grants (one snapshot) and converts every marker whose grant
// is gone into a delay.
DelayState settle_delays(EtcdClient& client, std::string_view key);
// The reaper's part: converts every marker (of any name) whose grant is gone.
void settle_all_delays(EtcdClient& client);
// revoke: `request` (the deletes of every grant of `key`) plus, for each marker, its delete and
// a delay key, in one Txn; retried while markers change. The response's first operations are
// `request`'s.
etcdserverpb::TxnResponse revoke_with_delays(EtcdClient& client, std::string_view key,
                                             const etcdserverpb::TxnRequest& request);
// LockStore::list_delays: every delay key of a name starting with `prefix` ends when its lease
// does (LeaseTimeToLive counts whole seconds, so the end is rounded up to the next one); a marker
// whose grant is gone is a delay that starts when it is converted, shown as starting now.
// Only names greater than `after` are listed (a page; their range is still read through).
std::vector<KeyDelay> list_delays(EtcdClient& client, std::string_view prefix,
                                  std::string_view after, std::size_t limit);
// LockStore::clear_delay: converts `key`'s markers of ended grants (settle_delays), then deletes
// every delay key of `key` in one Txn; whether one was deleted. Markers of live grants stay.
bool clear_delays(EtcdClient& client, std::string_view key);

// close_session's part, before the session's lease is revoked: deletes the markers of the
// session's grants (a close ends them cleanly).
void clear_markers_of(EtcdClient& client, std::string_view session_id);

}  // namespace dlock::store::etcd
