// Authenticator: bearer parsing, outcomes, reload that keeps the old table on a bad file, the
// per-address failure throttle on a fake clock, denial counters and the rate-limited log hook.

#include "auth/authenticator.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "auth/admin_token.h"
#include "auth/crypto.h"
#include "auth/tokens_file.h"
#include "dlock/errors.h"

namespace dlock::auth {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const std::string kAliceToken = "dlk_alice-token-for-tests-only-0123456789abc";
const std::string kBobToken = "dlk_bob-token-for-tests-only-0123456789abcdef";
const std::string kAdminToken = "dlk_admin-token-for-tests-only-0123456789ab";

std::string line(const std::string& name, const std::string& token, const std::string& perms) {
  return tokens_file_line(name, token, parse_permissions(perms)) + "\n";
}

class FakeClock {
 public:
  std::chrono::steady_clock::time_point now() const { return now_; }
  void advance(milliseconds by) { now_ += by; }

 private:
  std::chrono::steady_clock::time_point now_{seconds(1000)};
};

class RecordingObserver : public AuthObserver {
 public:
  void denied(AuthOutcome reason) noexcept override { ++denied_[reason]; }
  void log_denied(AuthOutcome reason, std::string_view remote_address,
                  std::uint64_t suppressed) noexcept override {
    logs_.push_back(std::string(to_string(reason)) + " " + std::string(remote_address) + " " +
                    std::to_string(suppressed));
  }
  std::map<AuthOutcome, int> denied_;
  std::vector<std::string> logs_;
};

class AuthenticatorTest : public ::testing::Test {
 protected:
  AuthenticatorTest() {
    char pattern[] = "/tmp/dlock-auth-test-XXXXXX";
    dir_ = ::mkdtemp(pattern);
  }
  ~AuthenticatorTest() override { std::filesystem::remove_all(dir_); }

  AuthenticatorOptions options() {
    AuthenticatorOptions options;
    options.throttle.now = [this] { return clock_.now(); };
    options.throttle.burst = 3;
    options.throttle.refill_interval = seconds(10);
    options.log_burst = 2;
    options.log_interval = seconds(1);
    return options;
  }

