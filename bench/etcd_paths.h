#pragma once

// etcd rows of path 1 and the anchor, over native gRPC with the project's proto subset:
// raw = Txn(If CreateRevision(key) == 0 Then Put(key, lease) Else Range(key)) + DeleteRange;
// anchor = etcd's own lock service, v3lock Lock(name, lease) + Unlock(key), which is what
// `etcdctl lock` uses. One channel shared by every client (as clientv3 does), a thread per
// client, one lease per client granted before the clock starts.

#include <chrono>
#include <string>

#include "bench.h"

namespace dlock::bench {

Measurement etcd_raw_pairs(const std::string& endpoints, int clients,
                           std::chrono::milliseconds duration);
Measurement etcd_lock_service_pairs(const std::string& endpoints, int clients,
                                    std::chrono::milliseconds duration);
// Hot key: raw = every client retries the Txn in a loop; anchor = every client blocks in
// v3lock Lock on one name and unlocks when granted.
Measurement etcd_raw_hot(const std::string& endpoints, int clients,
                         std::chrono::milliseconds duration);
Measurement etcd_lock_service_hot(const std::string& endpoints, int clients,
                                  std::chrono::milliseconds duration);

}  // namespace dlock::bench
