#include "util/release_hub.h"

#include <charconv>
#include <memory>
#include <system_error>

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

ReleaseNotice parse_release_notice(std::string_view payload) {
  const auto tab = payload.find('\t');
  if (tab == std::string_view::npos) return {payload, 0};
  const auto digits = payload.substr(tab + 1);
  FencingToken granted = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), granted);
  if (error != std::errc() || end != digits.data() + digits.size()) granted = 0;
  return {payload.substr(0, tab), granted};
}

ReleaseSubscriptionPtr ReleaseHub::subscribe(std::string_view key, ReleaseCallback callback) {
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

void ReleaseHub::notify(std::string_view key, FencingToken granted) {
  std::lock_guard lock(mutex_);
  auto [first, last] = subscribers_.equal_range(key);
  // Collect first: a callback may unsubscribe itself and invalidate the iterator.
  std::vector<ReleaseCallback> callbacks;
  for (auto it = first; it != last; ++it) callbacks.push_back(it->second.second);
  for (auto& callback : callbacks) callback(granted);
}

void ReleaseHub::notify_all() {
  std::lock_guard lock(mutex_);
  std::vector<ReleaseCallback> callbacks;
  for (auto& entry : subscribers_) callbacks.push_back(entry.second.second);
  for (auto& callback : callbacks) callback(0);
}

}  // namespace dlock::util
