#pragma once

// Elections on etcd (docs/adr/0020-more-primitives-design.md, "Leader election"; C2
// "Elections"). A leader is an exclusive grant whose record carries a value: the exclusive
// acquire's own Txn grants it (etcd_store.cc, etcd_session_bound.cc). A proclaim rewrites the
// record in one guarded Txn, keeping the key's lease (PutRequest.ignore_lease) and its token;
// since the Put moves the key's mod_revision, the record it writes carries the token (token_of).

#include <string>
#include <string_view>

#include "dlock/types.h"
#include "store/etcd/etcd_client.h"
#include "store/etcd/proto/kv.pb.h"

namespace dlock::store::etcd {

// LockStore::proclaim on `etcd_key`, `grant`'s lock key (value already checked): the lock key
// as the proclaim left it. LockLostError when the key is not the live exclusive grant of
// grant's token, owner and session (a shared or permit holder's token names no lock key).
mvccpb::KeyValue proclaim_value(EtcdClient& client, const GrantRef& grant,
                                const std::string& etcd_key, std::string_view value);

}  // namespace dlock::store::etcd
