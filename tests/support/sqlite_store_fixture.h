#pragma once

// The fixture of the SQLite store's own tests that reopen their file: a fresh directory per test
// (named after the process and the test), the store on `<dir>/dlock.db`, reopen() to close and
// open it again (migrations, the store clock), everything removed afterwards.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <utility>

#include "dlock/lock_store.h"
#include "store/sqlite/sqlite_store.h"

namespace dlock::testing {

class SqliteStoreFixture : public ::testing::Test {
 protected:
  // The directory is "<temp>/<dir_prefix>-<pid>-<test name>".
  explicit SqliteStoreFixture(std::string dir_prefix) : dir_prefix_(std::move(dir_prefix)) {}

  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           (dir_prefix_ + "-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    reopen();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void reopen() {
    store_.reset();
    store::sqlite::SqliteStoreOptions options;
    options.path = (dir_ / "dlock.db").string();
    store_ = store::sqlite::make_sqlite_store(options);
  }

  std::filesystem::path dir_;
  BackendPtr store_;

 private:
  std::string dir_prefix_;
};

}  // namespace dlock::testing
