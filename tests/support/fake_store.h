#pragma once

// An in-memory dlock::Backend for unit tests of the code above the store SPI (LockService).
// It follows include/dlock/lock_store.h closely enough to drive the service: one global token
// counter (so every key's tokens strictly increase), expiry on an injected clock, re-entrant
// grants, hand-over, sessions whose locks die with them, and release notifications through
// core::ReleaseHub as the sqlite store does. Not a conformance-tested backend: no persistence,
// no call timeout (nothing here blocks), and backend_id() is "fake".

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/release_hub.h"
#include "dlock/lock_store.h"

namespace dlock::testing {

struct FakeStoreOptions {
  // The store's clock (the "database now()"); the real wall clock unless a test injects one.
  std::function<WallClock::time_point()> now = [] { return WallClock::now(); };
  // Small by default so tests can let grants expire in milliseconds.
  TtlLimits limits{std::chrono::milliseconds(1), std::chrono::hours(1)};
};

class FakeStore : public Backend {
 public:
  explicit FakeStore(FakeStoreOptions options = {});

  std::optional<LockHandle> try_insert(std::string_view key, std::string_view owner_id,
                                       std::string_view session_id,
                                       std::chrono::milliseconds ttl) override;
  std::optional<LockInfo> read(std::string_view key) override;
  std::vector<LockInfo> list(std::string_view prefix, std::size_t limit) override;
  LockHandle extend(const LockHandle& handle, std::chrono::milliseconds ttl) override;
  bool delete_if_owner(std::string_view key, std::string_view owner_id, std::string_view session_id,
                       FencingToken fencing_token) override;
  std::optional<LockHandle> handover(const LockHandle& from, std::string_view next_owner_id,
                                     std::string_view next_session_id,
                                     std::chrono::milliseconds ttl) override;
  LockOutcome revoke(std::string_view key) override;
  ReapReport reap_expired() override;
  ReleaseSubscriptionPtr watch_releases(std::string_view key,
                                        std::function<void()> on_released) override;
  std::string_view backend_id() const override { return "fake"; }

  SessionInfo open_session(std::string_view owner_id, std::chrono::milliseconds ttl) override;
  SessionInfo heartbeat(std::string_view session_id) override;
  std::optional<SessionInfo> get_session(std::string_view session_id) override;
  std::vector<LockInfo> close_session(std::string_view session_id) override;

  // Test access: the last token minted (for any key), 0 before the first grant.
  FencingToken last_token() const;

 private:
  struct Session {
    std::string owner_id;
    std::chrono::milliseconds ttl{0};
    WallClock::time_point expires_at{};
  };

  bool session_live(std::string_view session_id, WallClock::time_point now) const;  // under mutex_
  const LockInfo* live_grant(std::string_view key,
                             WallClock::time_point now) const;  // under mutex_
  LockHandle grant(std::string_view key, std::string_view owner_id, std::string_view session_id,
                   std::chrono::milliseconds ttl, SteadyClock::time_point sent_at,
                   WallClock::time_point now);  // under mutex_

  const FakeStoreOptions options_;
  core::ReleaseHub hub_;  // notified outside mutex_
  mutable std::mutex mutex_;
  std::map<std::string, LockInfo, std::less<>> locks_;  // rows, live or expired
  std::map<std::string, Session, std::less<>> sessions_;
  FencingToken next_token_ = 1;
  std::uint64_t next_session_ = 1;
};

}  // namespace dlock::testing
