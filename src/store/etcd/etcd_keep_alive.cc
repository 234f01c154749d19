#include "store/etcd/etcd_keep_alive.h"

#include <deque>
#include <map>
#include <optional>
#include <utility>

#include "dlock/errors.h"
#include "store/etcd/etcd_status.h"

namespace dlock::store::etcd {

struct KeepAliveStream::Waiter {
  std::condition_variable answered;  // its own: an answer wakes only the caller waiting for it
  bool done = false;
  std::int64_t ttl = 0;
  std::optional<grpc::Status> failed;
  Done on_done;  // start_async's: called instead of waking a caller
};

struct KeepAliveStream::Call {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<etcdserverpb::LeaseKeepAliveRequest,
                                           etcdserverpb::LeaseKeepAliveResponse>>
      stream;
  // Guarded by KeepAliveStream::mutex_: callers waiting for an answer, by lease ID, in the
  // order their requests were queued (and so written);
  std::map<std::int64_t, std::deque<std::shared_ptr<Waiter>>> waiting;
  std::vector<std::int64_t> queued;  // the lease IDs to write next, in order;
  bool writing = false;              // a caller is writing (one Write at a time on a stream);
  bool broken = false;
};

KeepAliveStream::KeepAliveStream(std::shared_ptr<grpc::Channel> channel,
                                 etcdserverpb::Lease::Stub& stub)
    : channel_(std::move(channel)), stub_(stub) {}

KeepAliveStream::~KeepAliveStream() {
  std::vector<std::thread> readers;
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
    if (call_) call_->context.TryCancel();
    readers.swap(readers_);
    writer_wake_.notify_one();
  }
  if (writer_.joinable()) writer_.join();
  for (auto& reader : readers) reader.join();
}

std::shared_ptr<KeepAliveStream::Call> KeepAliveStream::current_or_open(
    std::chrono::steady_clock::time_point deadline) {
  const auto open_call = [&]() -> std::shared_ptr<Call> {
    std::lock_guard lock(mutex_);
    if (closing_) throw UnavailableError("etcd lease keep-alive: the store is shutting down");
    return call_ && !call_->broken ? call_ : nullptr;
  };
  if (auto call = open_call()) return call;
  std::lock_guard open(open_mutex_);
  if (auto call = open_call()) return call;  // opened by another caller meanwhile
  // Creating a stream waits for its first message to be sent, i.e. for a connection: wait for
  // one here, bounded by the caller's deadline, rather than inside gRPC without a bound.
  auto state = channel_->GetState(true);
  while (state != GRPC_CHANNEL_READY) {
    const auto remaining = deadline - std::chrono::steady_clock::now();
    if (remaining <= std::chrono::steady_clock::duration::zero() ||
        !channel_->WaitForStateChange(state, std::chrono::system_clock::now() + remaining)) {
      throw_for_status(grpc::Status(grpc::StatusCode::UNAVAILABLE, "no connection to etcd"),
                       "lease keep-alive", CallKind::kRead);
    }
    state = channel_->GetState(true);
  }
  auto call = std::make_shared<Call>();
  call->stream = stub_.LeaseKeepAlive(&call->context);
  std::vector<std::thread> finished;
  {
    std::lock_guard lock(mutex_);
    // Every earlier stream is broken: its reader has ended or is ending (cancelled).
    finished.swap(readers_);
    call_ = call;
    readers_.emplace_back([this, call] { read_loop(call); });
  }
  for (auto& reader : finished) reader.join();
  return call;
}

std::vector<KeepAliveStream::Done> KeepAliveStream::fail_locked(Call& call,
                                                                const grpc::Status& status) {
  std::vector<Done> callbacks;
  call.broken = true;
  for (auto& [id, waiters] : call.waiting) {
    for (auto& waiter : waiters) {
      waiter->failed = status;
      waiter->done = true;
      if (waiter->on_done) {
        callbacks.push_back(std::move(waiter->on_done));
      } else {
        waiter->answered.notify_one();
      }
    }
  }
  call.waiting.clear();
  call.queued.clear();
  return callbacks;
}

