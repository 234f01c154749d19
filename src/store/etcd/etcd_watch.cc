#include "store/etcd/etcd_watch.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <utility>
#include <vector>

#include "dlock/errors.h"
#include "store/etcd/etcd_records.h"

namespace dlock::store::etcd {

// One Watch RPC. Writes are queued because gRPC allows one outstanding write at a time; a read
// is always outstanding. The hold keeps OnDone from running while another thread could still
// start a write; it is released once the stream can no longer be written.
class WatchHub::Stream final
    : public grpc::ClientBidiReactor<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse> {
 public:
  explicit Stream(WatchHub& hub) : hub_(hub) {
    // Waits for the channel to connect instead of failing at once during an outage: the stream
    // starts as soon as a member is reachable, without a retry loop here.
    context_.set_wait_for_ready(true);
  }

  void start(etcdserverpb::Watch::Stub& stub) {
    stub.async()->Watch(&context_, this);
    AddHold();
    StartRead(&response_);
    StartCall();
  }

  void send(etcdserverpb::WatchRequest request) {
    std::lock_guard lock(mutex_);
    if (closed_) return;  // the next stream re-creates every live watch
    queue_.push_back(std::move(request));
    if (!writing_) {
      writing_ = true;
      StartWrite(&queue_.front());
    }
  }

  void cancel() { context_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (ok) {
      hub_.on_response(response_);
      StartRead(&response_);
      return;
    }
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
    }
    RemoveHold();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mutex_);
    queue_.pop_front();
    if (!ok) closed_ = true;  // the read side notices too and ends the stream
    if (ok && !queue_.empty()) {
      StartWrite(&queue_.front());
    } else {
      writing_ = false;
    }
  }

  void OnDone(const grpc::Status& /*status*/) override {
    hub_.on_stream_done(this);
    delete this;
  }

 private:
  WatchHub& hub_;
  grpc::ClientContext context_;
  etcdserverpb::WatchResponse response_;
  std::mutex mutex_;
  std::deque<etcdserverpb::WatchRequest> queue_;  // front() is being written
  bool writing_ = false;
  bool closed_ = false;
};

class WatchHub::Subscription final : public ReleaseSubscription {
 public:
  Subscription(WatchHub& hub, std::int64_t watch_id) : hub_(hub), watch_id_(watch_id) {}
  ~Subscription() override { hub_.unsubscribe(watch_id_); }

 private:
  WatchHub& hub_;
  std::int64_t watch_id_;
};

WatchHub::WatchHub(std::shared_ptr<grpc::Channel> channel)
    : channel_(std::move(channel)), stub_(etcdserverpb::Watch::NewStub(channel_)) {}

WatchHub::~WatchHub() {
  std::unique_lock lock(mutex_);
  stopping_ = true;
  if (stream_ != nullptr) stream_->cancel();
  changed_.notify_all();
  changed_.wait(lock, [this] { return stream_ == nullptr; });
  lock.unlock();
  if (worker_.joinable()) worker_.join();
}

ReleaseSubscriptionPtr WatchHub::subscribe(std::string etcd_key, std::int64_t start_revision,
                                           ReleaseCallback on_event,
                                           std::function<void(std::int64_t)> on_created,
                                           std::string range_end, bool leader_puts) {
  auto watch = std::make_shared<Watch>();
  watch->key = std::move(etcd_key);
  watch->range_end = std::move(range_end);
  watch->leader_puts = leader_puts;
  watch->next_revision = start_revision;
  watch->on_event = std::move(on_event);
  watch->on_created = std::move(on_created);
  std::lock_guard lock(mutex_);
  const std::int64_t watch_id = next_watch_id_++;
  watches_.emplace(watch_id, watch);
  start_worker_locked();
  if (stream_ != nullptr) send_create_locked(watch_id, *watch);
  return std::make_unique<Subscription>(*this, watch_id);
}

}  // namespace dlock::store::etcd

// Deliberately external (see start_worker_locked).
std::shared_ptr<grpc::Channel>* g_kept_watch_channel = nullptr;

