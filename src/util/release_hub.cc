#include "util/release_hub.h"

#include <memory>

namespace dlock::util {

class HubSubscription final : public ReleaseSubscription {
 public:
  HubSubscription(ReleaseHub& hub, std::string key, std::uint64_t id)
      : hub_(hub), key_(std::move(key)), id_(id) {}
  ~HubSubscription() override { hub_.unsubscribe(key_, id_); }

 private:
  ReleaseHub& hub_;
  std::string key_;
  std::uint64_t id_;
};

ReleaseSubscriptionPtr ReleaseHub::subscribe(std::string_view key, std::function<void()> callback) {
  std::lock_guard lock(mutex_);
  const auto id = next_id_++;
  subscribers_.emplace(std::string(key), std::make_pair(id, std::move(callback)));
  return std::make_unique<HubSubscription>(*this, std::string(key), id);
}

void ReleaseHub::unsubscribe(const std::string& key, std::uint64_t id) {
  // Callbacks run under the same (recursive) mutex, so once this returns none is running and
  // none will start; a callback may itself drop its own subscription.
  std::lock_guard lock(mutex_);
  auto [first, last] = subscribers_.equal_range(key);
  for (auto it = first; it != last; ++it) {
    if (it->second.first == id) {
      subscribers_.erase(it);
      return;
    }
  }
}

void ReleaseHub::notify(std::string_view key) {
  std::lock_guard lock(mutex_);
  auto [first, last] = subscribers_.equal_range(key);
  // Collect first: a callback may unsubscribe itself and invalidate the iterator.
  std::vector<std::function<void()>> callbacks;
  for (auto it = first; it != last; ++it) callbacks.push_back(it->second.second);
  for (auto& callback : callbacks) callback();
}

void ReleaseHub::notify_all() {
  std::lock_guard lock(mutex_);
  std::vector<std::function<void()>> callbacks;
  for (auto& entry : subscribers_) callbacks.push_back(entry.second.second);
  for (auto& callback : callbacks) callback();
}

}  // namespace dlock::util