  std::string write(const std::string& name, const std::string& text) {
    const auto path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  FakeClock clock_;
  RecordingObserver observer_;
  std::filesystem::path dir_;
};

TEST(BearerTokenOfTest, AcceptsOnlyBearerToken68) {
  EXPECT_EQ(bearer_token_of("Bearer abc"), "abc");
  EXPECT_EQ(bearer_token_of("bearer abc"), "abc");
  EXPECT_EQ(bearer_token_of("BEARER   abc  "), "abc");
  EXPECT_EQ(bearer_token_of("Bearer a-b.c_d~e+f/g=="), "a-b.c_d~e+f/g==");
  EXPECT_EQ(bearer_token_of("Bearer "), "");
  EXPECT_EQ(bearer_token_of("Bearer"), "");
  EXPECT_EQ(bearer_token_of("Bearerabc"), "");
  EXPECT_EQ(bearer_token_of("Basic YWxhZGRpbjpvcGVuc2VzYW1l"), "");
  EXPECT_EQ(bearer_token_of("Bearer a b"), "");
  EXPECT_EQ(bearer_token_of("Bearer =abc"), "");
  EXPECT_EQ(bearer_token_of("Bearer ab=c"), "");
  EXPECT_EQ(bearer_token_of("Bearer ab\"c"), "");
}

TEST_F(AuthenticatorTest, OutcomesForEachKindOfRequest) {
  Authenticator authenticator(parse_tokens(line("alice", kAliceToken, "lock:payments"), "t"), {},
                              options(), &observer_);
  const AuthResult ok = authenticator.authenticate("Bearer " + kAliceToken, "10.0.0.1");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok.principal->name, "alice");
  EXPECT_TRUE(ok.principal->allows(Role::kLock, "payments"));
  EXPECT_EQ(authenticator.authenticate("", "10.0.0.1").outcome, AuthOutcome::kMissing);
  EXPECT_EQ(authenticator.authenticate("Basic abc", "10.0.0.1").outcome, AuthOutcome::kMalformed);
  EXPECT_EQ(authenticator.authenticate("Bearer " + kBobToken, "10.0.0.1").outcome,
            AuthOutcome::kUnknown);
  EXPECT_EQ(observer_.denied_[AuthOutcome::kMissing], 1);
  EXPECT_EQ(observer_.denied_[AuthOutcome::kMalformed], 1);
  EXPECT_EQ(observer_.denied_[AuthOutcome::kUnknown], 1);
  EXPECT_EQ(observer_.denied_.count(AuthOutcome::kOk), 0u);
  EXPECT_STREQ(to_string(AuthOutcome::kThrottled), "throttled");
}

TEST_F(AuthenticatorTest, ATokenShorterThanTheMinimumIsMalformedEvenWhenListed) {
  const std::string at_minimum(kMinBearerTokenChars, 'm');
  const std::string one_short(kMinBearerTokenChars - 1, 's');
  Authenticator authenticator(
      parse_tokens(line("long", at_minimum, "read:*") + line("short", one_short, "read:*"), "t"),
      {}, options(), &observer_);
  ASSERT_TRUE(authenticator.authenticate("Bearer " + at_minimum, "10.0.0.2"));
  // Refused before any lookup: the listed hash of the short token does not make it valid.
  EXPECT_EQ(authenticator.authenticate("Bearer " + one_short, "10.0.0.2").outcome,
            AuthOutcome::kMalformed);
  EXPECT_EQ(observer_.denied_[AuthOutcome::kMalformed], 1);
  // A guess like any malformed header: it drains the address's bucket (burst 3).
  authenticator.authenticate("Bearer " + one_short, "10.0.0.2");
  authenticator.authenticate("Bearer " + one_short, "10.0.0.2");
  EXPECT_EQ(authenticator.authenticate("Bearer " + one_short, "10.0.0.2").outcome,
            AuthOutcome::kThrottled);
  // A valid token is never throttled (C6).
  EXPECT_TRUE(authenticator.authenticate("Bearer " + at_minimum, "10.0.0.2"));
  // What `dlock token new` makes is long enough.
  EXPECT_GE(random_token().size(), kMinBearerTokenChars);
}

TEST_F(AuthenticatorTest, ReloadSwapsInTheNewFileAndKeepsTheOldOneOnAnError) {
  const std::string path = write("tokens", line("alice", kAliceToken, "read:*"));
  Authenticator authenticator(load_tokens_file(path), {}, options(), &observer_);
  EXPECT_TRUE(authenticator.authenticate("Bearer " + kAliceToken, "a"));
  // A principal held by a request survives the swap.
  const auto held = authenticator.authenticate("Bearer " + kAliceToken, "a").principal;

  write("tokens", line("bob", kBobToken, "read:*"));
  EXPECT_EQ(authenticator.reload(path), 1u);
  EXPECT_TRUE(authenticator.authenticate("Bearer " + kBobToken, "a"));
  EXPECT_EQ(authenticator.authenticate("Bearer " + kAliceToken, "b").outcome,
            AuthOutcome::kUnknown);
  EXPECT_EQ(held->name, "alice");

  write("tokens", line("bob", kBobToken, "read:*") + "carol nothex read:*\n");
  try {
    authenticator.reload(path);
    FAIL() << "a bad file was accepted";
  } catch (const TokensFileError& error) {
    EXPECT_EQ(error.line(), 2u);
  }
  EXPECT_TRUE(authenticator.authenticate("Bearer " + kBobToken, "a"));  // the old table serves
  EXPECT_THROW(authenticator.reload((dir_ / "missing").string()), TokensFileError);
  EXPECT_TRUE(authenticator.authenticate("Bearer " + kBobToken, "a"));
}

TEST_F(AuthenticatorTest, AdminPrincipalIsBuiltInAndSurvivesReloads) {
  const std::string path = write("tokens", line("alice", kAliceToken, "read:*"));
  Authenticator authenticator(load_tokens_file(path), {admin_principal(kAdminToken)}, options());
  const AuthResult admin = authenticator.authenticate("Bearer " + kAdminToken, "a");
  ASSERT_TRUE(admin);
  EXPECT_EQ(admin.principal->name, "admin");
  EXPECT_TRUE(admin.principal->allows(Role::kAdmin, "any"));
  EXPECT_EQ(authenticator.reload(path), 2u);
  EXPECT_TRUE(authenticator.authenticate("Bearer " + kAdminToken, "a"));
  EXPECT_EQ(authenticator.certificate_principal("admin"), nullptr);  // the token's alone
  // The file may not define `admin` again, nor reuse its token.
  write("tokens", line("admin", kAliceToken, "read:*"));
  EXPECT_THROW(authenticator.reload(path), TokensFileError);
  write("tokens", line("root", kAdminToken, "read:*"));
  EXPECT_THROW(authenticator.reload(path), TokensFileError);
  EXPECT_TRUE(authenticator.authenticate("Bearer " + kAliceToken, "a"));
  EXPECT_THROW(Authenticator(parse_tokens(line("admin", kAliceToken, "read:*"), "t"),
                             {admin_principal(kAdminToken)}),
               InvalidArgumentError);
}

// C6 "Certificates and principals": a verified client certificate's CN names only a
// certificate-only principal (hash `-`): never `admin` (with or without admin.token), never a
// principal that has a bearer token.
TEST_F(AuthenticatorTest, ACertificateNamesOnlyACertificateOnlyPrincipal) {
  const std::string file = "carol - read:*\n" + line("bob", kBobToken, "admin:*");
  Authenticator authenticator(parse_tokens(file, "t"), {admin_principal(kAdminToken)}, options());
  const auto carol = authenticator.certificate_principal("carol");
  ASSERT_NE(carol, nullptr);
  EXPECT_EQ(carol->name, "carol");
  EXPECT_EQ(authenticator.certificate_principal("admin"), nullptr);
  EXPECT_EQ(authenticator.certificate_principal("bob"), nullptr);
  EXPECT_EQ(authenticator.certificate_principal("dave"), nullptr);
  EXPECT_EQ(authenticator.certificate_principal(""), nullptr);
  // The admin token and bob's token still authenticate them.
  EXPECT_TRUE(authenticator.authenticate("Bearer " + kAdminToken, "a"));
  EXPECT_TRUE(authenticator.authenticate("Bearer " + kBobToken, "a"));

  // Without admin.token a tokens file may define `admin`; no certificate is it all the same.
  Authenticator without(parse_tokens("admin - admin:*\ncarol - read:*\n", "t"), {}, options());
  EXPECT_EQ(without.certificate_principal("admin"), nullptr);
  EXPECT_NE(without.certificate_principal("carol"), nullptr);
}

TEST_F(AuthenticatorTest, FailuresFromOneAddressAreThrottledThenForgiven) {
  Authenticator authenticator(parse_tokens(line("alice", kAliceToken, "read:*"), "t"), {},
                              options(), &observer_);
  const std::string bad = "Bearer guess-of-a-token-long-enough-to-be-looked-up";
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(authenticator.authenticate(bad, "10.0.0.9").outcome, AuthOutcome::kUnknown) << i;
  }
  // The bucket (burst 3) is empty: the next failure is answered 429 with when to try again.
  AuthResult refused = authenticator.authenticate(bad, "10.0.0.9");
  EXPECT_EQ(refused.outcome, AuthOutcome::kThrottled);
  EXPECT_EQ(refused.retry_after, seconds(10));
  EXPECT_EQ(authenticator.authenticate("Basic abc", "10.0.0.9").outcome, AuthOutcome::kThrottled);
  // A missing header guesses nothing: 401, never 429, and it drains no bucket.
  EXPECT_EQ(authenticator.authenticate("", "10.0.0.9").outcome, AuthOutcome::kMissing);
  for (int i = 0; i < 10; ++i) authenticator.authenticate("", "10.0.0.11");
  EXPECT_EQ(authenticator.authenticate(bad, "10.0.0.11").outcome, AuthOutcome::kUnknown);
  // Other addresses are not affected.
  EXPECT_EQ(authenticator.authenticate(bad, "10.0.0.10").outcome, AuthOutcome::kUnknown);