namespace dlock::store::etcd {

void WatchHub::start_worker_locked() {
  if (worker_.joinable()) return;
  // gRPC 1.51 (Debian 12) shares one process-wide completion queue between every channel that
  // uses the callback API and shuts it down when the last such channel goes; a new stream
  // racing with that shutdown aborts the process (ref_counted.h "prior > 0", seen when stores
  // come and go). Keeping the first watching channel forever keeps that queue alive.
  // (Reachable from an external global, never destroyed: no exit-time teardown racing gRPC's
  // own, and LeakSanitizer sees it reachable. A function-local static that is only written
  // would be optimised away and the channel reported as leaked.)
  static std::once_flag keep_once;
  std::call_once(keep_once,
                 [this] { g_kept_watch_channel = new std::shared_ptr<grpc::Channel>(channel_); });
  worker_ = std::thread([this] { run(); });
}

void WatchHub::send_create_locked(std::int64_t watch_id, const Watch& watch) {
  etcdserverpb::WatchRequest request;
  auto* create = request.mutable_create_request();
  create->set_key(watch.key);
  create->set_range_end(watch.range_end);
  create->set_start_revision(watch.next_revision);
  create->set_watch_id(watch_id);
  // Only deletes are releases (release, expiry, revoke). A put is a grant: a hand-over or a
  // re-entrant acquire rewriting the key while it stays held; waking waiters for it would only
  // cost a failing acquire Txn, itself a Raft write. A leader's put (docs/adr/0020) is an event
  // for an election's observers: etcd cannot filter by value, so a lock key's watch receives
  // puts and on_response drops the plain grants' (an answer over the stream, no wake-up).
  if (!watch.leader_puts) create->add_filters(etcdserverpb::WatchCreateRequest::NOPUT);
  stream_->send(std::move(request));
}

// Opens the stream, and again each time it ends, until the hub is destroyed. The backoff only
// spaces out streams that etcd ends at once (e.g. while it has no leader); waiting for the
// channel itself is gRPC's job (wait_for_ready).
void WatchHub::run() {
  auto backoff = std::chrono::milliseconds(50);
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    // Started under the lock: gRPC never runs reactions inline, so OnDone (which clears
    // stream_) cannot run before stream_ is set.
    auto* stream = new Stream(*this);
    stream->start(*stub_);
    stream_ = stream;
    const auto started = std::chrono::steady_clock::now();
    for (const auto& [watch_id, watch] : watches_) send_create_locked(watch_id, *watch);
    changed_.wait(lock, [&] { return stream_ == nullptr; });
    if (stopping_) break;
    // A stream that lived a while was healthy: reconnect quickly.
    if (std::chrono::steady_clock::now() - started > std::chrono::seconds(5)) {
      backoff = std::chrono::milliseconds(50);
    }
    changed_.wait_for(lock, backoff, [this] { return stopping_; });
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
  }
}

void WatchHub::on_response(const etcdserverpb::WatchResponse& response) {
  std::unique_lock lock(mutex_);
  const auto found = watches_.find(response.watch_id());
  if (found == watches_.end()) return;  // cancelled by us; etcd confirms it
  const std::shared_ptr<Watch> watch = found->second;
  bool fire = false;
  // A batch of only plain grants' puts (a watch with leader_puts) is reported with the latest
  // one's revision, its token; anything else as a possible release (0).
  FencingToken granted = 0;
  bool ended = false;
  std::function<void(std::int64_t)> on_created;
  if (response.created() && watch->next_revision == 0) {
    // The watch starts after header.revision; a release before that was not seen: the creator
    // checks (on_created), or the waiter is woken once to look for itself.
    watch->next_revision = response.header().revision() + 1;
    if (watch->on_created) {
      on_created = std::move(watch->on_created);
      watch->on_created = nullptr;
    } else {
      fire = true;
      ended = true;
    }
  }
  for (const auto& event : response.events()) {
    watch->next_revision = std::max(watch->next_revision, event.kv().mod_revision() + 1);
    if (event.type() == mvccpb::Event::PUT && !holds_leader(event.kv())) {
      granted = std::max(granted, static_cast<FencingToken>(event.kv().mod_revision()));
    } else {
      ended = true;
    }
    fire = true;
  }
  if (response.canceled() || response.compact_revision() != 0) {
    // etcd dropped the watch (its start revision was compacted away): events may be lost, so
    // wake the waiter and watch again from now.
    watch->next_revision = 0;
    fire = true;
    ended = true;
    if (stream_ != nullptr) send_create_locked(found->first, *watch);
  }
  if (on_created) {
    lock.unlock();
    on_created(response.header().revision());
    lock.lock();
  }
  if (!fire) return;
  if (ended) granted = 0;
  watch->running_on = std::this_thread::get_id();
  lock.unlock();
  watch->on_event(granted);
  lock.lock();
  watch->running_on = std::thread::id();
  changed_.notify_all();
}

void WatchHub::on_stream_done(Stream* stream) {
  std::lock_guard lock(mutex_);
  if (stream_ == stream) stream_ = nullptr;
  changed_.notify_all();
}

void WatchHub::unsubscribe(std::int64_t watch_id) {
  std::unique_lock lock(mutex_);
  const auto found = watches_.find(watch_id);
  if (found == watches_.end()) return;
  const std::shared_ptr<Watch> watch = found->second;
  watches_.erase(found);
  if (stream_ != nullptr) {
    etcdserverpb::WatchRequest request;
    request.mutable_cancel_request()->set_watch_id(watch_id);
    stream_->send(std::move(request));
  }
  // A callback running on another thread finishes first; one running on this thread is the
  // caller itself, unsubscribing from inside its own callback.
  const auto self = std::this_thread::get_id();
  changed_.wait(
      lock, [&] { return watch->running_on == std::thread::id() || watch->running_on == self; });
}

