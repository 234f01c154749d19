#include "store/sqlite/data_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
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

std::string octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Takes the group's and others' permissions off the file open as `fd` (0644 becomes 0600):
// a database written before dlockd made its files private, or copied in by hand, is not left
// readable by every local user.
void make_private(int fd, const std::string& path) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) fail("cannot stat " + path, errno);
  if ((info.st_mode & 077) == 0) return;
  if (::fchmod(fd, info.st_mode & 0700) != 0) {
    const int error = errno;
    throw UnavailableError(
        "sqlite: " + path + " has mode " + octal(info.st_mode) +
        " (others may read or write it) and cannot be made private: " + std::strerror(error) +
        "; run chmod 600 " + path + " as its owner (or chown it to the user dlockd runs as)");
  }
}

// The same for SQLite's -wal and -shm files when they exist (left by a dlockd that did not
// close cleanly, or by another program), before SQLite opens them again.
void make_private_if_present(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return;
    fail("cannot open " + path, errno);
  }
  try {
    make_private(fd, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

bool is_special(const std::string& path) {
  return path.empty() || path == ":memory:" || path.rfind("file:", 0) == 0;
}

}  // namespace

DataFile::DataFile(const std::string& path) : path_(path) {
  if (is_special(path_)) return;
  const std::filesystem::path file(path_);
  if (file.has_parent_path()) make_private_directories(file.parent_path());
  // Created 0600 when missing (before SQLite opens it, so the database and its -wal/-shm are
  // never readable by others, whatever the umask); O_CLOEXEC so no child inherits the lock.
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) fail("cannot create database file " + path_, errno);
  try {
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) {
        throw UnavailableError("sqlite: " + path_ +
                               " is in use by another dlockd (it holds the lock on the file); "
                               "the embedded store serves one process: stop the other one or "
                               "use another sqlite.path");
      }
      fail("cannot lock " + path_, errno);
    }
    make_private(fd_, path_);
    // SQLite names them after the database's real path (symbolic links resolved).
    const std::string real = std::filesystem::canonical(file).string();
    make_private_if_present(real + "-wal");
    make_private_if_present(real + "-shm");
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

DataFile::~DataFile() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace dlock::store::sqlite
