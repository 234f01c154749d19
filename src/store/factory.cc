#include "store/factory.h"

#include <functional>
#include <string>
#include <string_view>

#include "store/sqlite/sqlite_store.h"
#ifdef DLOCK_WITH_PG
#include "store/pg/pg_store.h"
#endif
#ifdef DLOCK_WITH_ETCD
#include "store/etcd/etcd_store.h"
#endif
#include "util/backend_names.h"

namespace dlock::store {
namespace {

struct Entry {
  std::string_view name;
  std::function<BackendPtr(const StoreConfig&)> make;
};

BackendPtr make_sqlite(const StoreConfig& config) {
  return sqlite::make_sqlite_store({config.sqlite_path, config.limits, config.call_timeout});
}

#ifdef DLOCK_WITH_PG
BackendPtr make_pg(const StoreConfig& config) {
  if (config.pg_url.empty()) {
    throw InvalidArgumentError("pg.url", "pg.url is required when lock.backend=pg");
  }
  return pg::make_pg_store({config.pg_url, config.pool_size, config.call_timeout, config.limits});
}
#endif

#ifdef DLOCK_WITH_ETCD
BackendPtr make_etcd(const StoreConfig& config) {
  return etcd::make_etcd_store({config.etcd_endpoints,
                                config.call_timeout,
                                config.limits,
                                {},
                                config.etcd_cacert,
                                config.etcd_cert,
                                config.etcd_key});
}
#endif

const Entry kBackends[] = {
    {backend_names::kSqlite, make_sqlite},
#ifdef DLOCK_WITH_PG
    {backend_names::kPg, make_pg},
#endif
#ifdef DLOCK_WITH_ETCD
    {backend_names::kEtcd, make_etcd},
#endif
};

}  // namespace

const char* known_backends() {
  static const std::string kNames = [] {
    std::string names;
    for (const auto& entry : kBackends) {
      if (!names.empty()) names += ", ";
      names += entry.name;
    }
    return names;
  }();
  return kNames.c_str();
}

BackendPtr make_backend(const StoreConfig& config) {
  for (const auto& entry : kBackends) {
    if (entry.name == config.backend) return entry.make(config);
  }
  throw InvalidArgumentError("lock.backend", "lock.backend must be one of " +
                                                 std::string(known_backends()) + ", got '" +
                                                 config.backend + "'");
}

}  // namespace dlock::store
