#include "store/etcd/etcd_delays.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "store/etcd/etcd_keys.h"
#include "store/etcd/etcd_leases.h"
#include "store/etcd/etcd_records.h"

namespace dlock::store::etcd {
namespace {

using std::chrono::milliseconds;

// Lost races (a marker written or deleted between the read and the Txn) before a revoke gives up
// with ContentionError.
constexpr int kMaxAttempts = 16;

milliseconds marker_delay(const mvccpb::KeyValue& marker) {
  std::int64_t ms = 0;
  const auto& value = marker.value();
  if (std::from_chars(value.data(), value.data() + value.size(), ms).ec != std::errc() || ms < 0) {
    throw InternalError("etcd key " + marker.key() + " is not a lock-delay marker");
  }
  return milliseconds(ms);
}

// ModRevision < `revision` for every key of `range`: nothing in it was written at or after it.
etcdserverpb::Compare compare_unchanged_since(const KeyRange& range, std::int64_t revision) {
  etcdserverpb::Compare compare = compare_mod_revision(range.begin, revision);
  compare.set_result(etcdserverpb::Compare::LESS);
  compare.set_range_end(range.end);
  return compare;
}

void revoke_quietly(EtcdClient& client, std::int64_t lease_id) {
  try {
    client.lease_revoke(lease_id);
  } catch (const Error&) {
    // Unused; it expires by itself.
  }
}

// Converts `marker` (of grant `grant_key` of `key`) into a delay, if its grant is still gone.
void convert(EtcdClient& client, std::string_view key, const mvccpb::KeyValue& marker,
             const std::string& grant_key) {
  // Granted after the grant was seen gone: the delay starts no earlier than the grant's end.
  const std::int64_t lease_id = client.lease_grant(lease_seconds(marker_delay(marker))).id();
  etcdserverpb::TxnRequest request;
  *request.add_compare() = compare_mod_revision(marker.key(), marker.mod_revision());
  *request.add_compare() = compare_create_revision(grant_key, 0);
  *request.add_success() = delete_op(marker.key());
  *request.add_success() = put_op(delay_key(key, grant_key), "", lease_id);
  if (!client.txn(request, CallKind::kWrite).succeeded()) revoke_quietly(client, lease_id);
}

etcdserverpb::RequestOp delete_range_op(const KeyRange& range) {
  etcdserverpb::RequestOp op;
  op.mutable_request_delete_range()->set_key(range.begin);
  op.mutable_request_delete_range()->set_range_end(range.end);
  return op;
}

// The SPI key of a lock or holder key.
std::optional<std::string> name_of(const std::string& grant_key) {
  if (auto key = parse_lock_key(grant_key)) return key;
  return parse_holder_key(grant_key);
}

}  // namespace

void add_delay_guard(etcdserverpb::TxnRequest& request, std::string_view key,
                     const DelayState* seen) {
  if (seen == nullptr) {
    const KeyRange state = delay_state_range(key);
    *request.add_compare() = compare_none_in(state.begin, state.end);
    return;
  }
  const KeyRange delays = delay_range(key);
  *request.add_compare() = compare_none_in(delays.begin, delays.end);
  *request.add_compare() = compare_unchanged_since(marker_range(key), seen->revision + 1);
  for (const auto& [grant_key, revision] : seen->marked_grants) {
    *request.add_compare() = compare_mod_revision(grant_key, revision);
  }
}

void add_delay_state_read(etcdserverpb::TxnRequest& request, std::string_view key) {
  const KeyRange state = delay_state_range(key);
  etcdserverpb::RequestOp op = range_op(state.begin, state.end);
  op.mutable_request_range()->set_keys_only(true);
  op.mutable_request_range()->set_limit(1);
  *request.add_failure() = std::move(op);
}

bool delay_state_seen(const etcdserverpb::TxnResponse& response, int index) {
  return response.responses(index).response_range().kvs_size() != 0;
}

void add_marker_put(etcdserverpb::TxnRequest& request, std::string_view key,
                    const std::string& grant_key, milliseconds delay) {
  if (delay.count() <= 0) return;
  *request.add_success() = put_op(marker_key(key, grant_key), std::to_string(delay.count()), 0);
}

void add_marker_delete(etcdserverpb::TxnRequest& request, std::string_view key,
                       const std::string& grant_key, std::optional<milliseconds> delay) {
  if (delay && delay->count() == 0) return;
  *request.add_success() = delete_op(marker_key(key, grant_key));
}

void add_marker_handover(etcdserverpb::TxnRequest& request, std::string_view key,
                         const std::string& grant_key, milliseconds next_delay,
                         std::optional<milliseconds> previous_delay) {
  if (next_delay.count() > 0) {
    add_marker_put(request, key, grant_key, next_delay);
  } else {
    add_marker_delete(request, key, grant_key, previous_delay);
  }
}

DelayState settle_delays(EtcdClient& client, std::string_view key) {
  const KeyRange state = delay_state_range(key);
  const KeyRange holders = holder_range(key);
  etcdserverpb::TxnRequest read;
  *read.add_success() = range_op(state.begin, state.end);
  *read.add_success() = get_op(format_lock_key(key));
  *read.add_success() = range_op(holders.begin, holders.end);
  const auto seen = client.txn(read, CallKind::kRead);
  std::map<std::string, std::int64_t, std::less<>> grants;
  for (int i = 1; i <= 2; ++i) {
    for (const auto& kv : seen.responses(i).response_range().kvs()) {
      grants.emplace(kv.key(), kv.mod_revision());
    }
  }
  DelayState result;
  result.revision = seen.header().revision();
  for (const auto& kv : seen.responses(0).response_range().kvs()) {
    const auto parsed = parse_delay_state_key(kv.key());
    if (!parsed) continue;
    if (!parsed->marker) {
      result.delayed = true;  // a delay runs
    } else if (const auto grant = grants.find(parsed->grant_key); grant != grants.end()) {
      result.marked_grants.emplace_back(grant->first, grant->second);
    } else {
      convert(client, key, kv, parsed->grant_key);  // ended without a release
      result.delayed = true;
    }
  }
  return result;
}

void settle_all_delays(EtcdClient& client) {
  std::vector<std::pair<mvccpb::KeyValue, DelayStateKey>> markers;
  etcdserverpb::RangeRequest request = prefix_request(std::string(kDelayPrefix));
  request.set_limit(1000);
  while (true) {
    const auto response = client.range(request);
    for (const auto& kv : response.kvs()) {
      auto parsed = parse_delay_state_key(kv.key());
      if (parsed && parsed->marker) markers.emplace_back(kv, std::move(*parsed));
    }
    if (!response.more() || response.kvs_size() == 0) break;
    request.set_key(response.kvs(response.kvs_size() - 1).key() + std::string(1, '\0'));
    request.set_revision(response.header().revision());
  }
  if (markers.empty()) return;
  std::vector<std::string> grant_keys;
  for (const auto& marker : markers) grant_keys.push_back(marker.second.grant_key);
  std::set<std::string> live;
  for (const auto& kv : read_keys(client, grant_keys)) live.insert(kv.key());
  for (const auto& [kv, parsed] : markers) {
    if (!live.contains(parsed.grant_key)) convert(client, parsed.key, kv, parsed.grant_key);
  }
}

etcdserverpb::TxnResponse revoke_with_delays(EtcdClient& client, std::string_view key,
                                             const etcdserverpb::TxnRequest& deletes) {
  const KeyRange markers = marker_range(key);
  std::vector<mvccpb::KeyValue> seen;
  std::int64_t revision = 0;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    etcdserverpb::TxnRequest request = deletes;
    std::int64_t lease_id = 0;
    if (seen.empty()) {
      *request.add_compare() = compare_none_in(markers.begin, markers.end);
    } else {
      // Every grant of the name ends now, without a release: each marker becomes a delay, on
      // one lease of the longest of them, granted before this Txn (so one second more).
      milliseconds longest{0};
      for (const auto& kv : seen) longest = std::max(longest, marker_delay(kv));
      lease_id = client.lease_grant(lease_seconds(longest) + 1).id();
      *request.add_compare() = compare_unchanged_since(markers, revision + 1);
      for (const auto& kv : seen) {
        const auto parsed = parse_delay_state_key(kv.key());
        if (!parsed) throw InternalError("etcd key " + kv.key() + " is not a lock-delay marker");
        *request.add_compare() = compare_mod_revision(kv.key(), kv.mod_revision());
        *request.add_success() = put_op(delay_key(key, parsed->grant_key), "", lease_id);
      }
      *request.add_success() = delete_range_op(markers);
    }
    *request.add_failure() = range_op(markers.begin, markers.end);
    const auto response = client.txn(request, CallKind::kWrite);
    if (response.succeeded()) return response;
    if (lease_id != 0) revoke_quietly(client, lease_id);
    const auto& found = response.responses(0).response_range().kvs();
    seen.assign(found.begin(), found.end());
    revision = response.header().revision();
  }
  throw ContentionError("the lock-delay markers of " + std::string(key) +
                        " changed during every attempt to revoke it; retry");
}

