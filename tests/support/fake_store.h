#pragma once

// An in-memory dlock::Backend for unit tests of the code above the store SPI (LockService).
// It follows include/dlock/lock_store.h closely enough to drive the service: one global token
// counter (so every key's tokens strictly increase), expiry on an injected clock, re-entrant
// grants, hand-over, sessions whose locks die with them, and release notifications through
// util::ReleaseHub as the sqlite store does. Several FakeStores may share one FakeStorage, as
// several dlockd share one database; the storage can be made unavailable (an outage). The
// conformance matrix runs against it (fake_store_conformance_test). No persistence, no call
// timeout (nothing here blocks), and backend_id() is "fake".

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/lock_store.h"
#include "util/release_hub.h"

namespace dlock::testing {

struct FakeStoreOptions {
  // The store's clock (the "database now()"); the real wall clock unless a test injects one.
  std::function<WallClock::time_point()> now = [] { return WallClock::now(); };
  // Small by default so tests can let grants expire in milliseconds.
  TtlLimits limits{std::chrono::milliseconds(1), std::chrono::hours(1)};
};

// The state FakeStores share: grants, sessions, the token counter and the release feed.
class FakeStorage {
 public:
  // Until end_outage(), every call of every store on this storage throws UnavailableError.
  void begin_outage();
  void end_outage();
  // Deletes `key`'s row behind the stores' backs (no notification).
  void raw_delete(std::string_view key);

 private:
  friend class FakeStore;
  struct Session {
    std::string owner_id;
    std::chrono::milliseconds ttl{0};
    WallClock::time_point expires_at{};
    std::chrono::milliseconds lock_delay{0};
  };

  util::ReleaseHub hub;  // notified outside mutex
  mutable std::mutex mutex;
  bool outage = false;
  std::map<std::string, LockInfo, std::less<>> locks;  // exclusive rows, live or expired
  // Shared and permit holders (ADR-0020) per key, by session: rows, live or expired.
  std::map<std::string, std::map<std::string, LockInfo, std::less<>>, std::less<>> holders;
  std::map<std::string, Session, std::less<>> sessions;
  // Lock-delay (C2): each grant's delay by its token (only those > 0), and the names whose
  // delay runs after their grant's row was removed (revoke, reap).
  std::map<FencingToken, std::chrono::milliseconds> grant_delay;
  std::map<std::string, WallClock::time_point, std::less<>> delayed_until;
  FencingToken next_token = 1;
};

class FakeStore : public Backend {
 public:
  explicit FakeStore(FakeStoreOptions options = {},
                     std::shared_ptr<FakeStorage> storage = std::make_shared<FakeStorage>());

  std::optional<LockHandle> try_grant(std::string_view key, std::string_view owner_id,
                                      std::string_view session_id,
                                      const GrantRequest& request) override;
  LockInfo proclaim(const GrantRef& grant, std::string_view value) override;
  std::vector<LockInfo> read_holders(std::string_view key) override;
  std::optional<LockInfo> read(std::string_view key) override;
  std::vector<LockInfo> list(std::string_view prefix, const ListAfter& after,
                             std::size_t limit) override;
  LockHandle extend(const GrantRef& grant, std::chrono::milliseconds ttl) override;
  bool delete_if_owner(const GrantRef& grant) override;
  std::optional<LockHandle> handover(const GrantRef& from, std::string_view next_owner_id,
                                     std::string_view next_session_id, LockLease lease) override;
  LockOutcome revoke(std::string_view key) override;
  std::vector<KeyDelay> list_delays(std::string_view prefix, std::string_view after,
                                    std::size_t limit) override;
  bool clear_delay(std::string_view key) override;
  ReapReport reap_expired() override;
  ReleaseSubscriptionPtr watch_releases(std::string_view key, ReleaseCallback on_released) override;
  std::string_view backend_id() const override { return "fake"; }

  // Gives `key`'s live exclusive grant to another session with a new token and `ttl`, with no
  // notification: a hand-over by another server whose report has not arrived yet.
  FencingToken raw_handover(std::string_view key, std::string_view owner_id,
                            std::string_view session_id, std::chrono::milliseconds ttl);

  using SessionRegistry::open_session;
  SessionInfo open_session(std::string_view owner_id, std::chrono::milliseconds ttl,
                           std::chrono::milliseconds lock_delay) override;
  SessionInfo heartbeat(std::string_view session_id) override;
  std::optional<SessionInfo> get_session(std::string_view session_id) override;
  std::vector<SessionInfo> list_sessions(std::string_view owner_prefix, std::string_view after,
                                         std::size_t limit) override;
  std::vector<LockInfo> session_grants(std::string_view session_id) override;
  std::vector<LockInfo> close_session(std::string_view session_id) override;

  // Test access: the last token minted (for any key), 0 before the first grant.
  FencingToken last_token() const;

 private:
  // Locks the storage; throws UnavailableError during an outage.
  std::unique_lock<std::mutex> enter() const;
  bool session_live(std::string_view session_id,
                    WallClock::time_point now) const;  // under the storage mutex
  // A row is live until its own expiry or, session-bound, while its session is (ADR-0018).
  bool live(const LockInfo& row, WallClock::time_point now) const;  // under the storage mutex
  // The row as read/list report it: a session-bound one with its session's expiry.
  LockInfo reported(const LockInfo& row) const;  // under the storage mutex
  // Lock-delay (under the storage mutex): whether a grant of `key` that ended without a release
  // keeps it from new grants at `now`; and the bookkeeping when a row that ended (or ends now,
  // at `end`) without a release is removed.
  bool delayed(std::string_view key, WallClock::time_point now) const;
  void remove_unreleased(const LockInfo& row, WallClock::time_point end);
  const LockInfo* live_grant(std::string_view key,
                             WallClock::time_point now) const;  // under the storage mutex
  // The live shared or permit holders of `key`, ordered by token (under the storage mutex).
  std::vector<const LockInfo*> live_holders(std::string_view key, WallClock::time_point now) const;
  // A new row for (key, owner_id, session_id) with the next token (under the storage mutex).
  LockInfo make_row(std::string_view key, std::string_view owner_id, std::string_view session_id,
                    LockLease lease, WallClock::time_point now);
  // try_grant of an exclusive grant, or of a leader with its value.
  std::optional<LockHandle> insert_exclusive(std::string_view key, std::string_view owner_id,
                                             std::string_view session_id, LockLease lease,
                                             std::optional<std::string_view> value);
  // try_grant of a shared or permit holder.
  std::optional<LockHandle> insert_holder(std::string_view key, std::string_view owner_id,
                                          std::string_view session_id, const GrantRequest& request);
  LockHandle handle_of(const LockInfo& row, SteadyClock::time_point sent_at,
                       WallClock::time_point now) const;
  LockHandle grant(std::string_view key, std::string_view owner_id, std::string_view session_id,
                   LockLease lease, SteadyClock::time_point sent_at,
                   WallClock::time_point now);  // under the storage mutex

  const FakeStoreOptions options_;
  const std::shared_ptr<FakeStorage> storage_;
  FakeStorage& s_;  // *storage_
};

}  // namespace dlock::testing