void KeepAliveStream::read_loop(const std::shared_ptr<Call>& call) {
  etcdserverpb::LeaseKeepAliveResponse response;
  while (call->stream->Read(&response)) {
    Done done;
    {
      std::lock_guard lock(mutex_);
      const auto found = call->waiting.find(response.id());
      if (found == call->waiting.end()) continue;  // its caller gave up
      const auto waiter = found->second.front();
      found->second.pop_front();
      if (found->second.empty()) call->waiting.erase(found);
      waiter->ttl = response.ttl();
      waiter->done = true;
      if (waiter->on_done) {
        done = std::move(waiter->on_done);
      } else {
        waiter->answered.notify_one();
      }
    }
    if (done) done(response.ttl(), nullptr);
  }
  grpc::Status status = call->stream->Finish();
  if (status.ok() || status.error_code() == grpc::StatusCode::CANCELLED) {
    // Ended by etcd, or cancelled here after a caller timed out: retryable either way.
    status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "keep-alive stream ended");
  }
  std::vector<Done> failed;
  {
    std::lock_guard lock(mutex_);
    failed = fail_locked(*call, status);
  }
  for (auto& done : failed) done(0, &status);
}

KeepAliveStream::Pending KeepAliveStream::start(std::int64_t lease_id,
                                                std::chrono::steady_clock::time_point deadline) {
  auto waiter = std::make_shared<Waiter>();
  const auto call = current_or_open(deadline);
  {
    std::lock_guard lock(mutex_);
    if (call->broken) {
      // It broke just now: its reader has failed its waiters already, so fail this one too.
      waiter->failed = grpc::Status(grpc::StatusCode::UNAVAILABLE, "keep-alive stream ended");
      waiter->done = true;
      return Pending{lease_id, call, std::move(waiter)};
    }
    call->waiting[lease_id].push_back(waiter);
    call->queued.push_back(lease_id);
  }
  write_queued(*call);
  return Pending{lease_id, call, std::move(waiter)};
}

bool KeepAliveStream::start_async(std::int64_t lease_id,
                                  std::chrono::steady_clock::time_point deadline, Done& done) {
  std::lock_guard lock(mutex_);
  if (closing_ || !call_ || call_->broken) return false;
  auto waiter = std::make_shared<Waiter>();
  waiter->on_done = std::move(done);
  call_->waiting[lease_id].push_back(waiter);
  call_->queued.push_back(lease_id);
  async_.push_back(Async{deadline, call_, lease_id, std::move(waiter)});
  if (!writer_.joinable()) {
    writer_ = std::thread([this] { writer_loop(); });
  } else if (writer_idle_) {
    writer_wake_.notify_one();
  }
  return true;
}

void KeepAliveStream::writer_loop() {
  std::unique_lock lock(mutex_);
  while (!closing_) {
    if (call_ && !call_->broken && !call_->queued.empty() && !call_->writing) {
      const auto call = call_;
      lock.unlock();
      write_queued(*call);
      lock.lock();
      continue;
    }
    // Answered (or failed) ones leave; an unanswered one past its deadline fails, and its
    // stream with it (as in finish: the next renewal opens a new one).
    const auto now = std::chrono::steady_clock::now();
    std::vector<Done> late;
    while (!async_.empty() && (async_.front().waiter->done || async_.front().deadline <= now)) {
      Async entry = std::move(async_.front());
      async_.pop_front();
      if (entry.waiter->done) continue;
      if (const auto found = entry.call->waiting.find(entry.lease_id);
          found != entry.call->waiting.end()) {
        std::erase(found->second, entry.waiter);
        if (found->second.empty()) entry.call->waiting.erase(found);
      }
      entry.waiter->done = true;
      late.push_back(std::move(entry.waiter->on_done));
      entry.call->broken = true;
      entry.call->context.TryCancel();
    }
    if (!late.empty()) {
      lock.unlock();
      const grpc::Status status(grpc::StatusCode::DEADLINE_EXCEEDED, "no answer in time");
      for (auto& done : late) done(0, &status);
      lock.lock();
      continue;
    }
    writer_idle_ = true;
    if (async_.empty()) {
      writer_wake_.wait(lock);
    } else {
      writer_wake_.wait_until(lock, async_.front().deadline);
    }
    writer_idle_ = false;
  }
}