namespace {

// Bound on the remembered "held at revision" entries (see ReleaseWatches::remember_held).
constexpr std::size_t kMaxRememberedKeys = 4096;

// The revision a watch was created at, handed from the watch's thread to the subscriber.
struct CreatedAt {
  std::mutex mutex;
  std::condition_variable created;
  std::optional<std::int64_t> revision;
  void set(std::int64_t at) {
    std::lock_guard lock(mutex);
    revision = at;
    created.notify_all();
  }
  std::optional<std::int64_t> wait_until(SteadyClock::time_point deadline) {
    std::unique_lock lock(mutex);
    created.wait_until(lock, deadline, [&] { return revision.has_value(); });
    return revision;
  }
};

}  // namespace

ReleaseWatches::ReleaseWatches(EtcdClient& client)
    : client_(client), hub_(std::make_unique<WatchHub>(client.shared_channel())) {}

void ReleaseWatches::remember_held(const std::string& etcd_key, std::int64_t revision,
                                   std::int64_t create_revision) {
  const HeldAt held{revision, create_revision};
  std::lock_guard lock(held_mutex_);
  if (held_at_.size() >= kMaxRememberedKeys && !held_at_.contains(etcd_key)) held_at_.clear();
  auto& remembered = held_at_[etcd_key];
  if (held.revision >= remembered.revision) remembered = held;
}

namespace {

// Both watches of one watch_releases.
class BothSubscriptions final : public ReleaseSubscription {
 public:
  BothSubscriptions(ReleaseSubscriptionPtr first, ReleaseSubscriptionPtr second)
      : first_(std::move(first)), second_(std::move(second)) {}

 private:
  ReleaseSubscriptionPtr first_;
  ReleaseSubscriptionPtr second_;
};

}  // namespace

ReleaseSubscriptionPtr ReleaseWatches::watch(const std::string& etcd_key, const KeyRange& holders,
                                             const KeyRange& delays, ReleaseCallback on_released) {
  // Both watches go on the one stream, the holder range's first: etcd creates a stream's watches
  // in the order asked (also when the stream is opened again: by watch ID), so the holder range
  // watch exists once the lock key's does. The lock key's watch either wakes the waiter once as
  // etcd creates it (nothing remembered) or is created before this returns (a remembered
  // exclusive holder, whose catch-up check covers what happened before): either way no holder's
  // release after this call is missed, and the holder watch needs no wake-up of its own at its
  // start (a spurious one, which etcd_store_test forbids).
  // The lock-delay state's watch likewise (a delay key's deletion: the delay is over).
  auto delay_watch = hub_->subscribe(
      delays.begin, 0, on_released, [](std::int64_t) {}, delays.end);
  auto holder_watch = hub_->subscribe(
      holders.begin, 0, on_released, [](std::int64_t) {}, holders.end);
  auto key_watch = watch_key(etcd_key, std::move(on_released));
  return std::make_unique<BothSubscriptions>(
      std::make_unique<BothSubscriptions>(std::move(key_watch), std::move(holder_watch)),
      std::move(delay_watch));
}

ReleaseSubscriptionPtr ReleaseWatches::watch_key(const std::string& etcd_key,
                                                 ReleaseCallback on_released) {
  std::optional<HeldAt> held;
  {
    std::lock_guard lock(held_mutex_);
    const auto found = held_at_.find(etcd_key);
    if (found != held_at_.end()) held = found->second;
  }
  // Without a failed acquire to start from: watch from now, woken once when it exists.
  if (!held) return hub_->subscribe(etcd_key, 0, std::move(on_released), {}, {}, true);
  // Watch from now (etcd delivers a watch that starts in the past from a 100 ms catch-up
  // loop), then check whether the grant seen holding the key ended between the failed
  // acquire and the watch's start: then wake the waiter now.
  auto created = std::make_shared<CreatedAt>();
  auto subscription = hub_->subscribe(
      etcd_key, 0, on_released, [created](std::int64_t revision) { created->set(revision); }, {},
      true);
  const auto revision = created->wait_until(SteadyClock::now() + client_.call_timeout());
  if (!revision || released_since(etcd_key, *held, *revision)) on_released(0);
  return subscription;
}

bool ReleaseWatches::released_since(const std::string& etcd_key, const HeldAt& held,
                                    std::int64_t revision) {
  if (revision <= held.revision) return false;  // nothing was written since
  try {
    auto request = range_request(etcd_key);
    request.set_revision(revision);
    const auto response = client_.range(request);
    return response.kvs_size() == 0 || response.kvs(0).create_revision() != held.create_revision;
  } catch (const Error&) {
    return true;
  }
}

}  // namespace dlock::store::etcd
