#pragma once

// The values dlock stores in etcd (proto/grant_record.proto) and their conversion to SPI records.

#include <optional>
#include <string>
#include <string_view>

#include "dlock/types.h"
#include "store/etcd/proto/grant_record.pb.h"
#include "store/etcd/proto/kv.pb.h"

namespace dlock::store::etcd {

std::string encode_grant(std::string_view owner_id, std::string_view session_id,
                         WallClock::time_point acquired_at, WallClock::time_point expires_at,
                         bool session_bound = false,
                         std::optional<std::string_view> leader_value = std::nullopt);
// A holder's record (docs/adr/0020): a grant record with its mode and, for a permit, its limit.
std::string encode_holder(std::string_view owner_id, std::string_view session_id,
                          WallClock::time_point acquired_at, WallClock::time_point expires_at,
                          bool session_bound, HoldMode mode, std::uint32_t limit);
// Throws InternalError when the value is not a grant record.
GrantRecord decode_grant(const mvccpb::KeyValue& kv);

SessionRecord decode_session(const mvccpb::KeyValue& kv);

// A holder's session index entry (HolderEntry). Throws InternalError when it is not one.
std::string encode_holder_entry(std::string_view owner_id, const std::string& holder_key);
HolderEntry decode_holder_entry(const mvccpb::KeyValue& kv);

// The SPI view of a lock key or a holder key. The token is the key's mod_revision: the revision
// of the Txn that granted it, since nothing but a new grant or a proclaim ever writes the key,
// and a proclaim's record carries the token it kept (token_of).
LockInfo lock_info(const mvccpb::KeyValue& kv);

// The token of the grant `kv` holds (`record` is its decoded value): the record's own after a
// proclaim (docs/adr/0020), else the key's mod_revision.
std::int64_t token_of(const mvccpb::KeyValue& kv, const GrantRecord& record);
std::int64_t token_of(const mvccpb::KeyValue& kv);

// Whether `kv` (a lock key as a watch event reports it) holds an election's leader, i.e. a grant
// with a value; false for a plain grant and for anything that is not a grant record.
bool holds_leader(const mvccpb::KeyValue& kv);

}  // namespace dlock::store::etcd
