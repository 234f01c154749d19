#include "support/fault_injecting_store.h"

#include <utility>

namespace dlock::testing {

using std::chrono::milliseconds;

FaultInjectingStore::FaultInjectingStore(Backend& inner, milliseconds hang_timeout)
    : inner_(inner), hang_timeout_(hang_timeout) {}

void FaultInjectingStore::inject(std::string_view operation, Fault fault, std::size_t count) {
  std::lock_guard lock(mutex_);
  faults_.insert_or_assign(std::string(operation), Injected{fault, count});
}

void FaultInjectingStore::clear(std::string_view operation) {
  std::lock_guard lock(mutex_);
  if (const auto found = faults_.find(operation); found != faults_.end()) faults_.erase(found);
}

void FaultInjectingStore::clear_all() {
  std::lock_guard lock(mutex_);
  faults_.clear();
}

void FaultInjectingStore::release_hung() {
  {
    std::lock_guard lock(mutex_);
    ++release_epoch_;
  }
  changed_.notify_all();
}

std::size_t FaultInjectingStore::calls(std::string_view operation) const {
  std::lock_guard lock(mutex_);
  const auto found = calls_.find(operation);
  return found == calls_.end() ? 0 : found->second;
}

std::size_t FaultInjectingStore::blocked() const {
  std::lock_guard lock(mutex_);
  return blocked_;
}

bool FaultInjectingStore::wait_for_blocked(std::size_t count, milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return blocked_ >= count; });
}

std::optional<Fault> FaultInjectingStore::enter(std::string_view operation) {
  std::lock_guard lock(mutex_);
  if (const auto counted = calls_.find(operation); counted != calls_.end()) {
    ++counted->second;
  } else {
    calls_.emplace(std::string(operation), 1);
  }
  const auto found = faults_.find(operation);
  if (found == faults_.end()) return std::nullopt;
  const auto fault = found->second.fault;
  if (found->second.remaining != kUntilCleared && --found->second.remaining == 0) {
    faults_.erase(found);
  }
  return fault;
}

void FaultInjectingStore::block() {
  std::unique_lock lock(mutex_);
  const auto epoch = release_epoch_;
  ++blocked_;
  changed_.notify_all();
  changed_.wait_for(lock, hang_timeout_, [&] { return release_epoch_ != epoch; });
  --blocked_;
  changed_.notify_all();
}

template <typename Call>
auto FaultInjectingStore::invoke(std::string_view operation, Call call) -> decltype(call()) {
  const auto fault = enter(operation);
  if (!fault) return call();
  const std::string what = "injected fault in " + std::string(operation);
  switch (*fault) {
    case Fault::kUnavailable:
      throw UnavailableError(what + ": unavailable");
    case Fault::kHang:
      block();
      throw UnavailableError(what + ": call timed out");
    case Fault::kStall:
      block();
      return call();
    case Fault::kUnknownOutcome:
      call();
      throw UnknownOutcomeError(what + ": outcome unknown");
  }
  return call();
}

std::optional<LockHandle> FaultInjectingStore::try_grant(std::string_view key,
                                                         std::string_view owner_id,
                                                         std::string_view session_id,
                                                         const GrantRequest& request) {
  return invoke("try_grant", [&] { return inner_.try_grant(key, owner_id, session_id, request); });
}

LockInfo FaultInjectingStore::proclaim(const GrantRef& grant, std::string_view value) {
  return invoke("proclaim", [&] { return inner_.proclaim(grant, value); });
}

std::vector<LockInfo> FaultInjectingStore::read_holders(std::string_view key) {
  return invoke("read_holders", [&] { return inner_.read_holders(key); });
}

std::optional<LockInfo> FaultInjectingStore::read(std::string_view key) {
  return invoke("read", [&] { return inner_.read(key); });
}

std::vector<LockInfo> FaultInjectingStore::list(std::string_view prefix, const ListAfter& after,
                                                std::size_t limit) {
  return invoke("list", [&] { return inner_.list(prefix, after, limit); });
}

LockHandle FaultInjectingStore::extend(const GrantRef& grant, milliseconds ttl) {
  return invoke("extend", [&] { return inner_.extend(grant, ttl); });
}

bool FaultInjectingStore::delete_if_owner(const GrantRef& grant) {
  return invoke("delete_if_owner", [&] { return inner_.delete_if_owner(grant); });
}

std::optional<LockHandle> FaultInjectingStore::handover(const GrantRef& from,
                                                        std::string_view next_owner_id,
                                                        std::string_view next_session_id,
                                                        LockLease lease) {
  return invoke("handover",
                [&] { return inner_.handover(from, next_owner_id, next_session_id, lease); });
}

LockOutcome FaultInjectingStore::revoke(std::string_view key) {
  return invoke("revoke", [&] { return inner_.revoke(key); });
}

std::vector<KeyDelay> FaultInjectingStore::list_delays(std::string_view prefix,
                                                       std::string_view after, std::size_t limit) {
  return invoke("list_delays", [&] { return inner_.list_delays(prefix, after, limit); });
}

bool FaultInjectingStore::clear_delay(std::string_view key) {
  return invoke("clear_delay", [&] { return inner_.clear_delay(key); });
}

std::vector<SessionInfo> FaultInjectingStore::list_sessions(std::string_view owner_prefix,
                                                            std::string_view after,
                                                            std::size_t limit) {
  return invoke("list_sessions", [&] { return inner_.list_sessions(owner_prefix, after, limit); });
}

std::vector<LockInfo> FaultInjectingStore::session_grants(std::string_view session_id) {
  return invoke("session_grants", [&] { return inner_.session_grants(session_id); });
}

ReapReport FaultInjectingStore::reap_expired() {
  return invoke("reap_expired", [&] { return inner_.reap_expired(); });
}

ReleaseSubscriptionPtr FaultInjectingStore::watch_releases(std::string_view key,
                                                           ReleaseCallback on_released) {
  return invoke("watch_releases",
                [&] { return inner_.watch_releases(key, std::move(on_released)); });
}

SessionInfo FaultInjectingStore::open_session(std::string_view owner_id, milliseconds ttl,
                                              milliseconds lock_delay) {
  return invoke("open_session", [&] { return inner_.open_session(owner_id, ttl, lock_delay); });
}

SessionInfo FaultInjectingStore::heartbeat(std::string_view session_id) {
  return invoke("heartbeat", [&] { return inner_.heartbeat(session_id); });
}

std::optional<SessionInfo> FaultInjectingStore::get_session(std::string_view session_id) {
  return invoke("get_session", [&] { return inner_.get_session(session_id); });
}

std::vector<LockInfo> FaultInjectingStore::close_session(std::string_view session_id) {
  return invoke("close_session", [&] { return inner_.close_session(session_id); });
}

}  // namespace dlock::testing
