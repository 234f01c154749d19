#pragma once

// The thin, blocking layer between the store and etcd's gRPC API: one channel, every call with
// a deadline of now + call_timeout (plain or TLS), and gRPC failures turned into dlock errors
// (ADR-0003) by etcd_status.h. Nothing here knows about locks.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/etcd/etcd_keep_alive.h"
#include "store/etcd/etcd_status.h"
#include "store/etcd/etcd_txn_batch.h"
#include "store/etcd/proto/rpc.grpc.pb.h"

namespace dlock::store::etcd {

// "http://a:2379,http://b:2379" -> the gRPC target for one channel over every member, e.g.
// "ipv4:127.0.0.1:2379,127.0.0.1:22379". Host names are resolved once, here. Throws
// InvalidArgumentError("etcd.endpoints") for an empty list, a scheme other than http:// or
// https://, a list mixing the two, or a missing port.
std::string channel_target(std::string_view endpoints);

// The files of a TLS connection to etcd (PEM paths; empty = not given). With https:// endpoints
// the server's certificate is verified against `cacert` (the system roots when empty); `cert`
// and `key` are the client's own, for etcd's --client-cert-auth.
struct EtcdTlsFiles {
  std::string cacert = {};
  std::string cert = {};
  std::string key = {};
};

// The one channel a store shares between all its calls and streams. round_robin over the
// members so a dead member is skipped; short reconnect backoff so an etcd restart is noticed
// within a second rather than after gRPC's default two minutes.
// https:// endpoints (all or none) get TLS with `tls`; giving TLS files with http:// endpoints
// is InvalidArgumentError("etcd.endpoints"), as is an unreadable file.
std::shared_ptr<grpc::Channel> make_channel(std::string_view endpoints,
                                            const EtcdTlsFiles& tls = {});

class EtcdClient {
 public:
  // How many shared keep-alive streams a client spreads its leases over (by lease ID;
  // docs/adr/0029-etcd-keep-alive-streams.md): etcd serves one stream one request at a time, and
  // since 3.4.20 each renewal waits for the applied index, so one stream caps keep-alives at one
  // apply wait each while writes keep raft busy. 64, not 8: measured with 100 000 sessions
  // (docs/adr/0030-etcd-3-4-request-cost.md).
  static constexpr std::size_t kKeepAliveStreams = 64;
  EtcdClient(std::shared_ptr<grpc::Channel> channel, std::chrono::milliseconds call_timeout,
             std::size_t keep_alive_streams = kKeepAliveStreams);
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // A write Txn goes through the client's TxnBatcher (etcd_txn_batch.h): concurrent writes share
  // one Txn, each with its own outcome. A read Txn is sent as itself.
  etcdserverpb::TxnResponse txn(const etcdserverpb::TxnRequest& request, CallKind kind);
  etcdserverpb::RangeResponse range(const etcdserverpb::RangeRequest& request);
  etcdserverpb::PutResponse put(const etcdserverpb::PutRequest& request);
  etcdserverpb::DeleteRangeResponse delete_range(const etcdserverpb::DeleteRangeRequest& request);

  etcdserverpb::LeaseGrantResponse lease_grant(std::int64_t ttl_seconds);
  // Throws SessionNotFoundError when the lease does not exist (any more).
  void lease_revoke(std::int64_t lease_id);
  // One keep-alive round trip. Returns the renewed TTL in seconds, 0 when the lease no longer
  // exists. `alive_until` is how long the lease is known to live (the LeaseBook), std::nullopt
  // when unknown: a lease known to live past now + kSharedStreamMargin is renewed on the client's
  // shared keep-alive stream. etcd holds the keep-alive of an expired, not yet revoked lease,
  // and the whole stream behind it, until the revoke (etcd_keep_alive.h, docs/adr/0025), and
  // revokes wait in a queue of at most 1000 a second; so for any other lease etcd is asked
  // first how long it has left (LeaseTimeToLive, answered at once): at least 2 s, renewed on the
  // shared stream; expired a second or more ago, or gone, 0 without a keep-alive; anything in
  // between on a stream of its own.
  std::int64_t lease_keep_alive(std::int64_t lease_id,
                                std::optional<std::chrono::steady_clock::time_point> alive_until);
  static constexpr std::chrono::milliseconds kSharedStreamMargin{1000};
  etcdserverpb::LeaseTimeToLiveResponse lease_time_to_live(std::int64_t lease_id, bool keys);

