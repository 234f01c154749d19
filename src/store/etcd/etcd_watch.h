#pragma once

// Release notifications for the etcd store (seed T-033): one bidirectional Watch stream per
// store, carrying one etcd watch per subscription (told apart by client-chosen watch IDs). No
// polling: a waiter sleeps until etcd reports an event on its key. When the stream breaks (a
// member died, etcd restarted) it is opened again once the channel is ready and every watch
// resumes from the revision after the last event it saw, so no release is missed.

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "dlock/lock_store.h"
#include "store/etcd/etcd_client.h"
#include "store/etcd/etcd_keys.h"
#include "store/etcd/proto/rpc.grpc.pb.h"

namespace dlock::store::etcd {

class WatchHub {
 public:
  explicit WatchHub(std::shared_ptr<grpc::Channel> channel);
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;
  // Cancels the stream and waits for it to end; no callback runs after it returns.
  ~WatchHub();

  // Calls `on_event` (from a gRPC thread) for every batch of events on `etcd_key` at or after
  // `start_revision`. With start_revision 0 the watch starts when etcd creates it; then
  // `on_created` (if given) is called once with the revision it starts after, and otherwise
  // `on_event` runs once, since a release may have happened in between.
  //
  // A start revision at or below etcd's current revision makes the watch "unsynced" in etcd,
  // which then delivers its events from a catch-up loop that runs every 100 ms; a watch from
  // "now" is delivered at once. Callers that must not miss an earlier event therefore watch
  // from now and check what happened before it with `on_created` (see EtcdStore).
  // A non-empty `range_end` watches every key of [etcd_key, range_end) instead.
  // Only deletes are events, except with `leader_puts`: then also every put of a grant, reported
  // with its revision (its token) when the batch holds nothing else; a put of a grant with a
  // value (an election's leader granted or proclaimed, docs/adr/0020) as a possible release.
  ReleaseSubscriptionPtr subscribe(std::string etcd_key, std::int64_t start_revision,
                                   ReleaseCallback on_event,
                                   std::function<void(std::int64_t)> on_created = {},
                                   std::string range_end = {}, bool leader_puts = false);

 private:
  class Stream;
  class Subscription;
  struct Watch {
    std::string key;
    std::string range_end;
    bool leader_puts = false;
    // The first revision not yet seen; 0 = "from whenever etcd creates the watch".
    std::int64_t next_revision = 0;
    ReleaseCallback on_event;
    std::function<void(std::int64_t)> on_created;
    // Which thread runs on_event right now, so unsubscribing can wait for it to finish.
    std::thread::id running_on{};
  };

  void run();
  void start_worker_locked();
  void send_create_locked(std::int64_t watch_id, const Watch& watch);
  void on_response(const etcdserverpb::WatchResponse& response);
  void on_stream_done(Stream* stream);
  void unsubscribe(std::int64_t watch_id);

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<etcdserverpb::Watch::Stub> stub_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::int64_t, std::shared_ptr<Watch>> watches_;
  std::int64_t next_watch_id_ = 1;
  // The live stream, owned by gRPC until its OnDone (where it clears this and deletes itself).
  Stream* stream_ = nullptr;
  bool stopping_ = false;
  std::thread worker_;
};

// The store's release watches with their catch-up: a waiter subscribes after a failed acquire
// saw the key held, and a release between that acquire and the watch's start must still wake
// it. Watches start from "now" (see WatchHub::subscribe), and the grant seen holding the key is
// then checked once at the watch's start revision.
class ReleaseWatches {
 public:
  explicit ReleaseWatches(EtcdClient& client);
  ReleaseWatches(const ReleaseWatches&) = delete;
  ReleaseWatches& operator=(const ReleaseWatches&) = delete;

  // A failed acquire at `revision` saw `etcd_key` held by the grant created at
  // `create_revision`. Bounded: a forgotten entry only means the watch wakes its waiter once
  // when it starts.
  void remember_held(const std::string& etcd_key, std::int64_t revision,
                     std::int64_t create_revision);
  // Calls `on_released` whenever `etcd_key` may have been released, and once at once when the
  // grant remembered holding it ended before the watch started; also when a leader is granted
  // or proclaimed on `etcd_key` (docs/adr/0020), so that an election's observers wait on it.
  // Also whenever a key of `holders` (the key's holder range, docs/adr/0020) is deleted; that
  // watch does not wake at its start (the lock key's watch does, unless it knows better).
  // The same for `delays` (the key's lock-delay state, etcd_delays.h): a delay's end is the
  // deletion of its key.
  ReleaseSubscriptionPtr watch(const std::string& etcd_key, const KeyRange& holders,
                               const KeyRange& delays, ReleaseCallback on_released);

 private:
  // A grant seen holding a key: the revision of the failed acquire that saw it, and the grant's
  // create revision (a hand-over or re-entrant acquire keeps it; a new grant has a new one).
  struct HeldAt {
    std::int64_t revision = 0;
    std::int64_t create_revision = 0;
  };
  // Whether the grant seen in `held` ended by `revision` (the key was gone, or held by another
  // grant, at that revision). An error counts as yes: a needless wake-up costs the waiter one
  // attempt, a missed one could leave it asleep.
  ReleaseSubscriptionPtr watch_key(const std::string& etcd_key, ReleaseCallback on_released);
  bool released_since(const std::string& etcd_key, const HeldAt& held, std::int64_t revision);

  EtcdClient& client_;
  std::mutex held_mutex_;
  std::map<std::string, HeldAt, std::less<>> held_at_;
  // Declared last: destroyed first, so no watch callback outlives the rest.
  std::unique_ptr<WatchHub> hub_;
};

}  // namespace dlock::store::etcd
