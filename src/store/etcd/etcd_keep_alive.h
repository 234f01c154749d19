#pragma once

// Lease keep-alives over one long-lived LeaseKeepAlive stream instead of a new stream per call:
// a renewal is then one message each way, where a fresh stream also costs its set-up and
// tear-down (measured: about 0.2 ms per acquire on loopback, most of what a pooled grant lease
// costs; docs/benchmarks.md). Many threads renew at once: the requests that queue while one
// caller writes are written by that caller in one go (one thread writes at a time), and one
// reader thread hands each answer to the caller waiting for that lease ID, waking that caller
// only (etcd answers the requests of one stream in order). A broken stream fails its waiting
// callers with its status and the next renewal opens a new one.
//
// etcd holds a keep-alive for a lease that has expired but is not revoked yet until the revoke
// is applied (lessor.Renew; revokes are rate-limited to 1000 a second), and every later request
// of the stream waits behind it. So a lease that may have expired is renewed with renew_alone,
// on a stream of its own (EtcdClient::lease_keep_alive decides; docs/adr/0025).

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "store/etcd/proto/rpc.grpc.pb.h"

namespace dlock::store::etcd {

class KeepAliveStream {
 public:
  KeepAliveStream(std::shared_ptr<grpc::Channel> channel, etcdserverpb::Lease::Stub& stub);
  KeepAliveStream(const KeepAliveStream&) = delete;
  KeepAliveStream& operator=(const KeepAliveStream&) = delete;
  // Cancels the stream and joins its threads. Every start_async must have completed first.
  ~KeepAliveStream();

  struct Waiter;
  struct Call;
  // A keep-alive sent and not yet answered (see start / finish).
  struct Pending {
    std::int64_t lease_id = 0;
    std::shared_ptr<Call> call;
    std::shared_ptr<Waiter> waiter;
  };

  // One keep-alive for `lease_id`: the renewed TTL in seconds, 0 when the lease does not exist.
  // Throws the dlock error for the stream's failure (throw_for_status), or UnavailableError when
  // no answer came before `deadline`.
  std::int64_t renew(std::int64_t lease_id, std::chrono::steady_clock::time_point deadline) {
    auto pending = start(lease_id, deadline);
    return finish(pending, deadline);
  }
  // renew in two halves, so the caller can do something else while the answer travels: start
  // sends the request, opening a stream first if none is open (waiting at most until `deadline`
  // for a connection, else UnavailableError); finish waits for its answer (as renew). Every
  // started keep-alive must be finished or abandoned.
  Pending start(std::int64_t lease_id, std::chrono::steady_clock::time_point deadline);
  std::int64_t finish(Pending& pending, std::chrono::steady_clock::time_point deadline);
  // One keep-alive on a stream opened for it and closed after its answer: what renew answers
  // and throws, without holding up (or being held up by) the shared stream.
  std::int64_t renew_alone(std::int64_t lease_id, std::chrono::steady_clock::time_point deadline);
  // Gives up on a started keep-alive without waiting: its answer, when it comes, is dropped.
  void abandon(Pending& pending) noexcept;

  // The outcome of start_async: the renewed TTL in seconds (0: the lease does not exist), or,
  // when `failed` is set, the status the keep-alive failed with (as renew would throw it).
  using Done = std::function<void(std::int64_t ttl, const grpc::Status* failed)>;
  // renew without waiting (docs/adr/0024): when a stream is open, queues the keep-alive for the
  // stream's writer thread, takes `done` (moved from) and returns true; `done` is then called
  // exactly once, on the stream's reader or writer thread, with the answer, the stream's
  // failure, or DEADLINE_EXCEEDED once `deadline` has passed unanswered (which also ends the
  // stream, as finish does). With no stream open (none yet, the last one broke, or closing)
  // returns false and leaves `done` alone: renew then opens one. Never waits for etcd.
  bool start_async(std::int64_t lease_id, std::chrono::steady_clock::time_point deadline,
                   Done& done);

 private:
  // The open stream, or a new one (under open_mutex_, never under mutex_: opening may wait for
  // the channel to connect).
  std::shared_ptr<Call> current_or_open(std::chrono::steady_clock::time_point deadline);
  void read_loop(const std::shared_ptr<Call>& call);
  // Fails every waiter of `call`: wakes the blocked ones, returns the callbacks of the
  // asynchronous ones, to be called without mutex_.
  [[nodiscard]] std::vector<Done> fail_locked(Call& call, const grpc::Status& status);
  // The writer thread of start_async: writes what is queued, fails what is past its deadline.
  void writer_loop();
  // Writes the requests queued on `call` (and those queued meanwhile) unless another caller is
  // writing them already.
  void write_queued(Call& call);

  std::shared_ptr<grpc::Channel> channel_;
  etcdserverpb::Lease::Stub& stub_;
  std::mutex open_mutex_;       // one stream opened at a time
  std::mutex mutex_;            // guards everything below and every Call's queues
  std::shared_ptr<Call> call_;  // the open stream, if any
  bool closing_ = false;
  // start_async's keep-alives not known to be answered, oldest first (every deadline is one
  // call timeout after its start, so this is also deadline order).
  struct Async {
    std::chrono::steady_clock::time_point deadline;
    std::shared_ptr<Call> call;
    std::int64_t lease_id = 0;
    std::shared_ptr<Waiter> waiter;
  };
  std::deque<Async> async_;
  std::condition_variable writer_wake_;
  bool writer_idle_ = false;
  std::thread writer_;  // started by the first start_async
  // The readers of the open stream and of broken ones not yet joined.
  std::vector<std::thread> readers_;
};

}  // namespace dlock::store::etcd
