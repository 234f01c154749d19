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
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dlock/lock_store.h"
#include "store/etcd/etcd_client.h"
#include "store/etcd/etcd_store.h"
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
    // One shared stream: these tests are about what one stream does (several: below).
    client_ = std::make_unique<etcd::EtcdClient>(etcd::make_channel(etcd_->endpoints()),
                                                 milliseconds(20000), 1);
  }

  // `count` leases of etcd's smallest TTL, granted by 16 threads; returns the one granted last
  // (the last to expire, so the last to be revoked) `past` after it expired.
  std::int64_t expired_unrevoked_lease(int count, milliseconds past = milliseconds(300)) {
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
    std::this_thread::sleep_until(last_granted + std::chrono::seconds(ttl) + past);
    return last;
  }

  // With the shared stream open, renews an expired, unrevoked lease, of which this client knows
  // `expired_until` (std::nullopt: nothing, a lease opened through another dlockd), and 100 ms
  // later a live lease known alive: the expired one must be answered 0, and the live one must
  // not wait for it (each goes the path EtcdClient::lease_keep_alive picks for what is known).
  void expect_live_lease_not_held_up(std::optional<Clock::time_point> expired_until) {
    const std::int64_t live = client_->lease_grant(60).id();
    client_->lease_keep_alive(live, Clock::now() + std::chrono::seconds(50));  // opens the stream
    const std::int64_t expired = expired_unrevoked_lease(4000);
    Clock::time_point expired_at;
    std::int64_t expired_ttl = -1;
    auto first = std::async(std::launch::async, [&] {
      expired_ttl = client_->lease_keep_alive(expired, expired_until);
      expired_at = Clock::now();
    });
    // The stream shows no order of its requests: a pause puts the first one first.
    std::this_thread::sleep_for(milliseconds(100));
    const std::int64_t live_ttl =
        client_->lease_keep_alive(live, Clock::now() + std::chrono::seconds(50));
    const auto live_at = Clock::now();
    first.get();
    EXPECT_EQ(expired_ttl, 0) << "the expired lease was renewed";
    EXPECT_GT(live_ttl, 0);
    EXPECT_LT(live_at, expired_at)
        << "the live lease's keep-alive waited for the expired lease's revoke ("
        << std::chrono::duration_cast<milliseconds>(live_at - expired_at).count()
        << " ms after it)";
  }

  static inline testing::EtcdCluster* etcd_ = nullptr;
  std::unique_ptr<etcd::EtcdClient> client_;
};

// What etcd does, and why the client must care: on one stream, the live lease's keep-alive waits
// for the expired lease's revoke.
TEST_F(EtcdKeepAliveTest, AnExpiredLeaseHoldsUpItsStreamUntilRevoked) {
  const std::int64_t live = client_->lease_grant(60).id();
  const std::int64_t expired = expired_unrevoked_lease(4000);
  auto& stream = client_->keep_alive_stream(0);
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  const auto sent_at = Clock::now();
  auto first = stream.start(expired, deadline);
  // The stream shows no order of its requests: a pause puts the first one first.
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
  // Known to this client as granted long ago, for less than it has been since.
  expect_live_lease_not_held_up(Clock::now() - milliseconds(300));
}

// A lease this client knows nothing of (opened through another dlockd) goes on a stream of its
// own too: it may be the expired one, and then it does not hold up the shared stream either.
TEST_F(EtcdKeepAliveTest, ALeaseOfUnknownLifeIsRenewedOnAStreamOfItsOwn) {
  expect_live_lease_not_held_up(std::nullopt);
  // And a live lease of unknown life is renewed, a revoked one is not.
  const std::int64_t other = client_->lease_grant(60).id();
  EXPECT_GT(client_->lease_keep_alive(other, std::nullopt), 0);
  client_->lease_revoke(other);
  EXPECT_EQ(client_->lease_keep_alive(other, std::nullopt), 0) << "a revoked lease was renewed";
}

// A lease a second or more past its expiry is answered gone at once: asked how long it has
// left, etcd says so without waiting for the revoke, where a keep-alive would wait for it.
TEST_F(EtcdKeepAliveTest, ALeaseLongExpiredIsAnsweredGoneWithoutWaitingForItsRevoke) {
  const std::int64_t expired = expired_unrevoked_lease(10000, milliseconds(1300));
  const auto sent_at = Clock::now();
  EXPECT_EQ(client_->lease_keep_alive(expired, Clock::now() - std::chrono::seconds(2)), 0)
      << "the expired lease was renewed";
  const auto answered_in = std::chrono::duration_cast<milliseconds>(Clock::now() - sent_at);
  // The premise: etcd had not revoked it yet, so a keep-alive still waits for the revoke.
  auto& stream = client_->keep_alive_stream(0);
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  const auto raw_sent_at = Clock::now();
  auto raw = stream.start(expired, deadline);
  EXPECT_EQ(stream.finish(raw, deadline), 0);
  const auto raw_waited = std::chrono::duration_cast<milliseconds>(Clock::now() - raw_sent_at);
  EXPECT_GT(raw_waited, milliseconds(300))
      << "the lease was revoked before the check: no backlog of revokes";
  EXPECT_LT(answered_in, milliseconds(300))
      << "the answer waited " << answered_in.count() << " ms (a keep-alive waited "
      << raw_waited.count() << " ms)";
}

