// The embedded store's files (store/sqlite/data_file.h, contract C6): a missing data directory
// is created 0700 and the database, -wal and -shm files 0600 whatever the umask; existing ones
// others may read are made private, or refused with the fix when they cannot be; a second store
// on the same file refuses to open, naming it, until the first one is closed, whatever became of
// the lock file of earlier versions and by whichever path it reaches the file.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "dlock/errors.h"
#include "store/sqlite/sqlite_store.h"

namespace dlock::store::sqlite {
namespace {

namespace fs = std::filesystem;

class DataFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("dlock-data-file-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    path_ = (root_ / "data" / "nested" / "dlock.db").string();
  }
  void TearDown() override { fs::remove_all(root_); }

  BackendPtr open() {
    return make_sqlite_store({path_, TtlLimits{}, std::chrono::milliseconds(200)});
  }

  // Runs `body` in a child process (no store of this one is open then); returns its exit
  // status, or -1 when it did not exit.
  template <typename Body>
  static int in_child(Body body) {
    const pid_t child = ::fork();
    if (child == 0) {
      int status = 3;
      try {
        status = body();
      } catch (...) {
      }
      ::_exit(status);
    }
    int status = 0;
    if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
  }

  static unsigned mode_of(const fs::path& path) {
    struct stat info {};
    EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
    return info.st_mode & 0777;
  }

  fs::path root_;
  std::string path_;
};

TEST_F(DataFileTest, DirectoryAndFilesArePrivateWhateverTheUmask) {
  const mode_t old_umask = ::umask(0);  // the most permissive umask: 0666 files, 0777 dirs
  {
    auto store = open();
    const auto session = store->open_session("alice", std::chrono::seconds(30));
    ASSERT_TRUE(store->try_grant("k", "alice", session.session_id,
                                 GrantRequest::exclusive(std::chrono::seconds(30))));
    EXPECT_EQ(mode_of(root_ / "data"), 0700u);
    EXPECT_EQ(mode_of(root_ / "data" / "nested"), 0700u);
    for (const char* suffix : {"", "-wal", "-shm"}) {
      EXPECT_EQ(mode_of(path_ + suffix), 0600u) << suffix;
    }
  }
  ::umask(old_umask);
}

TEST_F(DataFileTest, SecondStoreOnTheSameFileRefusesToOpen) {
  auto first = open();
  try {
    auto second = open();
    FAIL() << "a second store opened the same file";
  } catch (const UnavailableError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("in use by another dlockd"), std::string::npos) << message;
    EXPECT_NE(message.find(path_), std::string::npos) << message;
  }
  // The first store is untouched by the refused open.
  const auto session = first->open_session("alice", std::chrono::seconds(30));
  EXPECT_TRUE(first->try_grant("k", "alice", session.session_id,
                               GrantRequest::exclusive(std::chrono::seconds(30))));
  first.reset();
  // Released with the store: the next one opens and sees the data.
  auto again = open();
  EXPECT_TRUE(again->read("k").has_value());
}

// A database written before dlockd made its files private (or copied in by hand), left with
// its -wal and -shm by a dlockd that did not close: 0644 each. Opening takes the group's and
// others' bits off all three, and loses nothing.
TEST_F(DataFileTest, ExistingFilesOthersCanReadAreMadePrivate) {
  ASSERT_EQ(in_child([this] {
              auto store = open();
              const auto session = store->open_session("alice", std::chrono::seconds(30));
              const bool granted =
                  store
                      ->try_grant("k", "alice", session.session_id,
                                  GrantRequest::exclusive(std::chrono::seconds(30)))
                      .has_value();
              ::_exit(granted ? 0 : 1);  // without closing the store: the -wal and -shm stay
              return 1;
            }),
            0);
  for (const char* suffix : {"", "-wal", "-shm"}) {
    ASSERT_TRUE(fs::exists(path_ + suffix)) << suffix;
    ASSERT_EQ(::chmod((path_ + suffix).c_str(), 0644), 0) << suffix;
  }
  auto store = open();
  for (const char* suffix : {"", "-wal", "-shm"}) {
    EXPECT_EQ(mode_of(path_ + suffix), 0600u) << suffix;
  }
  EXPECT_TRUE(store->read("k").has_value());
}

// One dlockd cannot take the mode away (the file belongs to another user): it refuses to open,
// naming the file and the fix, rather than serve from a file others can read.
TEST_F(DataFileTest, AFileThatCannotBeMadePrivateIsRefusedWithTheFix) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give the file to another user";
  { open(); }
  // Reachable and writable by "nobody", owned by root: nobody may not chmod it.
  for (const fs::path& directory : {root_, root_ / "data", root_ / "data" / "nested"}) {
    ASSERT_EQ(::chmod(directory.c_str(), 0755), 0);
  }
  ASSERT_EQ(::chmod(path_.c_str(), 0666), 0);
  const std::string expected = path_ + " has mode 0666";
  EXPECT_EQ(in_child([&] {
              if (::setgid(65534) != 0 || ::setuid(65534) != 0) return 4;
              try {
                open();
                return 1;
              } catch (const UnavailableError& error) {
                const std::string message = error.what();
                return message.find(expected) != std::string::npos &&
                               message.find("chmod 600 " + path_) != std::string::npos
                           ? 0
                           : 2;
              }
            }),
            0);
  EXPECT_EQ(mode_of(path_), 0666u);
}

// The lock is on the database file itself: removing or replacing the lock file of earlier
// versions ("<db>.lock", which a second dlockd used to lock afresh), or reaching the database by
// another path, does not let a second store open it.
TEST_F(DataFileTest, SecondStoreIsRefusedWhateverBecameOfTheLockFile) {
  auto first = open();
  fs::remove(path_ + ".lock");
  std::ofstream(path_ + ".lock").close();
  const auto expect_refused = [this](const std::string& path) {
    try {
      auto second = make_sqlite_store({path, TtlLimits{}, std::chrono::milliseconds(200)});
      ADD_FAILURE() << "a second store opened " << path;
    } catch (const UnavailableError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("in use by another dlockd"), std::string::npos) << message;
      EXPECT_NE(message.find(path), std::string::npos) << message;
    }
  };
  expect_refused(path_);
  fs::remove(path_ + ".lock");
  expect_refused(path_);
  const std::string alias = (root_ / "alias.db").string();
  fs::create_symlink(path_, alias);
  expect_refused(alias);
  const auto session = first->open_session("alice", std::chrono::seconds(30));
  EXPECT_TRUE(first->try_grant("k", "alice", session.session_id,
                               GrantRequest::exclusive(std::chrono::seconds(30))));
}

}  // namespace
}  // namespace dlock::store::sqlite
