#pragma once

// The values dlock stores in etcd (proto/grant_record.proto) and their conversion to SPI records.

#include <string>
#include <string_view>

#include "dlock/types.h"
#include "store/etcd/proto/grant_record.pb.h"
#include "store/etcd/proto/kv.pb.h"

namespace dlock::store::etcd {

std::string encode_grant(std::string_view owner_id, std::string_view session_id,
                         WallClock::time_point acquired_at, WallClock::time_point expires_at,
                         bool session_bound = false);
// Throws InternalError when the value is not a grant record.
GrantRecord decode_grant(const mvccpb::KeyValue& kv);

SessionRecord decode_session(const mvccpb::KeyValue& kv);

// The SPI view of a lock key. The token is the key's mod_revision: the revision of the Txn that
// granted it, since nothing but a new grant ever writes the key.
LockInfo lock_info(const mvccpb::KeyValue& kv);

}  // namespace dlock::store::etcd
