#include "support/dlockd_backends.h"

#include <mutex>
#include <set>

namespace dlock::testing {

std::vector<std::string> dlockd_backends() {
  std::vector<std::string> names = {"sqlite"};
#ifdef DLOCK_WITH_PG
  names.push_back("pg");
#endif
#ifdef DLOCK_WITH_ETCD
  names.push_back("etcd");
#endif
  return names;
}

#ifdef DLOCK_WITH_PG
PostgresServer& shared_postgres() {
  static PostgresServer server;
  return server;
}
#endif

#ifdef DLOCK_WITH_ETCD
EtcdCluster& shared_etcd() {
  static EtcdCluster cluster(1);
  return cluster;
}
#endif

DlockdOptions dlockd_options(const std::string& backend, const std::string& pg_database) {
  DlockdOptions options;
  options.backend = backend;
#ifdef DLOCK_WITH_PG
  if (backend == "pg") {
    static std::mutex mutex;
    static std::set<std::string> created;
    const std::lock_guard<std::mutex> lock(mutex);
    if (created.insert(pg_database).second) shared_postgres().ensure_database(pg_database);
    options.pg_url = shared_postgres().url(pg_database);
  }
#else
  (void)pg_database;
#endif
#ifdef DLOCK_WITH_ETCD
  if (backend == "etcd") options.etcd_endpoints = shared_etcd().endpoints();
#endif
  return options;
}

}  // namespace dlock::testing
