// The client's deadlines against a fake dlockd (docs/adr/0012): a lease is trusted from its
// request's send time for the smaller of the TTL asked for and the TTL answered, less the
// clock-rate allowance (ClientOptions::clock_drift, DLOCK_CLOCK_DRIFT, default 1 %).

#include <gtest/gtest.h>
#include <stdlib.h>

#include <optional>

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

class ClientDeadlineTest : public ::testing::Test {
 protected:
  ClientDeadlineTest()
      : server_([this](const FakeRequest& request) { return api_.handle(request); }) {
    ::unsetenv("DLOCK_CLOCK_DRIFT");
  }
  ~ClientDeadlineTest() override { ::unsetenv("DLOCK_CLOCK_DRIFT"); }

  std::unique_ptr<Client> client(std::optional<double> drift) {
    ClientOptions options;
    options.server_url = server_.url();
    options.retry_budget = milliseconds(300);
    options.backoff_initial = milliseconds(5);
    options.backoff_max = milliseconds(20);
    options.clock_drift = drift;
    options.log = [](std::string_view) {};
    return std::make_unique<Client>(options);
  }

  static auto matching(const std::string& part) {
    return [part](const FakeRequest& request) {
      return request.target.find(part) != std::string::npos;
    };
  }

  FakeLockApi api_;
  FakeServer server_;
};

// A server that answers more than was asked (an etcd grant whose lease is shorter than the
// answer) must not lengthen what the client believes.
TEST_F(ClientDeadlineTest, AcquireTrustsTheTtlAskedForNotALongerAnswer) {
  auto plain = client(0.0);
  Session session(*plain, {"tester", milliseconds(60000), {}});
  api_.lock_ttl_ms = 60000;
  auto lock = session.acquire("k", {milliseconds(1000), milliseconds(0), "", false, {}});
  ASSERT_TRUE(lock);
  EXPECT_LE(lock->client_deadline(), SteadyClock::now() + milliseconds(1000));
  EXPECT_TRUE(wait_until([&] { return !lock->still_valid(); }, milliseconds(3000)));

  const auto handle = plain->acquire("k", session.id(), milliseconds(1000), milliseconds(0));
  ASSERT_TRUE(handle);
  EXPECT_LE(handle->client_deadline, SteadyClock::now() + milliseconds(1000));
}

// A lock dies with its session (C2): a lock whose own TTL is longer than its session's is
// trusted only until the session's deadline. `dlock run` stops CMD a margin before this one.
TEST_F(ClientDeadlineTest, LockIsTrustedNoLongerThanItsSession) {
  auto plain = client(0.0);
  Session session(*plain, {"tester", milliseconds(1500), {}});
  api_.lock_ttl_ms = 60000;
  auto lock = session.acquire("k", {milliseconds(60000), milliseconds(0), "", false, {}});
  ASSERT_TRUE(lock);
  EXPECT_LE(lock->client_deadline(), SteadyClock::now() + milliseconds(1500));
}

TEST_F(ClientDeadlineTest, ExtendTrustsTheTtlAskedForNotALongerAnswer) {
  auto plain = client(0.0);
  Session session(*plain, {"tester", milliseconds(60000), {}});
  auto lock = session.acquire("k", {milliseconds(1000), milliseconds(0), "", false, {}});
  ASSERT_TRUE(lock);
  api_.lock_ttl_ms = 60000;
  lock->extend(milliseconds(1000));
  EXPECT_LE(lock->client_deadline(), SteadyClock::now() + milliseconds(1000));

  const auto result = plain->extend("k", session.id(), lock->token(), milliseconds(2000));
  EXPECT_EQ(result.ttl, milliseconds(2000));
  EXPECT_LE(result.client_deadline, SteadyClock::now() + milliseconds(2000));
}

TEST_F(ClientDeadlineTest, SessionTrustsTheTtlAskedForNotALongerAnswer) {
  auto plain = client(0.0);
  api_.session_ttl_ms = 60000;
  Session session(*plain, {"tester", milliseconds(1000), {}});
  EXPECT_EQ(session.ttl(), milliseconds(1000));
  EXPECT_EQ(plain->open_session("tester", milliseconds(1000)).ttl, milliseconds(1000));
  // Without a successful keepalive it is lost once the 1 s asked for ran out, not after 60 s.
  api_.keepalive_unavailable = true;
  EXPECT_TRUE(wait_until([&] { return session.lost(); }, milliseconds(4000)));
}

