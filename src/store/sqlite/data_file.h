#pragma once

// The embedded store's files belong to one dlockd (contract C6, "Files and processes"):
// - private: a missing data directory is created 0700 and a missing database file 0600 (SQLite
//   gives the -wal and -shm files the mode of the database file, so they are 0600 too);
// - exclusive: an flock(2) on "<database>.lock", held for the object's lifetime, makes a second
//   store (a second dlockd) on the same file refuse to open instead of serving waiters that never
//   hear the first one's releases.
// ":memory:" and "file:" URIs are left to SQLite (nothing to protect or to share).

#include <string>

namespace dlock::store::sqlite {

class DataFile {
 public:
  // Throws UnavailableError naming the file when another process (or another DataFile of this
  // process) holds it, or when the directory or lock file cannot be created.
  explicit DataFile(const std::string& path);
  DataFile(const DataFile&) = delete;
  DataFile& operator=(const DataFile&) = delete;
  ~DataFile();

  const std::string& path() const { return path_; }
  std::string lock_path() const { return path_ + ".lock"; }

 private:
  std::string path_;
  int lock_fd_ = -1;
};

}  // namespace dlock::store::sqlite
