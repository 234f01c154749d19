#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "dlock/lock_store.h"

namespace dlock::store::etcd {

struct EtcdStoreOptions {
  // etcd.endpoints: comma-separated client URLs of the cluster's members.
  std::string endpoints = "http://127.0.0.1:2379";
  // The deadline of every etcd call; exceeding it throws UnavailableError.
  std::chrono::milliseconds call_timeout{5000};
  TtlLimits limits;
  // Test seam: runs after a granting Txn answered and before try_grant reads the answer, so a
  // test can slip unrelated writes in where a token re-read would see them. Never set in
  // production.
  std::function<void(std::string_view key)> after_grant_for_test;
  // etcd.cacert, etcd.cert, etcd.key: PEM files for https:// endpoints (etcd_client.h).
  std::string cacert = {};
  std::string cert = {};
  std::string key = {};
};

// The etcd store (backend_id "etcd", docs/adr/0006-etcd-store.md). A lock is one key,
// /dlock/<namespace>/lock/<key>, on a lease of its own (its TTL); its fencing token is the
// revision of the Txn that granted it. Sessions are etcd leases under random IDs (C2).
// Construction does not contact etcd: an unreachable cluster shows up as UnavailableError on
// the first call.
// Returned wrapped in util::ValidatingBackend, which checks every argument against `limits`.
BackendPtr make_etcd_store(const EtcdStoreOptions& options);

}  // namespace dlock::store::etcd