TEST_F(ClientDeadlineTest, KeepaliveAnsweringMoreDoesNotLengthenTheSession) {
  auto plain = client(0.0);
  Session session(*plain, {"tester", milliseconds(1000), {}});
  api_.session_ttl_ms = 60000;  // every keepalive from now on claims a minute
  ASSERT_TRUE(server_.wait_for_requests(matching("/keepalive"), 2, milliseconds(3000)));
  api_.keepalive_unavailable = true;
  EXPECT_TRUE(wait_until([&] { return session.lost(); }, milliseconds(4000)));
}

TEST_F(ClientDeadlineTest, DefaultAllowanceIsOnePercentOfTheTtl) {
  auto plain = client(std::nullopt);
  api_.session_ttl_ms = 60000;  // the session outlives the lock: its deadline is the lock's own
  Session session(*plain, {"tester", milliseconds(60000), {}});
  api_.lock_ttl_ms = 10000;
  const auto before = SteadyClock::now();
  auto lock = session.acquire("k", {milliseconds(10000), milliseconds(0), "", false, {}});
  const auto after = SteadyClock::now();
  ASSERT_TRUE(lock);
  EXPECT_GE(lock->client_deadline(), before + milliseconds(9900));
  EXPECT_LE(lock->client_deadline(), after + milliseconds(9900));

  const auto extend_before = SteadyClock::now();
  lock->extend(milliseconds(10000));
  EXPECT_GE(lock->client_deadline(), extend_before + milliseconds(9900));
  EXPECT_LE(lock->client_deadline(), SteadyClock::now() + milliseconds(9900));
}

TEST_F(ClientDeadlineTest, ConfiguredAllowanceShortensLocksAndSessions) {
  auto drifting = client(0.45);
  api_.lock_ttl_ms = 2000;
  api_.session_ttl_ms = 60000;  // the session outlives the lock: its deadline is the lock's own
  {
    Session session(*drifting, {"tester", milliseconds(60000), {}});
    const auto before = SteadyClock::now();
    auto lock = session.acquire("k", {milliseconds(2000), milliseconds(0), "", false, {}});
    ASSERT_TRUE(lock);
    EXPECT_GE(lock->client_deadline(), before + milliseconds(1100));
    EXPECT_LE(lock->client_deadline(), SteadyClock::now() + milliseconds(1100));
  }
  // A session of 2 s is trusted for 1.1 s: with every keepalive failing it is lost then, well
  // before the 2 s the server would keep it.
  api_.session_ttl_ms = 2000;
  api_.keepalive_unavailable = true;
  const auto opened = SteadyClock::now();
  Session session(*drifting, {"tester", milliseconds(2000), {}});
  ASSERT_TRUE(wait_until([&] { return session.lost(); }, milliseconds(5000)));
  const auto lost_after = SteadyClock::now() - opened;
  EXPECT_GE(lost_after, milliseconds(1000));
  EXPECT_LT(lost_after, milliseconds(1800));
}

TEST_F(ClientDeadlineTest, AllowanceFromTheEnvironmentAndInvalidValues) {
  ::setenv("DLOCK_CLOCK_DRIFT", "5%", 1);
  auto from_env = client(std::nullopt);
  Session session(*from_env, {"tester", milliseconds(60000), {}});
  auto lock = session.acquire("k", {milliseconds(1000), milliseconds(0), "", false, {}});
  ASSERT_TRUE(lock);
  EXPECT_LE(lock->client_deadline(), SteadyClock::now() + milliseconds(950));
  // An explicit option wins over the environment.
  auto explicit_zero = client(0.0);
  const auto before = SteadyClock::now();
  const auto handle = explicit_zero->acquire("k", session.id(), milliseconds(1000), {});
  ASSERT_TRUE(handle);
  EXPECT_GE(handle->client_deadline, before + milliseconds(1000));

  for (const char* bad : {"abc", "0.5", "-1%", "1%%", ""}) {
    ::setenv("DLOCK_CLOCK_DRIFT", bad, 1);
    if (*bad == '\0') {
      EXPECT_NO_THROW(client(std::nullopt)) << "empty means unset";
      continue;
    }
    EXPECT_THROW(client(std::nullopt), InvalidArgumentError) << bad;
  }
  EXPECT_THROW(client(0.5), InvalidArgumentError);
  EXPECT_THROW(client(-0.01), InvalidArgumentError);
}

}  // namespace
}  // namespace dlock::client
