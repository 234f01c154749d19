#pragma once

// In-process fan-out of "the grant of this key may have ended" to the subscribers of
// LockStore::watch_releases. Stores feed it from their own writes (sqlite) or from the
// backend's change feed (PostgreSQL LISTEN/NOTIFY).

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "dlock/lock_store.h"

namespace dlock::util {

class ReleaseHub {
 public:
  // Registers `callback` for `key`. Destroying the result unsubscribes; it waits for a callback
  // in progress, so none runs after the destructor returns.
  ReleaseSubscriptionPtr subscribe(std::string_view key, std::function<void()> callback);

  // Runs the callbacks subscribed to `key` (on the calling thread).
  void notify(std::string_view key);
  // Runs every callback: used after the feed may have missed events (a lost connection).
  void notify_all();

 private:
  friend class HubSubscription;
  void unsubscribe(const std::string& key, std::uint64_t id);

  mutable std::recursive_mutex mutex_;
  std::uint64_t next_id_ = 0;
  std::multimap<std::string, std::pair<std::uint64_t, std::function<void()>>, std::less<>>
      subscribers_;
};

}  // namespace dlock::util