// --- start_async (docs/adr/0024): the answer comes to a callback, exactly once ---------------

// What start_async's callbacks saw, for one test.
struct AsyncAnswers {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::int64_t> ttls;          // answered
  std::vector<grpc::StatusCode> failures;  // failed
  etcd::KeepAliveStream::Done callback() {
    return [this](std::int64_t ttl, const grpc::Status* failed) {
      std::lock_guard lock(mutex);
      if (failed) {
        failures.push_back(failed->error_code());
      } else {
        ttls.push_back(ttl);
      }
      changed.notify_all();
    };
  }
  std::size_t count() {
    std::lock_guard lock(mutex);
    return ttls.size() + failures.size();
  }
  bool wait_for(std::size_t n, milliseconds timeout) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, timeout, [&] { return ttls.size() + failures.size() >= n; });
  }
};

// The client's leases spread over several shared streams (docs/adr/0029): a lease always on the
// same one, leases on more than one, and every lease's keep-alive, blocking or asynchronous,
// answered with its own renewal on its own stream.
TEST_F(EtcdKeepAliveTest, LeasesSpreadOverSeveralStreamsEachRenewedOnItsOwn) {
  AsyncAnswers answers;  // outlives the client, whose streams call it
  etcd::EtcdClient spread(etcd::make_channel(etcd_->endpoints()), milliseconds(20000), 4);
  std::vector<std::int64_t> leases;
  std::set<const etcd::KeepAliveStream*> streams;
  for (int n = 0; n < 16; ++n) {
    leases.push_back(spread.lease_grant(60).id());
    streams.insert(&spread.keep_alive_stream(leases.back()));
    EXPECT_EQ(&spread.keep_alive_stream(leases.back()), &spread.keep_alive_stream(leases.back()));
  }
  EXPECT_GT(streams.size(), 1U);
  const std::int64_t gone = spread.lease_grant(60).id();
  spread.lease_revoke(gone);
  for (const auto lease : leases) {
    EXPECT_GT(spread.keep_alive_stream(lease).renew(lease, Clock::now() + milliseconds(5000)), 0);
  }
  EXPECT_EQ(spread.lease_keep_alive(gone, std::nullopt), 0);
  for (const auto lease : leases) {
    auto done = answers.callback();
    ASSERT_TRUE(spread.keep_alive_stream(lease).start_async(
        lease, Clock::now() + milliseconds(5000), done));
  }
  ASSERT_TRUE(answers.wait_for(leases.size(), milliseconds(10000)));
  EXPECT_TRUE(answers.failures.empty());
  for (const auto ttl : answers.ttls) EXPECT_GT(ttl, 0);
}

// etcd mints lease IDs from one counter with its proposals: consecutive grants are 2 apart
// (grants alone) or 3 apart (a grant and a put each), as seen on etcd 3.4.23. Each such run of
// IDs must reach every stream, about evenly: `id % streams` leaves half of them idle at stride 2.
TEST(EtcdKeepAliveStreams, LeaseIdsOfEveryStrideEtcdMintsReachEveryStreamEvenly) {
  constexpr std::size_t kStreams = etcd::EtcdClient::kKeepAliveStreams;
  constexpr std::int64_t kFirst = 0x694da23f15692005;  // a lease ID etcd granted
  constexpr int kPerStream = 200;
  for (const std::int64_t stride : {1, 2, 3, 4, 8}) {
    std::vector<int> used(kStreams, 0);
    for (std::int64_t n = 0; n < static_cast<std::int64_t>(kStreams) * kPerStream; ++n) {
      ++used.at(etcd::EtcdClient::stream_index(kFirst + n * stride, kStreams));
    }
    const auto [least, most] = std::minmax_element(used.begin(), used.end());
    EXPECT_GT(*least, kPerStream / 2) << "stride " << stride;
    EXPECT_LT(*most, kPerStream * 3 / 2) << "stride " << stride;
  }
}

