#pragma once

// What the conformance matrix needs from each backend's test environment: a way to build the
// store over real storage, to take that storage away (outage), and to reach it directly.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/lock_store.h"

namespace dlock::testing {

class BackendHarness {
 public:
  BackendHarness() = default;
  BackendHarness(const BackendHarness&) = delete;
  BackendHarness& operator=(const BackendHarness&) = delete;
  virtual ~BackendHarness() = default;

  // A new store over this harness's storage. Stores made by one harness share the storage, as
  // several dlockd processes share one database.
  virtual BackendPtr make_backend(const TtlLimits& limits) = 0;

  // Makes the storage unable to answer (stops the database process, locks the file) until
  // end_outage(). Calls in between must fail with UnavailableError.
  virtual void begin_outage() = 0;
  virtual void end_outage() = 0;

  // Deletes `key` directly in the storage, bypassing the store (a "raw delete").
  virtual void raw_delete(std::string_view key) = 0;
};

// The backends this test binary was built with, e.g. {"sqlite", "pg"}.
std::vector<std::string> conformance_backends();

// The harness for `backend`, created on first use and shared for the whole test binary
// (one PostgreSQL / etcd process per binary). Throws for an unknown backend.
BackendHarness& harness_for(std::string_view backend);

}  // namespace dlock::testing