  clock_.advance(seconds(4));
  refused = authenticator.authenticate(bad, "10.0.0.9");
  EXPECT_EQ(refused.outcome, AuthOutcome::kThrottled);
  EXPECT_EQ(refused.retry_after, seconds(6));
  clock_.advance(seconds(6));  // one failure's worth refilled; the throttled ones drained none
  EXPECT_EQ(authenticator.authenticate(bad, "10.0.0.9").outcome, AuthOutcome::kUnknown);
  EXPECT_EQ(authenticator.authenticate(bad, "10.0.0.9").outcome, AuthOutcome::kThrottled);
  EXPECT_EQ(observer_.denied_[AuthOutcome::kThrottled], 4);
}

// C6: a valid token is always accepted, whatever the throttle holds for its address -- a
// principal does not pay for another's failures behind the same NAT or ingress.
TEST_F(AuthenticatorTest, AValidTokenIsAcceptedFromAThrottledAddress) {
  Authenticator authenticator(parse_tokens(line("alice", kAliceToken, "read:*"), "t"), {},
                              options(), &observer_);
  const std::string bad = "Bearer guess-of-a-token-long-enough-to-be-looked-up";
  for (int i = 0; i < 3; ++i) authenticator.authenticate(bad, "10.0.0.9");
  ASSERT_EQ(authenticator.authenticate(bad, "10.0.0.9").outcome, AuthOutcome::kThrottled);
  const AuthResult ok = authenticator.authenticate("Bearer " + kAliceToken, "10.0.0.9");
  ASSERT_TRUE(ok) << to_string(ok.outcome);
  EXPECT_EQ(ok.principal->name, "alice");
  // The success neither refilled the bucket nor was counted as a denial.
  EXPECT_EQ(authenticator.authenticate(bad, "10.0.0.9").outcome, AuthOutcome::kThrottled);
  EXPECT_EQ(observer_.denied_[AuthOutcome::kThrottled], 2);
  // One bad token every few seconds from a shared address never locks its valid tokens out.
  for (int i = 0; i < 20; ++i) {
    clock_.advance(seconds(3));
    authenticator.authenticate(bad, "10.0.0.9");
    EXPECT_TRUE(authenticator.authenticate("Bearer " + kAliceToken, "10.0.0.9")) << i;
  }
}