TEST_F(EtcdKeepAliveTest, StartAsyncWithoutAnOpenStreamLeavesItsCallbackToTheCaller) {
  AsyncAnswers answers;
  auto done = answers.callback();
  const std::int64_t lease = client_->lease_grant(60).id();
  EXPECT_FALSE(
      client_->keep_alive_stream(0).start_async(lease, Clock::now() + milliseconds(2000), done));
  ASSERT_TRUE(done) << "a refused start_async took the callback";
  done(7, nullptr);
  EXPECT_EQ(answers.ttls, std::vector<std::int64_t>{7});
}

TEST_F(EtcdKeepAliveTest, StartAsyncAnswersEachCallerOnceWithItsLeasesRenewal) {
  const std::int64_t live = client_->lease_grant(60).id();
  const std::int64_t gone = client_->lease_grant(60).id();
  client_->lease_revoke(gone);
  client_->keep_alive_stream(0).renew(live, Clock::now() + milliseconds(2000));  // opens it
  AsyncAnswers answers;
  constexpr int kEach = 50;
  for (int n = 0; n < kEach; ++n) {
    for (const std::int64_t lease : {live, gone}) {
      auto done = answers.callback();
      ASSERT_TRUE(client_->keep_alive_stream(0).start_async(
          lease, Clock::now() + milliseconds(5000), done));
      EXPECT_FALSE(done) << "an accepted start_async left its callback with the caller";
    }
  }
  ASSERT_TRUE(answers.wait_for(2 * kEach, milliseconds(10000)));
  std::this_thread::sleep_for(milliseconds(200));  // no second answer to anyone
  std::lock_guard lock(answers.mutex);
  EXPECT_TRUE(answers.failures.empty());
  ASSERT_EQ(answers.ttls.size(), 2u * kEach);
  EXPECT_EQ(std::count(answers.ttls.begin(), answers.ttls.end(), 0), kEach)
      << "the revoked lease's keep-alives are the ones answered 0";
}

// A keep-alive etcd does not answer in time fails at its deadline (and breaks the stream, as a
// synchronous one does); its late answer is not delivered a second time.
TEST_F(EtcdKeepAliveTest, StartAsyncFailsOnceAtItsDeadline) {
  const std::int64_t live = client_->lease_grant(60).id();
  client_->keep_alive_stream(0).renew(live, Clock::now() + milliseconds(2000));  // opens it
  const std::int64_t expired = expired_unrevoked_lease(4000);
  AsyncAnswers answers;
  auto done = answers.callback();
  const auto started = Clock::now();
  ASSERT_TRUE(
      client_->keep_alive_stream(0).start_async(expired, started + milliseconds(200), done));
  ASSERT_TRUE(answers.wait_for(1, milliseconds(10000)));
  const auto failed_after = Clock::now() - started;
  EXPECT_LT(failed_after, milliseconds(3000)) << "not failed at its deadline";
  std::this_thread::sleep_for(milliseconds(5000));  // past the revoke backlog
  std::lock_guard lock(answers.mutex);
  EXPECT_EQ(answers.failures, std::vector<grpc::StatusCode>{grpc::StatusCode::DEADLINE_EXCEEDED});
  EXPECT_TRUE(answers.ttls.empty()) << "answered after it had failed";
  // The next renewal opens a new stream.
  EXPECT_GT(client_->keep_alive_stream(0).renew(live, Clock::now() + milliseconds(5000)), 0);
}

// --- the store's try_heartbeat_async (Sessions) ---------------------------------------------

struct HeartbeatResult {
  std::mutex mutex;
  std::condition_variable changed;
  int calls = 0;
  std::optional<SessionInfo> session;
  std::exception_ptr error;
  SessionRegistry::HeartbeatDone callback() {
    return [this](std::optional<SessionInfo> s, std::exception_ptr e) {
      std::lock_guard lock(mutex);
      ++calls;
      session = std::move(s);
      error = e;
      changed.notify_all();
    };
  }
  bool wait() {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, std::chrono::seconds(10), [&] { return calls > 0; });
  }
};

BackendPtr etcd_store(const std::string& endpoints) {
  return store::etcd::make_etcd_store({endpoints, milliseconds(2000), TtlLimits{}, {}});
}

