#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "dlock/lock_store.h"

namespace dlock::store::pg {

struct PgStoreOptions {
  // libpq connection URL or keyword string, e.g. postgresql://dlock@127.0.0.1:5432/dlock.
  std::string url;
  std::size_t pool_size = 8;
  // Bound on every backend call (connect, statement, waiting for a pooled connection).
  std::chrono::milliseconds call_timeout{5000};
  TtlLimits limits;
};

// The PostgreSQL store (backend_id "pg"). Applies the versioned migrations on construction
// (serialised by an advisory lock, so several servers may start at once), then serves every
// call from a small pool of prepared connections. The lease clock is the database's now().
// Returned wrapped in util::ValidatingBackend, which checks every argument against `limits`.
BackendPtr make_pg_store(const PgStoreOptions& options);

}  // namespace dlock::store::pg
