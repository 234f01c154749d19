// The etcd store's keep-alives (store/etcd/etcd_keep_alive.h, docs/adr/0025): etcd answers the
// keep-alive of a lease that has expired but is not revoked yet only once its revoke is applied,
// and answers the requests of one stream in order, so one such renewal on the shared stream
// holds up every other lease's keep-alive behind it (seen at 100 000 sessions: every session of
// the dlockd was lost). EtcdClient::lease_keep_alive sends a lease not known to be alive on a
// stream of its own. Revokes are rate-limited in etcd (1000 a second), so a few thousand leases
// that expire together leave the last of them expired and unrevoked for seconds: that is how
// these tests get an expired, unrevoked lease.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "store/etcd/etcd_client.h"
#include "support/etcd_server.h"

namespace dlock {
namespace {

namespace etcd = store::etcd;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class EtcdKeepAliveTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { etcd_ = new testing::EtcdCluster(1); }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
  }

  void SetUp() override {
    client_ = std::make_unique<etcd::EtcdClient>(etcd::make_channel(etcd_->endpoints()),
                                                 milliseconds(20000));
  }

  // `count` leases of etcd's smallest TTL, granted by 16 threads; returns the one granted last
  // (the last to expire, so the last to be revoked) once every lease has expired.
  std::int64_t expired_unrevoked_lease(int count) {
    std::atomic<int> next{0};
    std::mutex mutex;
    std::int64_t last = 0;
    Clock::time_point last_granted;
    std::int64_t ttl = 0;
    std::vector<std::thread> threads;
    for (int t = 0; t < 16; ++t) {
      threads.emplace_back([&] {
        while (next++ < count) {
          const auto granted = client_->lease_grant(1);
          std::lock_guard lock(mutex);
          last = granted.id();
          last_granted = Clock::now();
          ttl = granted.ttl();
        }
      });
    }
    for (auto& thread : threads) thread.join();
    std::this_thread::sleep_until(last_granted + std::chrono::seconds(ttl) + milliseconds(300));
    return last;
  }

  // When each of the two renewals answered: `expired` sent first, `live` 100 ms later, each on
  // the path EtcdClient::lease_keep_alive picks for what is known of it.
  struct Answers {
    Clock::time_point expired_at, live_at;
    std::int64_t expired_ttl = -1, live_ttl = -1;
  };
  Answers renew_both(std::int64_t expired, std::int64_t live) {
    const auto live_until = Clock::now() + std::chrono::seconds(50);
    Answers answers;
    auto first = std::async(std::launch::async, [&] {
      // Known to this client as granted long ago, for less than it has been since.
      answers.expired_ttl = client_->lease_keep_alive(expired, Clock::now() - milliseconds(300));
      answers.expired_at = Clock::now();
    });
    std::this_thread::sleep_for(milliseconds(100));
    answers.live_ttl = client_->lease_keep_alive(live, live_until);
    answers.live_at = Clock::now();
    first.get();
    return answers;
  }

  static inline testing::EtcdCluster* etcd_ = nullptr;
  std::unique_ptr<etcd::EtcdClient> client_;
};

// What etcd does, and why the client must care: on one stream, the live lease's keep-alive waits
// for the expired lease's revoke.
TEST_F(EtcdKeepAliveTest, AnExpiredLeaseHoldsUpItsStreamUntilRevoked) {
  const std::int64_t live = client_->lease_grant(60).id();
  const std::int64_t expired = expired_unrevoked_lease(4000);
  auto& stream = client_->keep_alive_stream();
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  const auto sent_at = Clock::now();
  auto first = stream.start(expired, deadline);
  std::this_thread::sleep_for(milliseconds(100));
  auto second = stream.start(live, deadline);
  EXPECT_EQ(stream.finish(first, deadline), 0) << "the expired lease was renewed";
  const auto expired_at = Clock::now();
  // The premise of both tests: the expired lease's answer waited for its revoke.
  EXPECT_GT(expired_at - sent_at, milliseconds(300))
      << "the expired lease was revoked before its keep-alive came: no backlog of revokes";
  EXPECT_GT(stream.finish(second, deadline), 0);
  const auto waited = std::chrono::duration_cast<milliseconds>(Clock::now() - expired_at);
  // Both answers came together: the live lease's answer came right after the revoke's.
  EXPECT_LT(waited, milliseconds(50))
      << "the live lease's answer came " << waited.count() << " ms after the expired one's";
}

// The client's rule: a lease not known to be alive is renewed on a stream of its own, so the
// live lease (known alive, on the shared stream) is answered while the expired one still waits.
TEST_F(EtcdKeepAliveTest, ALeaseThatMayHaveExpiredDoesNotHoldUpTheSharedStream) {
  const std::int64_t live = client_->lease_grant(60).id();
  client_->lease_keep_alive(live, Clock::now() + std::chrono::seconds(50));  // the stream is open
  const std::int64_t expired = expired_unrevoked_lease(4000);
  const Answers answers = renew_both(expired, live);
  EXPECT_EQ(answers.expired_ttl, 0) << "the expired lease was renewed";
  EXPECT_GT(answers.live_ttl, 0);
  EXPECT_LT(answers.live_at, answers.expired_at)
      << "the live lease's keep-alive waited for the expired lease's revoke ("
      << std::chrono::duration_cast<milliseconds>(answers.live_at - answers.expired_at).count()
      << " ms after it)";
}

// A lease this client knows nothing of (opened through another dlockd) goes on a stream of its
// own too: it may be the expired one.
TEST_F(EtcdKeepAliveTest, ALeaseOfUnknownLifeIsRenewedOnAStreamOfItsOwn) {
  const std::int64_t lease = client_->lease_grant(60).id();
  EXPECT_GT(client_->lease_keep_alive(lease, std::nullopt), 0);
  client_->lease_revoke(lease);
  EXPECT_EQ(client_->lease_keep_alive(lease, std::nullopt), 0) << "a revoked lease was renewed";
}

}  // namespace
}  // namespace dlock