TEST_F(EtcdKeepAliveTest, AsyncHeartbeatAnswersAsHeartbeatDoes) {
  const auto store = etcd_store(etcd_->endpoints());
  const auto opened = store->open_session("alice", std::chrono::seconds(30), milliseconds(250));
  store->heartbeat(opened.session_id);  // the shared stream is open
  HeartbeatResult result;
  auto done = result.callback();
  const auto before = std::chrono::system_clock::now();
  ASSERT_TRUE(store->try_heartbeat_async(opened.session_id, done));
  ASSERT_TRUE(result.wait());
  const auto after = std::chrono::system_clock::now();
  // A window in which a second, wrong answer would arrive.
  std::this_thread::sleep_for(milliseconds(100));
  std::lock_guard lock(result.mutex);
  EXPECT_EQ(result.calls, 1);
  ASSERT_FALSE(result.error);
  ASSERT_TRUE(result.session.has_value());
  EXPECT_EQ(result.session->session_id, opened.session_id);
  EXPECT_EQ(result.session->owner_id, "alice");
  EXPECT_EQ(result.session->ttl, std::chrono::seconds(30));
  EXPECT_EQ(result.session->lock_delay, milliseconds(250));
  EXPECT_GE(result.session->expires_at, before + std::chrono::seconds(29));
  EXPECT_LE(result.session->expires_at, after + std::chrono::seconds(30));
}

// The cache and the lease book of this store still say "alive"; etcd says the lease is gone.
// The session must be reported not found -- never renewed -- and forgotten.
TEST_F(EtcdKeepAliveTest, AsyncHeartbeatOfASessionClosedElsewhereIsNotFound) {
  const auto here = etcd_store(etcd_->endpoints());
  const auto elsewhere = etcd_store(etcd_->endpoints());
  const auto opened = here->open_session("alice", std::chrono::seconds(30));
  here->heartbeat(opened.session_id);
  elsewhere->close_session(opened.session_id);
  HeartbeatResult result;
  auto done = result.callback();
  ASSERT_TRUE(here->try_heartbeat_async(opened.session_id, done));
  ASSERT_TRUE(result.wait());
  {
    std::lock_guard lock(result.mutex);
    EXPECT_FALSE(result.session.has_value()) << "a closed session was renewed";
    ASSERT_TRUE(result.error);
    EXPECT_THROW(std::rethrow_exception(result.error), SessionNotFoundError);
  }
  auto again = HeartbeatResult{}.callback();
  EXPECT_FALSE(here->try_heartbeat_async(opened.session_id, again)) << "still cached";
  EXPECT_THROW(here->heartbeat(opened.session_id), SessionNotFoundError);
}

// What it cannot do without a read or a stream of its own is heartbeat's: it declines and
// leaves the callback with the caller.
TEST_F(EtcdKeepAliveTest, AsyncHeartbeatDeclinesWhatNeedsMoreThanTheSharedStream) {
  const auto here = etcd_store(etcd_->endpoints());
  const auto elsewhere = etcd_store(etcd_->endpoints());
  const auto mine = here->open_session("alice", std::chrono::seconds(30));
  here->heartbeat(mine.session_id);
  const auto theirs = elsewhere->open_session("bob", std::chrono::seconds(30));
  for (const std::string& id :
       {theirs.session_id, std::string("not-a-session"), std::string(32, 'a')}) {
    HeartbeatResult result;
    auto done = result.callback();
    EXPECT_FALSE(here->try_heartbeat_async(id, done)) << id;
    EXPECT_TRUE(done) << id << ": a declined call took the callback";
  }
  // heartbeat does it, and from then on the lease is known here.
  EXPECT_EQ(here->heartbeat(theirs.session_id).owner_id, "bob");
  HeartbeatResult result;
  auto done = result.callback();
  EXPECT_TRUE(here->try_heartbeat_async(theirs.session_id, done));
  ASSERT_TRUE(result.wait());
}

// A stream that breaks fails every asynchronous caller waiting on it; last, as it kills etcd.
TEST_F(EtcdKeepAliveTest, ZStreamThatBreaksFailsItsAsynchronousCallers) {
  const std::int64_t expired = expired_unrevoked_lease(4000);
  const std::int64_t live = client_->lease_grant(60).id();
  client_->keep_alive_stream(0).renew(live, Clock::now() + milliseconds(2000));  // opens it
  AsyncAnswers answers;
  for (int n = 0; n < 3; ++n) {  // held behind the expired lease's revoke
    auto done = answers.callback();
    ASSERT_TRUE(client_->keep_alive_stream(0).start_async(
        n == 0 ? expired : live, Clock::now() + milliseconds(60000), done));
  }
  etcd_->kill(0);
  ASSERT_TRUE(answers.wait_for(3, milliseconds(10000))) << "callers left waiting on a dead stream";
  // A window in which a second, wrong answer would arrive.
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(answers.count(), 3u) << "a caller was answered twice";
  std::lock_guard lock(answers.mutex);
  EXPECT_TRUE(answers.ttls.empty()) << "answered before the kill: the expired lease held none";
  EXPECT_EQ(answers.failures.size(), 3u);
}

}  // namespace
}  // namespace dlock
