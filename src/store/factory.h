#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "dlock/lock_store.h"

namespace dlock::store {

// Everything needed to construct any backend; filled from configuration (C5).
struct StoreConfig {
  std::string backend = "sqlite";  // lock.backend: sqlite | pg | etcd
  std::string sqlite_path = "./dlock-data/dlock.db";
  std::string pg_url;
  std::string etcd_endpoints = "http://127.0.0.1:2379";
  // PEM files for https:// etcd endpoints (empty = not given).
  std::string etcd_cacert = {};
  std::string etcd_cert = {};
  std::string etcd_key = {};
  std::size_t pool_size = 8;
  std::chrono::milliseconds call_timeout{5000};
  TtlLimits limits;
};

// The backends this build knows, in the order --help lists them.
const char* known_backends();

// Constructs the backend named by config.backend from an explicit table. Throws
// InvalidArgumentError("lock.backend") for an unknown or not-built backend.
BackendPtr make_backend(const StoreConfig& config);

}  // namespace dlock::store
