// Lock-delay (C2 "Lock-delay", C3 POST /v1/sessions) through the client library and the dlock
// CLI against a real dlockd (embedded sqlite store). ClientLockDelay: the wire - a delay up to
// lock.max.delay is accepted, more is InvalidArgumentError naming lock_delay_ms (exit 64 from
// the CLI), a bad --lock-delay names the flag, `--json session open` shows "lock_delay_ms".
// LockDelayEnforced: what needs the store to keep the delay - the delay asked for comes back
// in SessionInfo / Session::lock_delay / the CLI's output, a revoked grant's name stays
// ungranted for the delay, a released one's does not.

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include "dlock/client.h"
#include "support/dlockd_process.h"
#include "unit/client/cli_in_process.h"

namespace dlock {
namespace {

using client::testing::dlock;
using std::chrono::milliseconds;
using testing::DlockdOptions;
using testing::DlockdProcess;

// admin.token needs 32+ characters, 8+ distinct (ADR-0016).
constexpr const char* kAdminToken = "lock-delay-token-0123456789abcdefgh";

class ClientLockDelay : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    DlockdOptions options;
    options.extra_args = {"--admin-enabled", "true", "--admin-token", kAdminToken};
    server_ = new DlockdProcess(options);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  static client::ClientOptions options() {
    client::ClientOptions options;
    options.server_url = server_->url();
    options.admin_token = kAdminToken;
    options.retry_budget = milliseconds(2000);
    return options;
  }

  // `dlock --server <dlockd> ARGS...` in process.
  static client::testing::CliResult cli(std::vector<std::string> args) {
    args.insert(args.begin(), {"--server", server_->url()});
    return dlock(std::move(args));
  }

  static DlockdProcess* server_;
};
DlockdProcess* ClientLockDelay::server_ = nullptr;

TEST_F(ClientLockDelay, ADelayUpToTheServersMaximumIsAcceptedNoneByDefault) {
  client::Client client(options());
  EXPECT_EQ(client.open_session("plain", milliseconds(10'000)).lock_delay, milliseconds(0));
  EXPECT_NO_THROW(client.open_session("delayed", milliseconds(10'000), {}, milliseconds(1500)));
  EXPECT_NO_THROW(client::Session(client, {.owner = "raii", .lock_delay = milliseconds(60'000)}))
      << "lock.max.delay (1m) itself is allowed";
}

TEST_F(ClientLockDelay, MoreThanTheServersMaximumIsInvalidNamingTheField) {
  client::Client client(options());
  try {
    client.open_session("greedy", milliseconds(10'000), {}, milliseconds(60'001));
    ADD_FAILURE() << "a lock-delay above lock.max.delay was granted";
  } catch (const InvalidArgumentError& error) {
    EXPECT_EQ(error.field(), "lock_delay_ms") << error.what();
  }
  EXPECT_THROW(client::Session(client, {.owner = "greedy", .lock_delay = milliseconds(120'000)}),
               InvalidArgumentError);
}

TEST_F(ClientLockDelay, TheCliSendsTheFlagAndNamesBadValues) {
  const auto opened = cli({"--json", "session", "open", "--lock-delay", "1500ms"});
  ASSERT_EQ(opened.status, 0) << opened.err;
  EXPECT_TRUE(boost::json::parse(opened.out).at("lock_delay_ms").is_int64()) << opened.out;
  const auto plain = cli({"--json", "session", "open"});
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(boost::json::parse(plain.out).at("lock_delay_ms").to_number<int>(), 0);
  EXPECT_EQ(cli({"session", "open"}).out.find("lock-delay"), std::string::npos);

  const auto too_long = cli({"session", "open", "--lock-delay", "2m"});
  EXPECT_EQ(too_long.status, 64);
  EXPECT_NE(too_long.err.find("lock_delay_ms"), std::string::npos) << too_long.err;
  // Refused before anything is sent, naming the flag, on every subcommand that has it.
  for (std::vector<std::string> args : {std::vector<std::string>{"session", "open"},
                                        {"run", "k", "--", "true"},
                                        {"elect", "k", "--value", "v", "--", "true"}}) {
    args.insert(args.begin() + 2, {"--lock-delay", "soon"});
    const auto bad = cli(args);
    EXPECT_EQ(bad.status, 64) << args[0];
    EXPECT_NE(bad.err.find("--lock-delay"), std::string::npos) << bad.err;
  }
}

// Need the store to keep the delay (C2 "Lock-delay (pg, sqlite, etcd)"): the sqlite store of
// dlockd answers the session's delay and enforces it.
class LockDelayEnforced : public ClientLockDelay {
 protected:
  static client::AcquireOptions lease(milliseconds wait = milliseconds(0)) {
    client::AcquireOptions options;
    options.ttl = milliseconds(10'000);
    options.wait = wait;
    return options;
  }
};

TEST_F(LockDelayEnforced, TheDelayAskedForIsAnswered) {
  client::Client client(options());
  const SessionInfo info =
      client.open_session("delayed", milliseconds(10'000), {}, milliseconds(1500));
  EXPECT_EQ(info.lock_delay, milliseconds(1500));
  client::Session session(client, {.owner = "raii", .lock_delay = milliseconds(60'000)});
  EXPECT_EQ(session.lock_delay(), milliseconds(60'000));
  const auto opened = cli({"--json", "session", "open", "--lock-delay", "1500ms"});
  ASSERT_EQ(opened.status, 0) << opened.err;
  EXPECT_EQ(boost::json::parse(opened.out).at("lock_delay_ms").to_number<int>(), 1500);
  const auto text = cli({"session", "open", "--lock-delay", "2s"});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("  lock-delay 2s  "), std::string::npos) << text.out;
}

TEST_F(LockDelayEnforced, ARevokedGrantsNameStaysUngrantedForTheDelayAReleasedOneDoesNot) {
  client::Client client(options());
  client::Session other(client, {.owner = "next"});
  {
    client::Session holder(client, {.owner = "holder", .lock_delay = milliseconds(1500)});
    auto released = holder.acquire("delay/released", lease());
    ASSERT_TRUE(released);
    released->release();
    EXPECT_TRUE(other.acquire("delay/released", lease())) << "a release costs no delay";

    auto revoked = holder.acquire("delay/revoked", lease());
    ASSERT_TRUE(revoked);
    ASSERT_TRUE(client.revoke("delay/revoked").revoked);
    const auto revoked_at = SteadyClock::now();
    EXPECT_FALSE(other.acquire("delay/revoked", lease()))
        << "granted at once after a revoke of a session with a lock-delay";
    auto next = other.acquire("delay/revoked", lease(milliseconds(10'000)));
    ASSERT_TRUE(next) << "never granted after the delay";
    EXPECT_GE(SteadyClock::now() - revoked_at, milliseconds(1400));
  }
}

}  // namespace
}  // namespace dlock