void KeepAliveStream::write_queued(Call& call) {
  std::vector<std::int64_t> batch;
  std::unique_lock lock(mutex_);
  if (call.writing) return;  // the writing caller writes this request too
  call.writing = true;
  while (!call.queued.empty() && !call.broken) {
    batch.swap(call.queued);
    lock.unlock();
    etcdserverpb::LeaseKeepAliveRequest request;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      request.set_id(batch[i]);
      // All but the last may wait in gRPC's buffer for the next: one send for the batch.
      // A failed Write means the stream is over; the reader then fails every waiter with the
      // stream's status, these included.
      const auto options =
          i + 1 < batch.size() ? grpc::WriteOptions().set_buffer_hint() : grpc::WriteOptions();
      if (!call.stream->Write(request, options)) break;
    }
    batch.clear();
    lock.lock();
  }
  call.writing = false;
}

void KeepAliveStream::abandon(Pending& pending) noexcept {
  const auto call = std::move(pending.call);
  const auto waiter = std::move(pending.waiter);
  if (!call || !waiter) return;
  std::lock_guard lock(mutex_);
  const auto found = call->waiting.find(pending.lease_id);
  if (found == call->waiting.end()) return;
  std::erase(found->second, waiter);
  if (found->second.empty()) call->waiting.erase(found);
}

std::int64_t KeepAliveStream::finish(Pending& pending,
                                     std::chrono::steady_clock::time_point deadline) {
  const std::int64_t lease_id = pending.lease_id;
  const auto call = std::move(pending.call);
  const auto waiter = std::move(pending.waiter);
  if (!call || !waiter) throw InternalError("etcd lease keep-alive: finished twice");
  std::unique_lock lock(mutex_);
  if (!waiter->answered.wait_until(lock, deadline, [&] { return waiter->done; })) {
    // No answer in time: give up on this stream too (the next renewal opens a new one).
    if (const auto found = call->waiting.find(lease_id); found != call->waiting.end()) {
      std::erase(found->second, waiter);
      if (found->second.empty()) call->waiting.erase(found);
    }
    call->broken = true;
    call->context.TryCancel();
    throw_for_status(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "no answer in time"),
                     "lease keep-alive", CallKind::kRead);
  }
  if (waiter->failed) throw_for_status(*waiter->failed, "lease keep-alive", CallKind::kRead);
  return waiter->ttl;
}

std::int64_t KeepAliveStream::renew_alone(std::int64_t lease_id,
                                          std::chrono::steady_clock::time_point deadline) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       (deadline - std::chrono::steady_clock::now()));
  const auto stream = stub_.LeaseKeepAlive(&context);
  etcdserverpb::LeaseKeepAliveRequest request;
  request.set_id(lease_id);
  etcdserverpb::LeaseKeepAliveResponse response;
  if (stream->Write(request) && stream->Read(&response)) {
    // Answered: end the stream without waiting for etcd to close its side.
    context.TryCancel();
    stream->Finish();
    return response.ttl();
  }
  grpc::Status status = stream->Finish();
  if (status.ok() || status.error_code() == grpc::StatusCode::CANCELLED) {
    status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "keep-alive stream ended unanswered");
  }
  throw_for_status(status, "lease keep-alive", CallKind::kRead);
}

}  // namespace dlock::store::etcd
