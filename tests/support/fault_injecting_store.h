#pragma once

// Wraps any dlock::Backend and makes chosen calls misbehave, so the code above the store SPI
// can be tested against backend faults in milliseconds (LevelDB's FaultInjectionEnv is the
// model). Faults are chosen per operation, by the SPI method's name ("try_grant", "read",
// "list", "extend", "delete_if_owner", "handover", "revoke", "list_delays", "clear_delay",
// "reap_expired", "watch_releases", "open_session", "heartbeat", "get_session",
// "list_sessions", "session_grants", "close_session"), for the next N calls or until cleared.
// Thread-safe; counts every call per operation, faulty or not.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "dlock/lock_store.h"

namespace dlock::testing {

enum class Fault {
  // Throws UnavailableError without calling the wrapped store.
  kUnavailable,
  // Blocks until release_hung() or the hang timeout, then throws UnavailableError without
  // calling the wrapped store: a call that overran the store's call timeout (C2).
  kHang,
  // Blocks like kHang, then performs the call on the wrapped store and returns its answer: a
  // slow but successful call.
  kStall,
  // Performs the call on the wrapped store, then throws UnknownOutcomeError: the write may
  // have happened (here it did) and the caller cannot tell.
  kUnknownOutcome,
};

class FaultInjectingStore : public Backend {
 public:
  static constexpr std::size_t kUntilCleared = std::numeric_limits<std::size_t>::max();

  explicit FaultInjectingStore(Backend& inner,
                               std::chrono::milliseconds hang_timeout = std::chrono::seconds(10));

  // The next `count` calls of `operation` misbehave as `fault` (replacing any earlier fault).
  void inject(std::string_view operation, Fault fault, std::size_t count = kUntilCleared);
  void clear(std::string_view operation);
  void clear_all();
  // Lets every call blocked right now by kHang / kStall go on.
  void release_hung();
  // Calls of `operation` so far (faulty or not).
  std::size_t calls(std::string_view operation) const;
  // Calls blocked in kHang / kStall right now.
  std::size_t blocked() const;
  // Waits until at least `count` calls are blocked, at most `timeout`; false on timeout.
  bool wait_for_blocked(std::size_t count, std::chrono::milliseconds timeout);

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
  std::string_view backend_id() const override { return inner_.backend_id(); }

  using SessionRegistry::open_session;
  SessionInfo open_session(std::string_view owner_id, std::chrono::milliseconds ttl,
                           std::chrono::milliseconds lock_delay) override;
  SessionInfo heartbeat(std::string_view session_id) override;
  std::optional<SessionInfo> get_session(std::string_view session_id) override;
  std::vector<SessionInfo> list_sessions(std::string_view owner_prefix, std::string_view after,
                                         std::size_t limit) override;
  std::vector<LockInfo> session_grants(std::string_view session_id) override;
  std::vector<LockInfo> close_session(std::string_view session_id) override;

 private:
  struct Injected {
    Fault fault = Fault::kUnavailable;
    std::size_t remaining = 0;
  };

  // Counts the call and returns the fault it must suffer, if any (consuming one of its count).
  std::optional<Fault> enter(std::string_view operation);
  // Blocks a kHang / kStall call until release_hung() or the hang timeout.
  void block();

  // Runs `call` on the wrapped store with `operation`'s injected fault applied.
  template <typename Call>
  auto invoke(std::string_view operation, Call call) -> decltype(call());

  Backend& inner_;
  const std::chrono::milliseconds hang_timeout_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Injected, std::less<>> faults_;
  std::map<std::string, std::size_t, std::less<>> calls_;
  std::size_t blocked_ = 0;
  std::uint64_t release_epoch_ = 0;  // bumped by release_hung()
};

}  // namespace dlock::testing