  // The shared keep-alive stream of `lease_id` (always the same one for a lease, so its
  // keep-alives stay in order), for a keep-alive sent now and awaited later. etcd mints lease IDs
  // from a counter it shares with every proposal (consecutive grants differ by 2 or 3), so the ID
  // is mixed before it is reduced: `id % n` would leave half the streams idle for a run of
  // grants 2 apart.
  KeepAliveStream& keep_alive_stream(std::int64_t lease_id) {
    return *keep_alives_[stream_index(lease_id, keep_alives_.size())];
  }
  // Which of `streams` streams a lease uses (SplitMix64's finalizer, then modulo).
  static std::size_t stream_index(std::int64_t lease_id, std::size_t streams) {
    auto z = static_cast<std::uint64_t>(lease_id);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return static_cast<std::size_t>((z ^ (z >> 31)) % streams);
  }
  const TxnBatcher& write_batcher() const { return *writes_; }
  std::shared_ptr<grpc::Channel> shared_channel() const { return channel_; }
  std::chrono::milliseconds call_timeout() const { return call_timeout_; }

 private:
  // One unary RPC with the client's deadline; a failed status becomes a dlock error.
  template <typename Stub, typename Request, typename Response>
  Response call(grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                Stub& stub, const Request& request, std::string_view what, CallKind kind) const;

  std::shared_ptr<grpc::Channel> channel_;
  std::chrono::milliseconds call_timeout_;
  std::unique_ptr<etcdserverpb::KV::Stub> kv_;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease_;
  std::vector<std::unique_ptr<KeepAliveStream>> keep_alives_;  // after lease_: destroyed first
  std::unique_ptr<TxnBatcher> writes_;                         // after kv_: destroyed before it
};

// The current value of each of `etcd_keys` that exists, read in as few Txns as etcd allows
// (each Txn is one consistent snapshot).
std::vector<mvccpb::KeyValue> read_keys(EtcdClient& client,
                                        const std::vector<std::string>& etcd_keys);

// Small builders for the requests the store sends, so each transaction reads like its spec.
etcdserverpb::Compare compare_create_revision(const std::string& key, std::int64_t revision);
etcdserverpb::Compare compare_mod_revision(const std::string& key, std::int64_t revision);
etcdserverpb::Compare compare_lease(const std::string& key, std::int64_t lease_id);
// CreateRevision(key) > 0: the key exists.
etcdserverpb::Compare compare_exists(const std::string& key);
// Value(key) == value (false when the key does not exist).
etcdserverpb::Compare compare_value(const std::string& key, const std::string& value);
// CreateRevision == 0 for every key of [begin, end): no key lives in the range. An empty range
// compares as one absent key (etcd's applyCompare), so this holds exactly when the range is empty.
etcdserverpb::Compare compare_none_in(const std::string& begin, const std::string& end);
etcdserverpb::RequestOp put_op(const std::string& key, const std::string& value,
                               std::int64_t lease_id);
etcdserverpb::RequestOp get_op(const std::string& key);
etcdserverpb::RequestOp delete_op(const std::string& key);
// A delete whose response carries the deleted key-value (its lease, its value).
etcdserverpb::RequestOp delete_op_with_prev(const std::string& key);
// Every key of [begin, end), and a delete of them with their deleted key-values.
etcdserverpb::RequestOp range_op(const std::string& begin, const std::string& end);
etcdserverpb::RequestOp delete_range_op_with_prev(const std::string& begin, const std::string& end);
etcdserverpb::RangeRequest range_request(const std::string& key);
// Every key starting with `prefix`.
etcdserverpb::RangeRequest prefix_request(const std::string& prefix);

}  // namespace dlock::store::etcd
