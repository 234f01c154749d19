#pragma once

// The fixture of the conformance matrix (lock_store_conformance_test.cc instantiates it over
// every backend; session_bound_conformance_test.cc adds the session-bound cases, ADR-0018).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>

#include "dlock/lock_store.h"
#include "support/backend_harness.h"
#include "support/subprocess.h"

namespace dlock::conformance_test {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::BackendHarness;

constexpr milliseconds kMinTtl{1000};

class LockStoreConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    harness_ = &testing::harness_for(GetParam());
    store_ = harness_->make_backend(limits_);
  }

  void TearDown() override { harness_->end_outage(); }

  // A key no other test (or earlier run against the same database) uses.
  std::string fresh_key(const std::string& label = "k") {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    return "conformance/" + std::string(info->name()) + "-" + label + "-" +
           std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + "-" +
           std::to_string(counter++);
  }

  SessionInfo open(const std::string& owner, milliseconds ttl = seconds(60)) {
    return store_->open_session(owner, ttl);
  }

  LockHandle acquire(const std::string& key, const SessionInfo& session,
                     milliseconds ttl = seconds(30)) {
    auto handle =
        store_->try_grant(key, session.owner_id, session.session_id, GrantRequest::exclusive(ttl));
    EXPECT_TRUE(handle.has_value()) << "expected a grant of " << key;
    return handle.value_or(LockHandle{});
  }

  // Waits (bounded) until the backend itself no longer reports `key` as held.
  void wait_until_expired(const std::string& key) {
    ASSERT_TRUE(testing::wait_for([&] { return !store_->read(key).has_value(); }, seconds(10)))
        << key << " did not expire";
  }

  TtlLimits limits_{kMinTtl, std::chrono::minutes(10)};
  BackendHarness* harness_ = nullptr;
  BackendPtr store_;
};

}  // namespace dlock::conformance_test