// C6: the table of failing addresses is bounded by forgetting the least recently failed one,
// never by refusing newcomers: a full table throttles no new address, and no valid token.
TEST_F(AuthenticatorTest, AFullThrottleTableNeverThrottlesANewAddressAndEvictsTheOldest) {
  AuthenticatorOptions small = options();
  small.throttle.max_addresses = 3;
  Authenticator authenticator(parse_tokens(line("alice", kAliceToken, "read:*"), "t"), {}, small,
                              &observer_);
  const std::string bad = "Bearer guess-of-a-token-long-enough-to-be-looked-up";
  for (const char* address : {"10.0.1.1", "10.0.1.2", "10.0.1.3"}) {
    for (int i = 0; i < 3; ++i) authenticator.authenticate(bad, address);
  }
  // Full, and nothing has refilled: a new address is neither throttled nor refused its token.
  EXPECT_TRUE(authenticator.authenticate("Bearer " + kAliceToken, "10.0.1.4"));
  EXPECT_EQ(authenticator.authenticate(bad, "10.0.1.4").outcome, AuthOutcome::kUnknown);
  // 10.0.1.4 took the place of 10.0.1.1, the least recently failed: its bucket starts afresh...
  EXPECT_EQ(authenticator.authenticate(bad, "10.0.1.1").outcome, AuthOutcome::kUnknown);
  // ... and took 10.0.1.2's place; 10.0.1.3 is still tracked, and still throttled.
  EXPECT_EQ(authenticator.authenticate(bad, "10.0.1.3").outcome, AuthOutcome::kThrottled);
  EXPECT_EQ(authenticator.authenticate(bad, "10.0.1.2").outcome, AuthOutcome::kUnknown);
  EXPECT_EQ(observer_.denied_[AuthOutcome::kThrottled], 1);
}

