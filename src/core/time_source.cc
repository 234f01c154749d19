#include "core/time_source.h"

#include <boost/asio/steady_timer.hpp>
#include <utility>

namespace dlock::core {

namespace {

class AsioTimer final : public Timer {
 public:
  explicit AsioTimer(boost::asio::io_context& io) : timer_(io) {}

  void arm(std::chrono::milliseconds delay, std::function<void()> fire) override {
    // expires_after cancels a wait already armed: its handler sees operation_aborted.
    timer_.expires_after(delay);
    timer_.async_wait([fire = std::move(fire)](const boost::system::error_code& error) {
      if (!error) fire();
    });
  }
  void cancel() override { timer_.cancel(); }

 private:
  boost::asio::steady_timer timer_;
};

}  // namespace

TimerPtr AsioTimeSource::make_timer() { return std::make_unique<AsioTimer>(io_); }

}  // namespace dlock::core
