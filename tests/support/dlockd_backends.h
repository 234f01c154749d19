#pragma once

// The backends a dlockd-level test binary runs its servers on: one PostgreSQL and one etcd per
// binary, started on first use and stopped at exit, and the DlockdOptions that point a dlockd at
// one of them. The store-level conformance matrix has its own harnesses (backend_harness.h).

#include <string>
#include <vector>

#include "support/dlockd_process.h"
#ifdef DLOCK_WITH_PG
#include "support/postgres_server.h"
#endif
#ifdef DLOCK_WITH_ETCD
#include "support/etcd_server.h"
#endif

namespace dlock::testing {

// "sqlite", then "pg" and "etcd" when they are built in: the parameters of a dlockd test suite.
std::vector<std::string> dlockd_backends();

#ifdef DLOCK_WITH_PG
// This binary's PostgreSQL, started on first use.
PostgresServer& shared_postgres();
#endif
#ifdef DLOCK_WITH_ETCD
// This binary's one-member etcd, started on first use.
EtcdCluster& shared_etcd();
#endif

// Options for a dlockd on `backend`: pg uses database `pg_database` of shared_postgres()
// (created on first use), etcd uses shared_etcd(), sqlite a fresh file (DlockdOptions' default).
DlockdOptions dlockd_options(const std::string& backend, const std::string& pg_database);

}  // namespace dlock::testing
