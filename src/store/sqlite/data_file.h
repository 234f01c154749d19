#pragma once

// The embedded store's files belong to one dlockd (contract C5, `sqlite.path`):
// - private: a missing data directory is created 0700 and a missing database file 0600 (SQLite
//   gives the -wal and -shm files the mode of the database file, so they are 0600 too); an
//   existing database, -wal or -shm file that others may read or write loses those bits at
//   open (0644 becomes 0600), or the open is refused, naming the file, when that fails;
// - exclusive: an flock(2) on the database file itself, held for the object's lifetime, makes a
//   second store (a second dlockd) on the same file refuse to open instead of serving waiters
//   that never hear the first one's releases. The file cannot be removed from under the lock
//   without removing the database (a separate lock file could: "<database>.lock", used before,
//   is no longer created nor looked at). SQLite's own locks are fcntl(2) locks, which flock
//   locks do not interact with on a local file system.
// ":memory:" and "file:" URIs are left to SQLite (nothing to protect or to share).

#include <string>

namespace dlock::store::sqlite {

class DataFile {
 public:
  // Throws UnavailableError naming the file when another process (or another DataFile of this
  // process) holds it, when the directory or database file cannot be created, or when an
  // existing file cannot be made private.
  explicit DataFile(const std::string& path);
  DataFile(const DataFile&) = delete;
  DataFile& operator=(const DataFile&) = delete;
  ~DataFile();

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  // The database file, open (and flock'ed) while the store is: closed only after SQLite has
  // closed its own descriptors, as closing a descriptor of the file drops the process's fcntl
  // locks on it.
  int fd_ = -1;
};

}  // namespace dlock::store::sqlite
