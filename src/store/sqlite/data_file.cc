#include "store/sqlite/data_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "dlock/errors.h"

namespace dlock::store::sqlite {
namespace {

[[noreturn]] void fail(const std::string& what, int error) {
  throw UnavailableError("sqlite: " + what + ": " + std::strerror(error));
}

// mkdir -p with mode 0700 for every directory it creates (existing ones are left alone).
void make_private_directories(const std::filesystem::path& directory) {
  std::vector<std::filesystem::path> missing;
  for (auto current = directory; !current.empty() && !std::filesystem::exists(current);
       current = current.parent_path()) {
    missing.push_back(current);
    if (current == current.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), 0700) != 0 && errno != EEXIST) {
      fail("cannot create data directory " + it->string(), errno);
    }
  }
}

// Opens (creating 0600 if missing) `path`; O_CLOEXEC so no child inherits the lock.
int open_private(const std::string& path, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) fail("cannot create " + what + " " + path, errno);
  return fd;
}

bool is_special(const std::string& path) {
  return path.empty() || path == ":memory:" || path.rfind("file:", 0) == 0;
}

}  // namespace

DataFile::DataFile(const std::string& path) : path_(path) {
  if (is_special(path_)) return;
  const std::filesystem::path file(path_);
  if (file.has_parent_path()) make_private_directories(file.parent_path());
  lock_fd_ = open_private(lock_path(), "lock file");
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    ::close(lock_fd_);
    lock_fd_ = -1;
    if (error == EWOULDBLOCK) {
      throw UnavailableError("sqlite: " + path_ +
                             " is in use by another dlockd (it holds the lock on " + lock_path() +
                             "); the embedded store serves one process: stop the other one or "
                             "use another sqlite.path");
    }
    fail("cannot lock " + lock_path(), error);
  }
  // Created before SQLite opens it, so the database (and its -wal/-shm, which SQLite creates
  // with the database's mode) is never readable by others, whatever the umask.
  ::close(open_private(path_, "database file"));
}

DataFile::~DataFile() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

}  // namespace dlock::store::sqlite