std::vector<KeyDelay> list_delays(EtcdClient& client, std::string_view prefix,
                                  std::string_view after, std::size_t limit) {
  const auto now = WallClock::now();
  std::map<std::string, WallClock::time_point, std::less<>> ends;
  const auto keep = [&](const std::string& key, WallClock::time_point until) {
    auto [entry, added] = ends.try_emplace(key, until);
    if (!added) entry->second = std::max(entry->second, until);
  };
  std::map<std::int64_t, std::int64_t> lease_seconds_left;
  std::vector<std::pair<DelayStateKey, milliseconds>> markers;
  etcdserverpb::RangeRequest request = prefix_request(delay_scan_prefix_for(prefix));
  request.set_limit(1000);
  while (true) {
    const auto response = client.range(request);
    for (const auto& kv : response.kvs()) {
      auto parsed = parse_delay_state_key(kv.key());
      if (!parsed || !parsed->key.starts_with(prefix) || parsed->key <= after) continue;
      if (parsed->marker) {
        markers.emplace_back(std::move(*parsed), marker_delay(kv));
        continue;
      }
      if (kv.lease() == 0) continue;
      auto left = lease_seconds_left.find(kv.lease());
      if (left == lease_seconds_left.end()) {
        left = lease_seconds_left
                   .emplace(kv.lease(), client.lease_time_to_live(kv.lease(), false).ttl())
                   .first;
      }
      if (left->second < 0) continue;  // expired: its key goes with it
      keep(parsed->key, now + std::chrono::seconds(left->second + 1));
    }
    if (!response.more() || response.kvs_size() == 0) break;
    request.set_key(response.kvs(response.kvs_size() - 1).key() + std::string(1, '\0'));
    request.set_revision(response.header().revision());
  }
  if (!markers.empty()) {
    std::vector<std::string> grant_keys;
    for (const auto& marker : markers) grant_keys.push_back(marker.first.grant_key);
    std::set<std::string> live;
    for (const auto& kv : read_keys(client, grant_keys)) live.insert(kv.key());
    for (const auto& [marker, delay] : markers) {
      if (!live.contains(marker.grant_key)) keep(marker.key, now + delay);
    }
  }
  std::vector<KeyDelay> delays;
  for (auto& [key, until] : ends) {
    if (delays.size() == limit) break;
    delays.push_back({key, until});
  }
  return delays;
}

