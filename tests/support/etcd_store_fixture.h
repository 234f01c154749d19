#pragma once

// The fixture of the etcd store's own tests (what the conformance matrix cannot see from the
// SPI): one single-member etcd per test suite, started again if a test stopped it, and a fresh
// EtcdStore on it for every test.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "dlock/lock_store.h"
#include "store/etcd/etcd_store.h"
#include "support/etcd_server.h"

namespace dlock::testing {

class EtcdStoreFixture : public ::testing::Test {
 protected:
  // Keys of fresh_key() are "<key_prefix>/<label>-<n>".
  explicit EtcdStoreFixture(std::string key_prefix) : key_prefix_(std::move(key_prefix)) {}

  static void SetUpTestSuite() { etcd_ = new EtcdCluster(1); }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
  }

  void SetUp() override {
    if (!etcd_->running(0)) etcd_->start(0);
    store_ = make_store();
  }

  // A store on the suite's etcd (2 s call timeout); `after_grant` as EtcdStoreOptions' hook.
  static BackendPtr make_store(std::function<void(std::string_view)> after_grant = {}) {
    return store::etcd::make_etcd_store(
        {etcd_->endpoints(), std::chrono::milliseconds(2000), TtlLimits{}, std::move(after_grant)});
  }

  std::string fresh_key(const std::string& label) {
    static std::atomic<int> counter{0};
    return key_prefix_ + "/" + label + "-" + std::to_string(counter++);
  }

  static inline EtcdCluster* etcd_ = nullptr;
  BackendPtr store_;

 private:
  std::string key_prefix_;
};

}  // namespace dlock::testing
