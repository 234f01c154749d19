// The SQLite store's group commit (src/store/sqlite/sqlite_db.h) against a real database file:
// concurrent writes share commits, a write that is rolled back takes nothing of its group mates
// with it, and a failed BEGIN fails the writer instead of running it outside a transaction.

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dlock/errors.h"
#include "store/sqlite/sqlite_db.h"

namespace dlock::store::sqlite {
namespace {

using std::chrono::milliseconds;

class GroupCommitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("dlock-group-commit-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    db_ = std::make_unique<Database>((dir_ / "test.db").string(), 200);
    db_->exec("PRAGMA journal_mode=WAL");
    db_->exec("CREATE TABLE t (id INTEGER PRIMARY KEY)");
    sqlite3_commit_hook(db_->handle(), &GroupCommitTest::count_commit, &commits_);
    writes_ = std::make_unique<GroupCommit>(*db_, mutex_);
  }

  void TearDown() override {
    writes_.reset();
    db_.reset();
    std::filesystem::remove_all(dir_);
  }

  static int count_commit(void* counter) {
    ++*static_cast<std::atomic<int>*>(counter);
    return 0;  // let the commit proceed
  }

  void insert(int id) {
    Statement statement(db_->handle(), "INSERT INTO t (id) VALUES (?1)");
    statement.bind(1, std::int64_t{id});
    statement.step();
  }

  bool present(int id) {
    std::lock_guard lock(mutex_);
    Statement statement(db_->handle(), "SELECT 1 FROM t WHERE id = ?1");
    statement.bind(1, std::int64_t{id});
    return statement.step();
  }

  int rows() {
    std::lock_guard lock(mutex_);
    Statement statement(db_->handle(), "SELECT count(*) FROM t");
    statement.step();
    return static_cast<int>(statement.column_int64(0));
  }

  std::filesystem::path dir_;
  std::mutex mutex_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<GroupCommit> writes_;
  std::atomic<int> commits_{0};
};

TEST_F(GroupCommitTest, ConcurrentWritersShareCommitsAndLoseNothing) {
  constexpr int kThreads = 8;
  constexpr int kWritesEach = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kWritesEach; ++i) {
        writes_->write([&] {
          insert(t * kWritesEach + i);
          // Real time: the load; others queue up meanwhile.
          std::this_thread::sleep_for(milliseconds(1));
          return true;
        });
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(rows(), kThreads * kWritesEach);
  EXPECT_LT(commits_.load(), kThreads * kWritesEach / 2) << "writers did not share commits";
}

TEST_F(GroupCommitTest, RolledBackWriteTakesNothingOfItsGroupMatesWithIt) {
  std::atomic<bool> first_running{false};
  std::thread first([&] {
    writes_->write([&] {
      first_running = true;
      insert(1);
      // Real time: a long write, so that 2, 3 and 4 queue up as one group.
      std::this_thread::sleep_for(milliseconds(300));
      return true;
    });
  });
  while (!first_running) std::this_thread::yield();
  std::atomic<bool> third_threw{false};
  std::thread second([&] {
    writes_->write([&] {
      insert(2);
      return false;  // asks to be rolled back
    });
  });
  // The group commit shows no queue position: a pause orders the writes 2, 3, 4.
  std::this_thread::sleep_for(milliseconds(50));
  std::thread third([&] {
    try {
      writes_->write([&]() -> bool {
        insert(3);
        throw std::runtime_error("write 3 fails");
      });
    } catch (const std::runtime_error&) {
      third_threw = true;
    }
  });
  // The group commit shows no queue position: a pause orders the writes 2, 3, 4.
  std::this_thread::sleep_for(milliseconds(50));
  std::thread fourth([&] {
    writes_->write([&] {
      insert(4);
      return true;
    });
  });
  for (auto* thread : {&first, &second, &third, &fourth}) thread->join();
  EXPECT_TRUE(third_threw) << "a write's exception must reach its own writer";
  EXPECT_TRUE(present(1));
  EXPECT_FALSE(present(2)) << "a write that asked to be rolled back was committed";
  EXPECT_FALSE(present(3)) << "a write that threw was committed";
  EXPECT_TRUE(present(4)) << "a group mate of a rolled-back write was lost";
  EXPECT_EQ(commits_.load(), 2) << "2, 3 and 4 were expected to commit as one group";
}

TEST_F(GroupCommitTest, FailedBeginFailsTheWriterAndWritesNothing) {
  Database other((dir_ / "test.db").string(), 0);
  other.exec("BEGIN IMMEDIATE");  // another process holds the write lock
  bool ran = false;
  EXPECT_THROW(writes_->write([&] {
    ran = true;
    insert(7);
    return true;
  }),
               Error);
  EXPECT_FALSE(ran) << "a write ran although its transaction never began";
  other.exec("ROLLBACK");
  EXPECT_FALSE(present(7));
  writes_->write([&] {
    insert(8);
    return true;
  });
  EXPECT_TRUE(present(8)) << "the group commit did not recover after the lock was released";
}

}  // namespace
}  // namespace dlock::store::sqlite