// The review's reproducer at the default settings (10 000 addresses, a burst of 10, one more
// per 6 s): 10 001 loopback addresses fail twice each; then an address that has only ever
// authenticated, and a new one, present a valid token. Before the fix both were throttled
// until the table's oldest buckets refilled.
TEST(AuthenticatorFloodTest, TwentyThousandFailuresFromTenThousandAddressesLockNobodyOut) {
  std::chrono::steady_clock::time_point now{seconds(1000)};
  AuthenticatorOptions options;
  options.throttle.now = [&now] { return now; };
  Authenticator authenticator(parse_tokens(line("alice", kAliceToken, "read:*"), "t"), {}, options);
  ASSERT_TRUE(authenticator.authenticate("Bearer " + kAliceToken, "10.0.0.1"));
  const std::string bad = "Bearer guess-of-a-token-long-enough-to-be-looked-up";
  const auto started = std::chrono::steady_clock::now();
  int failures = 0;
  for (int i = 0; i <= 10000; ++i) {
    const std::string address = "127.0." + std::to_string(i / 256) + "." + std::to_string(i % 256);
    for (int j = 0; j < 2; ++j) {
      EXPECT_NE(authenticator.authenticate(bad, address).outcome, AuthOutcome::kOk);
      ++failures;
    }
  }
  const auto elapsed = std::chrono::steady_clock::now() - started;
  const AuthResult known = authenticator.authenticate("Bearer " + kAliceToken, "10.0.0.1");
  const AuthResult fresh = authenticator.authenticate("Bearer " + kAliceToken, "10.0.0.2");
  int locked_out_seconds = 0;
  while (!authenticator.authenticate("Bearer " + kAliceToken, "10.0.0.3") &&
         locked_out_seconds < 60) {
    now += seconds(1);
    ++locked_out_seconds;
  }
  std::cout << failures << " failures in "
            << std::chrono::duration_cast<milliseconds>(elapsed).count()
            << " ms; then a valid token from an address that only ever succeeded: "
            << to_string(known.outcome) << ", from a new address: " << to_string(fresh.outcome)
            << "; valid tokens refused for " << locked_out_seconds << " s of the fake clock\n";
  EXPECT_TRUE(known) << to_string(known.outcome);
  EXPECT_TRUE(fresh) << to_string(fresh.outcome);
  EXPECT_EQ(locked_out_seconds, 0);
}

TEST(FailureThrottleTest, AFullTableForgetsTheLeastRecentlyFailedAddress) {
  std::chrono::steady_clock::time_point now{seconds(1)};
  ThrottleOptions options;
  options.burst = 2;
  options.refill_interval = seconds(1);
  options.max_addresses = 2;
  options.now = [&now] { return now; };
  FailureThrottle throttle(options);
  throttle.record_failure("a");
  throttle.record_failure("a");
  throttle.record_failure("b");
  throttle.record_failure("b");
  EXPECT_GT(throttle.wait_before_attempt("a").count(), 0);
  EXPECT_GT(throttle.wait_before_attempt("b").count(), 0);
  throttle.record_failure("a");  // a failed last: b is now the least recently failed
  // The table is full and nothing has refilled: a newcomer is not throttled, and takes b's place.
  EXPECT_EQ(throttle.wait_before_attempt("c").count(), 0);
  throttle.record_failure("c");
  EXPECT_EQ(throttle.tracked_addresses_for_test(), 2u);
  EXPECT_EQ(throttle.wait_before_attempt("b").count(), 0);  // forgotten: starts afresh
  EXPECT_GT(throttle.wait_before_attempt("a").count(), 0);  // kept
  EXPECT_EQ(throttle.wait_before_attempt("c").count(), 0);  // one failure left
}

TEST_F(AuthenticatorTest, LogHookIsRateLimitedAndCountsWhatItSkipped) {
  Authenticator authenticator(TokenTable{}, {}, options(), &observer_);
  for (int i = 0; i < 5; ++i) authenticator.authenticate("", "10.0.0." + std::to_string(i));
  EXPECT_EQ(observer_.denied_[AuthOutcome::kMissing], 5);
  ASSERT_EQ(observer_.logs_.size(), 2u);
  EXPECT_EQ(observer_.logs_[0], "missing 10.0.0.0 0");
  clock_.advance(seconds(1));
  authenticator.authenticate("Bearer " + kAliceToken, "10.0.0.7");
  ASSERT_EQ(observer_.logs_.size(), 3u);
  EXPECT_EQ(observer_.logs_[2], "unknown 10.0.0.7 3");
  for (const auto& logged : observer_.logs_) {
    EXPECT_EQ(logged.find(kAliceToken), std::string::npos);
  }
}

TEST_F(AuthenticatorTest, ConcurrentAuthenticationDuringReloadsSeesWholeTables) {
  const std::string first = line("alice", kAliceToken, "read:*");
  const std::string second =
      line("alice", kAliceToken, "read:*") + line("bob", kBobToken, "read:*");
  const std::string path = write("tokens", first);
  Authenticator authenticator(load_tokens_file(path), {}, options());
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::thread reader([&] {
    while (!stop) {
      if (!authenticator.authenticate("Bearer " + kAliceToken, "r")) ++failures;
    }
  });
  for (int i = 0; i < 200; ++i) {
    write("tokens", i % 2 ? first : second);
    authenticator.reload(path);
  }
  stop = true;
  reader.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace dlock::auth
