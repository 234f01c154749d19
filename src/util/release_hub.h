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

// A change feed's message about one key: "<key>" (a grant may have ended) or "<key>\t<token>"
// (a hand-over granted `token`; a key has no control character). A token that is not a number
// above 0 reads as 0: a possible release, which is always safe to report.
struct ReleaseNotice {
  std::string_view key;
  FencingToken granted = 0;
};
ReleaseNotice parse_release_notice(std::string_view payload);

class ReleaseHub {
 public:
  // Registers `callback` for `key`. Destroying the result unsubscribes; it waits for a callback
  // in progress, so none runs after the destructor returns.
  ReleaseSubscriptionPtr subscribe(std::string_view key, ReleaseCallback callback);

  // Runs the callbacks subscribed to `key` (on the calling thread) with `granted`
  // (ReleaseCallback).
  void notify(std::string_view key, FencingToken granted = 0);
  void notify(const ReleaseNotice& notice) { notify(notice.key, notice.granted); }
  // Runs every callback: used after the feed may have missed events (a lost connection).
  void notify_all();

 private:
  friend class HubSubscription;
  void unsubscribe(const std::string& key, std::uint64_t id);

  mutable std::recursive_mutex mutex_;
  std::uint64_t next_id_ = 0;
  std::multimap<std::string, std::pair<std::uint64_t, ReleaseCallback>, std::less<>> subscribers_;
};

}  // namespace dlock::util
