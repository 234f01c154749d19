#pragma once

// A Backend that forwards every call to a target Backend it owns, in the shape of LevelDB's
// EnvWrapper: a subclass overrides only the calls it changes (ValidatingBackend checks the
// arguments, a test's wrapper runs code around a call) and inherits the forwarding of the rest.
// Every virtual of LockStore and SessionRegistry is forwarded here, those with a default
// implementation (try_heartbeat_async) included, so the target's own answers them.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "dlock/lock_store.h"

namespace dlock::util {

class BackendWrapper : public Backend {
 public:
  explicit BackendWrapper(BackendPtr target) : target_(std::move(target)) {}

  // The wrapped backend.
  Backend& target() const { return *target_; }

  std::optional<LockHandle> try_grant(std::string_view key, std::string_view owner_id,
                                      std::string_view session_id,
                                      const GrantRequest& request) override {
    return target_->try_grant(key, owner_id, session_id, request);
  }
  LockInfo proclaim(const GrantRef& grant, std::string_view value) override {
    return target_->proclaim(grant, value);
  }
  std::vector<LockInfo> read_holders(std::string_view key) override {
    return target_->read_holders(key);
  }
  std::optional<LockInfo> read(std::string_view key) override { return target_->read(key); }
  std::vector<LockInfo> list(std::string_view prefix, const ListAfter& after,
                             std::size_t limit) override {
    return target_->list(prefix, after, limit);
  }
  std::vector<KeyDelay> list_delays(std::string_view prefix, std::string_view after,
                                    std::size_t limit) override {
    return target_->list_delays(prefix, after, limit);
  }
  bool clear_delay(std::string_view key) override { return target_->clear_delay(key); }
  LockHandle extend(const GrantRef& grant, std::chrono::milliseconds ttl) override {
    return target_->extend(grant, ttl);
  }
  bool delete_if_owner(const GrantRef& grant) override { return target_->delete_if_owner(grant); }
  std::optional<LockHandle> handover(const GrantRef& from, std::string_view next_owner_id,
                                     std::string_view next_session_id, LockLease lease) override {
    return target_->handover(from, next_owner_id, next_session_id, lease);
  }
  LockOutcome revoke(std::string_view key) override { return target_->revoke(key); }
  ReapReport reap_expired() override { return target_->reap_expired(); }
  ReleaseSubscriptionPtr watch_releases(std::string_view key,
                                        ReleaseCallback on_released) override {
    return target_->watch_releases(key, std::move(on_released));
  }
  std::string_view backend_id() const override { return target_->backend_id(); }

  using SessionRegistry::open_session;
  SessionInfo open_session(std::string_view owner_id, std::chrono::milliseconds ttl,
                           std::chrono::milliseconds lock_delay) override {
    return target_->open_session(owner_id, ttl, lock_delay);
  }
  SessionInfo heartbeat(std::string_view session_id) override {
    return target_->heartbeat(session_id);
  }
  bool try_heartbeat_async(std::string_view session_id, HeartbeatDone& done) override {
    return target_->try_heartbeat_async(session_id, done);
  }
  std::optional<SessionInfo> get_session(std::string_view session_id) override {
    return target_->get_session(session_id);
  }
  std::vector<SessionInfo> list_sessions(std::string_view owner_prefix, std::string_view after,
                                         std::size_t limit) override {
    return target_->list_sessions(owner_prefix, after, limit);
  }
  std::vector<LockInfo> session_grants(std::string_view session_id) override {
    return target_->session_grants(session_id);
  }
  std::vector<LockInfo> close_session(std::string_view session_id) override {
    return target_->close_session(session_id);
  }

 private:
  BackendPtr target_;
};

}  // namespace dlock::util
