// The embedded store's files (store/sqlite/data_file.h, contract C6): a missing data directory
// is created 0700 and the database, -wal and -shm files 0600 whatever the umask, and a second
// store on the same file refuses to open, naming it, until the first one is closed.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
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
    ASSERT_TRUE(store->try_insert("k", "alice", session.session_id, std::chrono::seconds(30)));
    EXPECT_EQ(mode_of(root_ / "data"), 0700u);
    EXPECT_EQ(mode_of(root_ / "data" / "nested"), 0700u);
    for (const char* suffix : {"", "-wal", "-shm", ".lock"}) {
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
  EXPECT_TRUE(first->try_insert("k", "alice", session.session_id, std::chrono::seconds(30)));
  first.reset();
  // Released with the store: the next one opens and sees the data.
  auto again = open();
  EXPECT_TRUE(again->read("k").has_value());
}

}  // namespace
}  // namespace dlock::store::sqlite
