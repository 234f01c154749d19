// End to end through real dlockd processes, on every backend: two servers on one database,
// shutdown, kill -9 and a backend taken away under a running server (C3, ADR-0007).

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>

#include <boost/json.hpp>
#include <string>
#include <thread>

#include "integration/server_e2e_fixture.h"

namespace dlock::e2e {
namespace {

TEST_P(ServerEndToEnd, TwoServersOnOneDatabaseHandOverToEachOthersWaiters) {
  if (GetParam() == "sqlite") {
    GTEST_SKIP() << "the embedded store is served by one dlockd";
  }
  DlockdProcess other(options());
  const auto alice = open_session("alice");
  const auto bob = open_session("bob", 60000, &other);
  const auto key = fresh_key();
  const auto held = acquire(key, alice);
  ASSERT_EQ(held.status, 200);
  HttpResult waited;
  std::thread waiter([&] { waited = acquire(key, bob, 30000, 20000, &other); });
  ASSERT_TRUE(wait_for_waiters(1, &other));
  ASSERT_EQ(release(key, alice, token_of(held)).status, 204);
  waiter.join();
  ASSERT_EQ(waited.status, 200) << waited.body;
  EXPECT_GT(token_of(waited), token_of(held));
}

TEST_P(ServerEndToEnd, ShutdownAnswersWaitersWith503AndExitsCleanly) {
  const auto alice = open_session("alice");
  const auto bob = open_session("bob");
  const auto key = fresh_key();
  ASSERT_EQ(acquire(key, alice).status, 200);
  HttpResult waited;
  std::thread waiter([&] { waited = acquire(key, bob, 30000, 20000); });
  ASSERT_TRUE(wait_for_waiters(1));
  server_->process().signal(SIGTERM);
  waiter.join();
  EXPECT_EQ(waited.status, 503) << waited.body;
  EXPECT_EQ(waited.error_code(), "unavailable");
  EXPECT_EQ(waited.headers.count("retry-after"), 1u);
  EXPECT_EQ(server_->process().wait(seconds(15)), 0);
}

TEST_P(ServerEndToEnd, KillNineLosesNoAcknowledgedGrant) {
  const auto sid = open_session("alice");
  const auto key = fresh_key();
  const auto granted = acquire(key, sid, 60000);
  ASSERT_EQ(granted.status, 200);
  server_->process().kill_now();
  DlockdProcess restarted(server_->options());
  const auto read = call("GET", "/v1/locks/" + key, "", {}, &restarted);
  ASSERT_EQ(read.status, 200) << read.body;
  EXPECT_EQ(token_of(read), token_of(granted));
  const auto again = acquire(key, sid, 30000, 0, &restarted);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_GT(token_of(again), token_of(granted));
}

// Takes the backend away under a running dlockd: a locked database file, a crashed
// PostgreSQL, a killed etcd member. Undone on destruction.
class BackendOutage {
 public:
  BackendOutage(const std::string& backend, const DlockdOptions& options) : backend_(backend) {
    if (backend_ == "sqlite") {
      sqlite3_open(options.sqlite_path.c_str(), &blocker_);
      EXPECT_EQ(sqlite3_exec(blocker_, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
#ifdef DLOCK_WITH_PG
    } else if (backend_ == "pg") {
      testing::shared_postgres().crash();
#endif
#ifdef DLOCK_WITH_ETCD
    } else if (backend_ == "etcd") {
      testing::shared_etcd().kill(0);
#endif
    }
  }
  BackendOutage(const BackendOutage&) = delete;
  BackendOutage& operator=(const BackendOutage&) = delete;
  ~BackendOutage() {
    if (blocker_ != nullptr) {
      sqlite3_exec(blocker_, "ROLLBACK", nullptr, nullptr, nullptr);
      sqlite3_close(blocker_);
#ifdef DLOCK_WITH_PG
    } else if (backend_ == "pg") {
      testing::shared_postgres().start();
#endif
#ifdef DLOCK_WITH_ETCD
    } else if (backend_ == "etcd") {
      testing::shared_etcd().start(0);
#endif
    }
  }

 private:
  std::string backend_;
  sqlite3* blocker_ = nullptr;
};

TEST_P(ServerEndToEnd, BackendOutageIs503NeverHeld) {
  DlockdProcess server(options({"--backend-timeout", "1s"}));
  const auto alice = open_session("alice", 60000, &server);
  const auto bob = open_session("bob", 60000, &server);
  const auto key = fresh_key();
  ASSERT_EQ(acquire(key, alice, 60000, 0, &server).status, 200);
  {
    BackendOutage outage(GetParam(), server.options());
    // A held key and a free key alike: the answer is "unavailable", never "held".
    for (const auto& target : {key, fresh_key()}) {
      const auto result = acquire(target, bob, 30000, 0, &server);
      EXPECT_EQ(result.status, 503) << target << ": " << result.body;
      EXPECT_TRUE(result.error_code() == "unavailable" || result.error_code() == "not_leader")
          << result.body;
      EXPECT_EQ(result.headers.count("retry-after"), 1u);
    }
  }
  // dlockd recovers by itself once the backend is back.
  const auto free_key = fresh_key();
  EXPECT_TRUE(
      testing::wait_for([&] { return acquire(free_key, bob, 30000, 0, &server).status == 200; },
                        seconds(60), milliseconds(200)));
}

}  // namespace
}  // namespace dlock::e2e
