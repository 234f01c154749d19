#include "store/etcd/etcd_elections.h"

#include "dlock/errors.h"
#include "store/etcd/etcd_keys.h"
#include "store/etcd/etcd_records.h"
#include "util/lock_lost.h"

namespace dlock::store::etcd {
namespace {

// A grant proclaimed (or re-read) this many times while one proclaim tried to write: give up.
constexpr int kProclaimAttempts = 4;

// A Put that keeps the key's lease (a Put's lease 0 would detach the key from it).
etcdserverpb::RequestOp put_keeping_lease(const std::string& key, const std::string& value) {
  etcdserverpb::RequestOp op = put_op(key, value, 0);
  op.mutable_request_put()->set_ignore_lease(true);
  return op;
}

}  // namespace

mvccpb::KeyValue proclaim_value(EtcdClient& client, const GrantRef& grant,
                                const std::string& etcd_key, std::string_view value) {
  const auto token = static_cast<std::int64_t>(grant.fencing_token);
  const std::string record_key = session_record_key(grant.session_id);
  etcdserverpb::RangeResponse current = client.range(range_request(etcd_key));
  for (int attempt = 0; attempt < kProclaimAttempts; ++attempt) {
    if (current.kvs_size() == 0) throw util::lock_lost(grant.key, grant.fencing_token);
    const mvccpb::KeyValue kv = current.kvs(0);
    GrantRecord record = decode_grant(kv);
    if (token_of(kv, record) != token || record.owner_id() != grant.owner_id ||
        record.session_id() != grant.session_id) {
      throw util::lock_lost(grant.key, grant.fencing_token);
    }
    record.set_value(std::string(value));
    record.set_token(token);  // the Put moves the mod_revision; the token stays
    const std::string written = record.SerializeAsString();
    // One guarded write: the grant exactly as just read (its token, owner and session), its
    // session still live (as extend checks it), then the new record on the same lease.
    etcdserverpb::TxnRequest request;
    *request.add_compare() = compare_mod_revision(etcd_key, kv.mod_revision());
    *request.add_compare() = compare_exists(record_key);
    *request.add_success() = put_keeping_lease(etcd_key, written);
    *request.add_failure() = get_op(etcd_key);
    *request.add_failure() = get_op(record_key);
    const auto response = client.txn(request, CallKind::kWrite);
    if (response.succeeded()) {
      mvccpb::KeyValue after = kv;
      after.set_value(written);
      after.set_mod_revision(response.header().revision());
      after.set_version(kv.version() + 1);
      return after;
    }
    if (response.responses(1).response_range().kvs_size() == 0)
      throw util::lock_lost(grant.key, grant.fencing_token);
    current = response.responses(0).response_range();
  }
  throw ContentionError("lock " + grant.key + " changed during every proclaim attempt; retry");
}

}  // namespace dlock::store::etcd
