#include "support/simulated_time.h"

namespace dlock::testing {

using std::chrono::milliseconds;

struct SimulatedTime::State {
  struct Entry {
    std::uint64_t timer = 0;
    std::function<void()> fire;
  };
  // Due instant (steady), then arm order: callbacks due together run in the order armed.
  using Queue = std::map<std::pair<SteadyClock::time_point, std::uint64_t>, Entry>;

  mutable std::mutex mutex;  // guards everything below
  SteadyClock::time_point steady{};
  WallClock::time_point wall{};
  Queue queue;
  std::map<std::uint64_t, Queue::key_type> armed_by_timer;
  std::uint64_t next_timer = 0;
  std::uint64_t next_seq = 0;

  // Under mutex. The callback is handed back to be destroyed once the lock is released: what it
  // holds may own a timer of this source.
  std::function<void()> disarm_locked(std::uint64_t timer) {
    const auto found = armed_by_timer.find(timer);
    if (found == armed_by_timer.end()) return {};
    const auto entry = queue.find(found->second);
    auto fire = std::move(entry->second.fire);
    queue.erase(entry);
    armed_by_timer.erase(found);
    return fire;
  }
};

namespace {

class SimulatedTimer final : public core::Timer {
 public:
  SimulatedTimer(std::weak_ptr<SimulatedTime::State> state, std::uint64_t id)
      : state_(std::move(state)), id_(id) {}
  ~SimulatedTimer() override { cancel(); }

  void arm(milliseconds delay, std::function<void()> fire) override {
    const auto state = state_.lock();
    if (!state) return;
    std::function<void()> replaced;
    std::lock_guard lock(state->mutex);
    replaced = state->disarm_locked(id_);
    const SimulatedTime::State::Queue::key_type key{state->steady + delay, state->next_seq++};
    state->queue.emplace(key, SimulatedTime::State::Entry{id_, std::move(fire)});
    state->armed_by_timer[id_] = key;
  }

  void cancel() override {
    const auto state = state_.lock();
    if (!state) return;
    std::function<void()> cancelled;
    std::lock_guard lock(state->mutex);
    cancelled = state->disarm_locked(id_);
  }

 private:
  std::weak_ptr<SimulatedTime::State> state_;
  const std::uint64_t id_;
};

}  // namespace

SimulatedTime::SimulatedTime(WallClock::time_point wall_start) : state_(std::make_shared<State>()) {
  state_->steady = SteadyClock::time_point(std::chrono::hours(1));
  state_->wall = wall_start;
}

SimulatedTime::~SimulatedTime() {
  State::Queue left;
  {
    std::lock_guard lock(state_->mutex);
    left.swap(state_->queue);
    state_->armed_by_timer.clear();
  }
}

SteadyClock::time_point SimulatedTime::steady_now() const {
  std::lock_guard lock(state_->mutex);
  return state_->steady;
}

WallClock::time_point SimulatedTime::wall_now() const {
  std::lock_guard lock(state_->mutex);
  return state_->wall;
}

core::TimerPtr SimulatedTime::make_timer() {
  std::lock_guard lock(state_->mutex);
  return std::make_unique<SimulatedTimer>(state_, state_->next_timer++);
}

void SimulatedTime::advance(milliseconds by) {
  std::unique_lock lock(state_->mutex);
  const auto until = state_->steady + by;
  for (;;) {
    const auto next = state_->queue.begin();
    if (next == state_->queue.end() || next->first.first > until) break;
    const auto step = next->first.first - state_->steady;
    state_->steady += step;
    state_->wall += std::chrono::duration_cast<WallClock::duration>(step);
    auto fire = std::move(next->second.fire);
    state_->armed_by_timer.erase(next->second.timer);
    state_->queue.erase(next);
    lock.unlock();
    fire();
    fire = nullptr;
    lock.lock();
  }
  const auto step = until - state_->steady;
  state_->steady += step;
  state_->wall += std::chrono::duration_cast<WallClock::duration>(step);
}

std::size_t SimulatedTime::armed() const {
  std::lock_guard lock(state_->mutex);
  return state_->queue.size();
}

std::optional<milliseconds> SimulatedTime::next_due_in() const {
  std::lock_guard lock(state_->mutex);
  if (state_->queue.empty()) return std::nullopt;
  return std::chrono::duration_cast<milliseconds>(state_->queue.begin()->first.first -
                                                  state_->steady);
}

}  // namespace dlock::testing
