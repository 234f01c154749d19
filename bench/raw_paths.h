#pragma once

// Path 1 (raw backend operation) and the PostgreSQL advisory-lock anchor: the bench sends the
// acquire and release statements itself (libpq / SQLite C API), no dlock code in the loop.

#include <chrono>
#include <string>
#include <vector>

#include "bench.h"

namespace dlock::bench {

// A session the raw clients grant to (opened beforehand, so the session trigger passes).
struct RawSession {
  std::string owner_id;
  std::string session_id;
};

// Uncontended pairs: client i acquires and releases its own key "default/bench-raw-<i>".
Measurement pg_raw_pairs(const std::string& url, const std::vector<RawSession>& sessions,
                         int clients, std::chrono::milliseconds duration);
// pg_advisory_lock / pg_advisory_unlock on a per-client id, one connection per client.
Measurement pg_advisory_pairs(const std::string& url, int clients,
                              std::chrono::milliseconds duration);
// All clients block in pg_advisory_lock on one id and unlock when granted.
Measurement pg_advisory_hot(const std::string& url, int clients,
                            std::chrono::milliseconds duration);
// Hot key, the naive recipe: every client retries the acquire statement in a loop (no wait
// queue) and releases at once when granted; attempts/ops is the herd's writes per grant.
Measurement pg_raw_hot(const std::string& url, const std::vector<RawSession>& sessions, int clients,
                       std::chrono::milliseconds duration);
// VACUUM of the lock tables between measurements, so that a path measured later does not pay
// for the dead rows the earlier paths' insert/delete churn left behind.
void pg_vacuum(const std::string& url);
// The sequence's last_value (each pg acquire attempt takes at least one nextval).
long long pg_token_sequence(const std::string& url);

// Grows the database's WAL file to its working size once (one large write, then a checkpoint),
// so that no measured path pays for file growth (an fdatasync that must also commit ext4
// metadata) and the paths measured first are not penalised.
void sqlite_presize_wal(const std::string& path);

Measurement sqlite_raw_pairs(const std::string& path, const std::vector<RawSession>& sessions,
                             int clients, std::chrono::milliseconds duration);
Measurement sqlite_raw_hot(const std::string& path, const std::vector<RawSession>& sessions,
                           int clients, std::chrono::milliseconds duration);

}  // namespace dlock::bench
