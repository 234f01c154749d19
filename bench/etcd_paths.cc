#include "etcd_paths.h"

#include <grpcpp/grpcpp.h>

#include <memory>
#include <stdexcept>

#include "store/etcd/proto/rpc.grpc.pb.h"
#include "store/etcd/proto/v3lock.grpc.pb.h"

namespace dlock::bench {

namespace {

std::shared_ptr<grpc::Channel> channel_for(const std::string& endpoints) {
  std::string first = endpoints.substr(0, endpoints.find(','));
  if (first.rfind("http://", 0) == 0) first = first.substr(7);
  return grpc::CreateChannel(first, grpc::InsecureChannelCredentials());
}

std::int64_t grant_lease(etcdserverpb::Lease::Stub& lease) {
  grpc::ClientContext context;
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(120);
  etcdserverpb::LeaseGrantResponse response;
  const auto status = lease.LeaseGrant(&context, request, &response);
  if (!status.ok()) throw std::runtime_error("etcd LeaseGrant: " + status.error_message());
  return response.id();
}

struct RawEtcdClient {
  RawEtcdClient(const std::shared_ptr<grpc::Channel>& channel, std::string key_)
      : kv(etcdserverpb::KV::NewStub(channel)), key(std::move(key_)) {
    auto lease_stub = etcdserverpb::Lease::NewStub(channel);
    lease = grant_lease(*lease_stub);
  }
  // Returns whether the Txn granted the key (false also on an RPC error, counted by `errors`).
  bool acquire(std::uint64_t& errors) {
    etcdserverpb::TxnRequest request;
    auto* compare = request.add_compare();
    compare->set_result(etcdserverpb::Compare::EQUAL);
    compare->set_target(etcdserverpb::Compare::CREATE);
    compare->set_key(key);
    compare->set_create_revision(0);
    auto* put = request.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_value("bench");
    put->set_lease(lease);
    request.add_failure()->mutable_request_range()->set_key(key);
    etcdserverpb::TxnResponse response;
    grpc::ClientContext context;
    if (!kv->Txn(&context, request, &response).ok()) {
      ++errors;
      return false;
    }
    return response.succeeded();
  }
  bool release() {
    etcdserverpb::DeleteRangeRequest request;
    request.set_key(key);
    etcdserverpb::DeleteRangeResponse response;
    grpc::ClientContext context;
    return kv->DeleteRange(&context, request, &response).ok() && response.deleted() == 1;
  }
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::string key;
  std::int64_t lease = 0;
};

struct LockServiceClient {
  LockServiceClient(const std::shared_ptr<grpc::Channel>& channel, std::string name_)
      : lock(v3lockpb::Lock::NewStub(channel)), name(std::move(name_)) {
    auto lease_stub = etcdserverpb::Lease::NewStub(channel);
    lease = grant_lease(*lease_stub);
  }
  bool acquire(std::string& key) {
    v3lockpb::LockRequest request;
    request.set_name(name);
    request.set_lease(lease);
    v3lockpb::LockResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    if (!lock->Lock(&context, request, &response).ok()) return false;
    key = response.key();
    return true;
  }
  bool release(const std::string& key) {
    v3lockpb::UnlockRequest request;
    request.set_key(key);
    v3lockpb::UnlockResponse response;
    grpc::ClientContext context;
    return lock->Unlock(&context, request, &response).ok();
  }
  std::unique_ptr<v3lockpb::Lock::Stub> lock;
  std::string name;
  std::int64_t lease = 0;
};

}  // namespace

Measurement etcd_raw_pairs(const std::string& endpoints, int clients,
                           std::chrono::milliseconds duration) {
  auto channel = channel_for(endpoints);
  std::vector<ClientStats> stats;
  const double seconds = drive_threads(
      clients, duration,
      [&](int i) {
        auto c = std::make_shared<RawEtcdClient>(channel, "bench/raw-" + std::to_string(i));
        return [c](ClientStats& out) {
          const auto t0 = Clock::now();
          if (!c->acquire(out.errors)) {
            ++out.errors;
            return;
          }
          const auto t1 = Clock::now();
          if (!c->release()) ++out.errors;
          ++out.ops;
          out.acquire_ms.push_back(ms_between(t0, t1));
          out.op_ms.push_back(ms_between(t0, Clock::now()));
        };
      },
      stats);
  return summarize("etcd", "raw", "pairs", clients, seconds, stats);
}

Measurement etcd_lock_service_pairs(const std::string& endpoints, int clients,
                                    std::chrono::milliseconds duration) {
  auto channel = channel_for(endpoints);
  std::vector<ClientStats> stats;
  const double seconds = drive_threads(
      clients, duration,
      [&](int i) {
        auto c = std::make_shared<LockServiceClient>(channel, "bench/anchor-" + std::to_string(i));
        return [c](ClientStats& out) {
          std::string key;
          const auto t0 = Clock::now();
          if (!c->acquire(key)) {
            ++out.errors;
            return;
          }
          const auto t1 = Clock::now();
          if (!c->release(key)) ++out.errors;
          ++out.ops;
          out.acquire_ms.push_back(ms_between(t0, t1));
          out.op_ms.push_back(ms_between(t0, Clock::now()));
        };
      },
      stats);
  return summarize("etcd", "anchor", "pairs", clients, seconds, stats);
}

Measurement etcd_raw_hot(const std::string& endpoints, int clients,
                         std::chrono::milliseconds duration) {
  auto channel = channel_for(endpoints);
  std::vector<ClientStats> stats;
  const double seconds = drive_threads(
      clients, duration,
      [&](int) {
        auto c = std::make_shared<RawEtcdClient>(channel, "bench/raw-hot");
        auto started = std::make_shared<std::optional<Clock::time_point>>();
        return [c, started](ClientStats& out) {
          if (!*started) *started = Clock::now();
          ++out.attempts;
          if (!c->acquire(out.errors)) return;
          ++out.ops;
          out.op_ms.push_back(ms_between(**started, Clock::now()));
          c->release();
          *started = Clock::now();
        };
      },
      stats);
  return summarize("etcd", "raw", "hot", clients, seconds, stats);
}

Measurement etcd_lock_service_hot(const std::string& endpoints, int clients,
                                  std::chrono::milliseconds duration) {
  auto channel = channel_for(endpoints);
  std::vector<ClientStats> stats;
  const double seconds = drive_threads(
      clients, duration,
      [&](int) {
        auto c = std::make_shared<LockServiceClient>(channel, "bench/anchor-hot");
        return [c](ClientStats& out) {
          std::string key;
          const auto t0 = Clock::now();
          ++out.attempts;
          if (!c->acquire(key)) {
            ++out.errors;
            return;
          }
          ++out.ops;
          out.op_ms.push_back(ms_between(t0, Clock::now()));
          c->release(key);
        };
      },
      stats);
  return summarize("etcd", "anchor", "hot", clients, seconds, stats);
}

}  // namespace dlock::bench
