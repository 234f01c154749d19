#include "store/etcd/etcd_records.h"

#include "dlock/errors.h"
#include "store/etcd/etcd_keys.h"
#include "util/time.h"

namespace dlock::store::etcd {

std::string encode_grant(std::string_view owner_id, std::string_view session_id,
                         WallClock::time_point acquired_at, WallClock::time_point expires_at,
                         bool session_bound) {
  GrantRecord record;
  record.set_owner_id(std::string(owner_id));
  record.set_session_id(std::string(session_id));
  record.set_acquired_at_us(util::to_unix_micros(acquired_at));
  record.set_server_expiry_us(util::to_unix_micros(expires_at));
  record.set_session_bound(session_bound);
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

LockInfo lock_info(const mvccpb::KeyValue& kv) {
  const auto key = parse_lock_key(kv.key());
  if (!key) throw InternalError("etcd: " + kv.key() + " is not a dlock lock key");
  const GrantRecord record = decode_grant(kv);
  return LockInfo{*key,
                  record.owner_id(),
                  record.session_id(),
                  static_cast<FencingToken>(kv.mod_revision()),
                  util::from_unix_micros(record.acquired_at_us()),
                  util::from_unix_micros(record.server_expiry_us()),
                  record.session_bound()};
}

}  // namespace dlock::store::etcd
