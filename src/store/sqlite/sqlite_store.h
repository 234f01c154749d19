#pragma once

#include <chrono>
#include <string>

#include "dlock/lock_store.h"

namespace dlock::store::sqlite {

struct SqliteStoreOptions {
  // The database file; its parent directory is created (0700) when missing, the file 0600, and
  // one store at a time may have it open (store/sqlite/data_file.h).
  std::string path = "./dlock-data/dlock.db";
  TtlLimits limits;
  // How long a call waits for another process's write lock before it reports unavailable.
  std::chrono::milliseconds busy_timeout{5000};
};

// The embedded store (backend_id "sqlite"): one file, WAL journal with synchronous=FULL so a
// grant's token is on disk before the grant returns (docs/adr/0005-embedded-default-sqlite.md).
// Returned wrapped in util::ValidatingBackend, which checks every argument against `limits`.
BackendPtr make_sqlite_store(const SqliteStoreOptions& options);

}  // namespace dlock::store::sqlite
