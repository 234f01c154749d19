#pragma once

// The one-shot `dlockd --etcd-raise-revision-to N` (ADR-0010): after an etcd snapshot restore,
// which rewinds the revision (the etcd store's fencing token), write a scratch key until the
// cluster's revision is at least N, so every later token is greater than every token issued
// before the restore. etcd 3.4 has no `--bump-revision`; each write moves the revision by one.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace dlock::exe {

struct RaiseReport {
  std::int64_t from_revision = 0;
  std::int64_t to_revision = 0;
  std::chrono::steady_clock::duration elapsed{};
};

// Raises the revision of the cluster at `endpoints` to at least `target` with `concurrency`
// writers, printing progress to `progress` about once a second. Idempotent: a cluster already
// at or past `target` gets no write. Throws a dlock::Error when etcd fails (run it again: it
// continues from where the cluster is).
RaiseReport raise_etcd_revision(const std::string& endpoints,
                                std::chrono::milliseconds call_timeout, std::int64_t target,
                                std::size_t concurrency, std::FILE* progress);

}  // namespace dlock::exe
