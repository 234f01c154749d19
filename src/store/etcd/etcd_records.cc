#include "store/etcd/etcd_records.h"

#include "dlock/errors.h"
#include "store/etcd/etcd_keys.h"
#include "util/time.h"

namespace dlock::store::etcd {

namespace {

GrantRecord grant_record(std::string_view owner_id, std::string_view session_id,
                         WallClock::time_point acquired_at, WallClock::time_point expires_at,
                         bool session_bound) {
  GrantRecord record;
  record.set_owner_id(std::string(owner_id));
  record.set_session_id(std::string(session_id));
  record.set_acquired_at_us(util::to_unix_micros(acquired_at));
  record.set_server_expiry_us(util::to_unix_micros(expires_at));
  record.set_session_bound(session_bound);
  return record;
}

}  // namespace

std::string encode_grant(std::string_view owner_id, std::string_view session_id,
                         WallClock::time_point acquired_at, WallClock::time_point expires_at,
                         bool session_bound, std::optional<std::string_view> leader_value) {
  GrantRecord record = grant_record(owner_id, session_id, acquired_at, expires_at, session_bound);
  if (leader_value) record.set_value(std::string(*leader_value));
  return record.SerializeAsString();
}

std::string encode_holder(std::string_view owner_id, std::string_view session_id,
                          WallClock::time_point acquired_at, WallClock::time_point expires_at,
                          bool session_bound, HoldMode mode, std::uint32_t limit) {
  GrantRecord record = grant_record(owner_id, session_id, acquired_at, expires_at, session_bound);
  record.set_mode(static_cast<std::uint32_t>(mode));
  record.set_limit(limit);
  return record.SerializeAsString();
}

GrantRecord decode_grant(const mvccpb::KeyValue& kv) {
  GrantRecord record;
  if (!record.ParseFromString(kv.value())) {
    throw InternalError("etcd: the value of " + kv.key() + " is not a dlock grant record");
  }
  return record;
}

SessionRecord decode_session(const mvccpb::KeyValue& kv) {
  SessionRecord record;
  if (!record.ParseFromString(kv.value())) {
    throw InternalError("etcd: the value of " + kv.key() + " is not a dlock session record");
  }
  return record;
}

std::string encode_holder_entry(std::string_view owner_id, const std::string& holder_key) {
  HolderEntry entry;
  entry.set_owner_id(std::string(owner_id));
  entry.set_holder_key(holder_key);
  return entry.SerializeAsString();
}

HolderEntry decode_holder_entry(const mvccpb::KeyValue& kv) {
  HolderEntry entry;
  if (!entry.ParseFromString(kv.value()) || entry.holder_key().empty()) {
    throw InternalError("etcd: the value of " + kv.key() + " is not a dlock holder entry");
  }
  return entry;
}

LockInfo lock_info(const mvccpb::KeyValue& kv) {
  auto key = parse_lock_key(kv.key());
  if (!key) key = parse_holder_key(kv.key());
  if (!key) throw InternalError("etcd: " + kv.key() + " is not a dlock lock or holder key");
  const GrantRecord record = decode_grant(kv);
  const auto mode = static_cast<HoldMode>(record.mode());
  if (mode != HoldMode::kExclusive && mode != HoldMode::kShared && mode != HoldMode::kPermit) {
    throw InternalError("etcd: the record of " + kv.key() + " has an unknown mode");
  }
  LockInfo info{*key,
                record.owner_id(),
                record.session_id(),
                static_cast<FencingToken>(token_of(kv, record)),
                util::from_unix_micros(record.acquired_at_us()),
                util::from_unix_micros(record.server_expiry_us()),
                record.session_bound(),
                mode,
                mode == HoldMode::kPermit ? record.limit() : 0};
  if (record.has_value()) info.value = record.value();
  return info;
}

std::int64_t token_of(const mvccpb::KeyValue& kv, const GrantRecord& record) {
  return record.token() != 0 ? record.token() : kv.mod_revision();
}

std::int64_t token_of(const mvccpb::KeyValue& kv) { return token_of(kv, decode_grant(kv)); }

bool holds_leader(const mvccpb::KeyValue& kv) {
  GrantRecord record;
  return record.ParseFromString(kv.value()) && record.has_value();
}

}  // namespace dlock::store::etcd