bool clear_delays(EtcdClient& client, std::string_view key) {
  settle_delays(client, key);
  etcdserverpb::TxnRequest request;
  *request.add_success() = delete_range_op(delay_range(key));
  const auto response = client.txn(request, CallKind::kWrite);
  return response.responses(0).response_delete_range().deleted() > 0;
}

void clear_markers_of(EtcdClient& client, std::string_view session_id) {
  const auto entries = client.range(prefix_request(session_record_key(session_id) + "/"));
  std::vector<std::string> grant_keys;
  for (const auto& kv : entries.kvs()) {
    const auto parts = parse_session_key(kv.key());
    if (!parts || parts->lock_key.empty()) continue;
    grant_keys.push_back(parts->holder ? decode_holder_entry(kv).holder_key()
                                       : format_lock_key(parts->lock_key));
  }
  for (const auto& kv : read_keys(client, grant_keys)) {
    const auto key = name_of(kv.key());
    if (!key || decode_grant(kv).session_id() != session_id) continue;  // handed over since
    etcdserverpb::TxnRequest request;
    *request.add_compare() = compare_mod_revision(kv.key(), kv.mod_revision());
    *request.add_success() = delete_op(marker_key(*key, kv.key()));
    client.txn(request, CallKind::kWrite);
  }
}

}  // namespace dlock::store::etcd
