// Session and Lock against a fake dlockd: background keepalive and extend, loss reporting,
// RAII release and close.

#include <gtest/gtest.h>

#include <algorithm>

#include "dlock/client.h"
#include "fake_lock_api.h"
#include "wait_until.h"

namespace dlock::client {
namespace {

using std::chrono::milliseconds;
using testing::FakeLockApi;
using testing::FakeRequest;
using testing::FakeServer;
using testing::wait_until;

class SessionLockTest : public ::testing::Test {
 protected:
  SessionLockTest() : server_([this](const FakeRequest& request) { return api_.handle(request); }) {
    ClientOptions options;
    options.server_url = server_.url();
    options.retry_budget = milliseconds(300);
    options.backoff_initial = milliseconds(5);
    options.backoff_max = milliseconds(20);
    options.log = [this](std::string_view message) {
      std::lock_guard lock(log_mutex_);
      log_.emplace_back(message);
    };
    client_ = std::make_unique<Client>(options);
  }

  static auto matching(const std::string& method, const std::string& part) {
    return [method, part](const FakeRequest& request) {
      return request.method == method && request.target.find(part) != std::string::npos;
    };
  }

  FakeLockApi api_;
  FakeServer server_;
  std::mutex log_mutex_;
  std::vector<std::string> log_;
  std::unique_ptr<Client> client_;
};

TEST_F(SessionLockTest, SessionKeepsItselfAliveAndClosesOnDestruction) {
  {
    Session session(*client_, {"tester", milliseconds(1000), {}});
    EXPECT_EQ(session.id(), "s-1");
    EXPECT_EQ(session.ttl(), milliseconds(1000));
    EXPECT_TRUE(server_.wait_for_requests(matching("POST", "/keepalive"), 2, milliseconds(3000)));
    EXPECT_FALSE(session.lost());
  }
  EXPECT_TRUE(
      server_.wait_for_requests(matching("DELETE", "/v1/sessions/s-1"), 1, milliseconds(0)));
}

TEST_F(SessionLockTest, SessionNotFoundOnKeepaliveIsReportedOnce) {
  std::atomic<int> reports{0};
  Session session(*client_, {"tester", milliseconds(1000), [&](const std::string& reason) {
                               EXPECT_NE(reason.find("expired"), std::string::npos);
                               ++reports;
                             }});
  api_.session_gone = true;
  EXPECT_TRUE(wait_until([&] { return session.lost(); }, milliseconds(3000)));
  EXPECT_EQ(reports.load(), 1);
}

TEST_F(SessionLockTest, SessionIsLostWhenNoKeepaliveSucceedsWithinItsTtl) {
  Session session(*client_, {"tester", milliseconds(1000), {}});
  api_.keepalive_unavailable = true;
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(wait_until([&] { return session.lost(); }, milliseconds(4000)));
  // Not before the TTL counted from the last successful exchange could have run out.
  EXPECT_GE(std::chrono::steady_clock::now() - started, milliseconds(300));
  EXPECT_NE(session.lost_reason().find("within the session TTL"), std::string::npos);
}

TEST_F(SessionLockTest, LockIsReleasedOnDestruction) {
  Session session(*client_, {"tester", milliseconds(1000), {}});
  {
    auto lock = session.acquire("jobs/a b", {milliseconds(5000), milliseconds(0), "", false, {}});
    ASSERT_TRUE(lock.has_value());
    EXPECT_EQ(lock->token(), 42U);
    EXPECT_EQ(lock->key(), "jobs/a b");
    EXPECT_TRUE(lock->still_valid());
    EXPECT_LE(lock->client_deadline(), SteadyClock::now() + milliseconds(1000));
  }
  const auto requests = server_.requests();
  EXPECT_EQ(requests.back().method, "DELETE");
  EXPECT_EQ(requests.back().target, "/v1/locks/jobs%2Fa%20b?session_id=s-1&fencing_token=42");
}

TEST_F(SessionLockTest, StillValidEndsAtTheClientDeadlineWithoutExtend) {
  Session session(*client_, {"tester", milliseconds(1000), {}});
  auto lock = session.acquire("k", {});
  ASSERT_TRUE(lock);
  const auto deadline = lock->client_deadline();
  ASSERT_TRUE(wait_until([&] { return !lock->still_valid(); }, milliseconds(3000)));
  EXPECT_GE(SteadyClock::now(), deadline);
}

// A session-bound lock (ADR-0018) asks for no TTL, is never extended, and stays valid for as
// long as the session's keepalives keep the session.
TEST_F(SessionLockTest, SessionBoundLockLivesByTheSessionsKeepalives) {
  Session session(*client_, {"tester", milliseconds(1000), {}});
  api_.session_bound = true;
  AcquireOptions options;
  options.session_bound = true;
  options.auto_extend = true;  // ignored: there is no TTL of the lock's own to renew
  auto lock = session.acquire("k", options);
  ASSERT_TRUE(lock);
  const auto requests = server_.requests();
  const auto acquire = std::find_if(requests.begin(), requests.end(), [](const auto& request) {
    return request.target.ends_with("/acquire");
  });
  ASSERT_NE(acquire, requests.end());
  EXPECT_NE(acquire->body.find(R"("lease":"session")"), std::string::npos) << acquire->body;
  EXPECT_EQ(acquire->body.find("ttl_ms"), std::string::npos) << acquire->body;
  // Well past the lock's first answered TTL (1 s): still valid, the keepalives moved it.
  ASSERT_TRUE(server_.wait_for_requests(matching("POST", "/keepalive"), 4, milliseconds(3000)));
  EXPECT_TRUE(lock->still_valid());
  const auto all = server_.requests();
  EXPECT_EQ(std::count_if(all.begin(), all.end(), matching("POST", "/extend")), 0);
  api_.session_gone = true;
  ASSERT_TRUE(wait_until([&] { return !lock->still_valid(); }, milliseconds(3000)));
  AcquireOptions with_ttl;
  with_ttl.ttl = milliseconds(5000);
  with_ttl.session_bound = true;
  EXPECT_THROW(session.acquire("k", with_ttl), InvalidArgumentError);
}

TEST_F(SessionLockTest, AutoExtendKeepsTheLockAndReportsItsLoss) {
  Session session(*client_, {"tester", milliseconds(1000), {}});
  std::atomic<int> reports{0};
  AcquireOptions options;
  options.auto_extend = true;
  options.on_lost = [&](const std::string&) { ++reports; };
  auto lock = session.acquire("k", options);
  ASSERT_TRUE(lock);
  const auto first_deadline = lock->client_deadline();
  ASSERT_TRUE(server_.wait_for_requests(matching("POST", "/extend"), 2, milliseconds(3000)));
  EXPECT_GT(lock->client_deadline(), first_deadline);
  EXPECT_TRUE(lock->still_valid());

  api_.lock_lost = true;
  ASSERT_TRUE(wait_until([&] { return reports.load() == 1; }, milliseconds(3000)));
  EXPECT_FALSE(lock->still_valid());
  EXPECT_NE(lock->lost_reason().find("lock lost"), std::string::npos);
  EXPECT_THROW(lock->release(), LockLostError);
}

TEST_F(SessionLockTest, ExplicitReleaseReportsALostGrant) {
  Session session(*client_, {"tester", milliseconds(1000), {}});
  auto lock = session.acquire("k", {});
  ASSERT_TRUE(lock);
  api_.lock_lost = true;
  EXPECT_THROW(lock->release(), LockLostError);
  lock.reset();  // inert after release: no second DELETE
  EXPECT_EQ(server_.requests().back().method, "DELETE");
  std::size_t deletes = 0;
  for (const auto& request : server_.requests()) {
    deletes += request.method == "DELETE" && request.target.rfind("/v1/locks/", 0) == 0;
  }
  EXPECT_EQ(deletes, 1U);
}

TEST_F(SessionLockTest, HeldIsAnEmptyOptionalAndAnOutageIsAnError) {
  Session session(*client_, {"tester", milliseconds(1000), {}});
  api_.held = true;
  EXPECT_FALSE(session.acquire("k", {}).has_value());
  api_.acquire_unavailable = true;
  EXPECT_THROW(session.acquire("k", {}), UnavailableError);
}

TEST_F(SessionLockTest, MovedLocksKeepExtending) {
  Session session(*client_, {"tester", milliseconds(1000), {}});
  AcquireOptions options;
  options.auto_extend = true;
  auto lock = session.acquire("k", options);
  ASSERT_TRUE(lock);
  Lock moved = std::move(*lock);
  lock.reset();
  ASSERT_TRUE(server_.wait_for_requests(matching("POST", "/extend"), 2, milliseconds(3000)));
  EXPECT_TRUE(moved.still_valid());
}

// Lock-delay (C2 "Lock-delay"): sent as "lock_delay_ms" only when set, so an older dlockd sees
// the request it always saw; the answered one is kept (absent: 0); negative is refused here.
TEST_F(SessionLockTest, LockDelayIsSentOnlyWhenSetAndTheAnsweredOneIsKept) {
  const auto session_bodies = [this] {
    std::vector<std::string> bodies;
    for (const FakeRequest& request : server_.requests()) {
      if (request.method == "POST" && request.target == "/v1/sessions") {
        bodies.push_back(request.body);
      }
    }
    return bodies;
  };
  {
    Session plain(*client_, {"tester", milliseconds(1000), {}});
    EXPECT_EQ(plain.lock_delay(), milliseconds(0));
  }
  ASSERT_EQ(session_bodies().size(), 1U);
  EXPECT_EQ(session_bodies()[0].find("lock_delay"), std::string::npos) << session_bodies()[0];
  {
    Session delayed(*client_, {.owner = "tester", .lock_delay = milliseconds(1500)});
    EXPECT_EQ(delayed.lock_delay(), milliseconds(1500));
  }
  ASSERT_EQ(session_bodies().size(), 2U);
  EXPECT_NE(session_bodies()[1].find(R"("lock_delay_ms":1500)"), std::string::npos)
      << session_bodies()[1];
  const SessionInfo info = client_->open_session("tester", milliseconds(0), {}, milliseconds(2000));
  EXPECT_EQ(info.lock_delay, milliseconds(2000));
  EXPECT_NE(session_bodies().at(2).find(R"("lock_delay_ms":2000)"), std::string::npos);
  EXPECT_EQ(client_->open_session("tester", milliseconds(0)).lock_delay, milliseconds(0));
  try {
    client_->open_session("tester", milliseconds(0), {}, milliseconds(-1));
    ADD_FAILURE() << "a negative lock-delay was accepted";
  } catch (const InvalidArgumentError& error) {
    EXPECT_EQ(error.field(), "lock_delay_ms");
  }
  EXPECT_EQ(session_bodies().size(), 4U) << "the negative lock-delay was sent";
}

}  // namespace
}  // namespace dlock::client
