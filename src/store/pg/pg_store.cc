#include "store/pg/pg_store.h"

#include <string>
#include <utility>
#include <vector>

#include "store/pg/pg_batch.h"
#include "store/pg/pg_listener.h"
#include "store/pg/pg_pool.h"
#include "store/pg/pg_statements.h"
#include "util/backend_names.h"
#include "util/ids.h"
#include "util/lock_lost.h"
#include "util/release_hub.h"
#include "util/time.h"
#include "util/validating_backend.h"

namespace dlock::store::pg {

const std::vector<std::pair<int, std::string_view>>& migrations();

namespace {

// Any constant works; it only has to be the same for every dlockd sharing the database.
constexpr const char* kMigrationLockId = "7275364001";

// The restore floor (ADR-0010, migrations/002_token_floor.sql): run when the store opens and on
// every new pooled connection, because a restore can happen under a running dlockd (the restore
// breaks its connections, and the pool reconnects).
constexpr const char* kRaiseTokenFloor = "SELECT dlock_raise_token_floor()";

}  // namespace

const std::vector<PreparedStatement>& prepared_statements() {
  static const std::vector<PreparedStatement> kStatements = {
      {"acquire", sql::kAcquire, sql::kAcquireColumns.list()},
      {"acquire_leader", sql::kAcquireLeader, sql::kAcquireLeaderColumns.list()},
      {"proclaim", sql::kProclaim, sql::kProclaimColumns.list()},
      {"read", sql::kRead, sql::kReadColumns.list()},
      {"list", sql::kList, sql::kListColumns.list()},
      {"extend", sql::kExtend, sql::kExtendColumns.list()},
      {"check_session_bound", sql::kCheckSessionBound, sql::kCheckSessionBoundColumns.list()},
      {"delete_if_owner", sql::kDeleteIfOwner, sql::kDeleteIfOwnerColumns.list()},
      {"handover", sql::kHandover, sql::kHandoverColumns.list()},
      {"revoke", sql::kRevoke, sql::kRevokeColumns.list()},
      {"list_delays", sql::kListDelays, sql::kListDelaysColumns.list()},
      {"clear_delay", sql::kClearDelay, sql::kClearDelayColumns.list()},
      {"reap_delays", sql::kReapDelays, sql::kReapDelaysColumns.list()},
      {"reap_locks", sql::kReapLocks, sql::kReapLocksColumns.list()},
      {"reap_sessions", sql::kReapSessions, sql::kReapSessionsColumns.list()},
      {"open_session", sql::kOpenSession, sql::kOpenSessionColumns.list()},
      {"heartbeat", sql::kHeartbeat, sql::kHeartbeatColumns.list()},
      {"heartbeat_many", sql::kHeartbeatMany, sql::kHeartbeatManyColumns.list()},
      {"get_session", sql::kGetSession, sql::kGetSessionColumns.list()},
      {"list_sessions", sql::kListSessions, sql::kListSessionsColumns.list()},
      {"session_grants", sql::kSessionGrants, sql::kSessionGrantsColumns.list()},
      {"close_session", sql::kCloseSession, sql::kCloseSessionColumns.list()},
      {"release_session_locks", sql::kReleaseSessionLocks, sql::kReleaseSessionLocksColumns.list()},
      {"read_holders", sql::kReadHolders, sql::kReadHoldersColumns.list()},
      {"grant_holder", sql::kGrantHolder, sql::kGrantHolderColumns.list()},
      {"extend_holder", sql::kExtendHolder, sql::kExtendHolderColumns.list()},
      {"reap_holders", sql::kReapHolders, sql::kReapHoldersColumns.list()},
      {"release_session_holders", sql::kReleaseSessionHolders,
       sql::kReleaseSessionHoldersColumns.list()},
  };
  return kStatements;
}

namespace {

// Each reader is given the statement's columns (sql::k...Columns) and reads its columns by name.

// A row with sql::kLockRow's columns.
template <const auto& columns>
LockInfo lock_info_from(const PgResult& result, int row) {
  return LockInfo{result.text(row, columns["key"]),
                  result.text(row, columns["owner_id"]),
                  result.text(row, columns["session_id"]),
                  static_cast<FencingToken>(result.int64(row, columns["fencing_token"])),
                  util::from_unix_micros(result.int64(row, columns["acquired_us"])),
                  util::from_unix_micros(result.int64(row, columns["expires_us"])),
                  result.boolean(row, columns["session_bound"])};
}

// A row with sql::kGrantRow's columns.
template <const auto& columns>
LockInfo grant_info_from(const PgResult& result, int row) {
  LockInfo info = lock_info_from<columns>(result, row);
  const auto mode = result.text(row, columns["mode"]);
  info.mode = mode == "shared"   ? HoldMode::kShared
              : mode == "permit" ? HoldMode::kPermit
                                 : HoldMode::kExclusive;
  info.limit = static_cast<std::uint32_t>(result.int64(row, columns["permit_limit"]));
  return info;
}

// A row with sql::kReadRow's columns: the value is NULL but for a leader (ADR-0020).
template <const auto& columns>
LockInfo read_info_from(const PgResult& result, int row) {
  LockInfo info = grant_info_from<columns>(result, row);
  if (!result.is_null(row, columns["value"])) info.value = result.text(row, columns["value"]);
  return info;
}

// The handle of a grant from a row holding its expiry and the database's now() (columns
// expiry_us and now_us): a session-bound grant's deadline is its session's, counted from
// `sent_at`.
template <const auto& columns>
LockHandle handle_from(std::string_view key, std::string_view owner_id, std::string_view session_id,
                       FencingToken token, const LockLease& lease, SteadyClock::time_point sent_at,
                       const PgResult& result) {
  const std::int64_t expires_us = result.int64(0, columns["expiry_us"]);
  const auto lifetime =
      lease.session_bound()
          ? std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::microseconds(expires_us - result.int64(0, columns["now_us"])))
          : lease.ttl();
  return LockHandle{std::string(key),        std::string(owner_id),
                    std::string(session_id), token,
                    sent_at + lifetime,      util::from_unix_micros(expires_us),
                    lease.session_bound()};
}

std::string token_text(FencingToken token) { return std::to_string(token); }
std::string ms_text(std::chrono::milliseconds ttl) { return std::to_string(ttl.count()); }
// kAcquire's and kHandover's TTL parameter: 0 asks for a session-bound grant.
std::string lease_text(const LockLease& lease) {
  return lease.session_bound() ? "0" : ms_text(lease.ttl());
}

// Applies pending migrations in one transaction, serialised across servers by an advisory
// transaction lock: a second server starting at the same time waits, then finds them applied.
void migrate(const PgStoreOptions& options) {
  PgConnection connection(options.url, options.call_timeout, {});
  connection.run("BEGIN");
  try {
    connection.run(std::string("SELECT pg_advisory_xact_lock(") + kMigrationLockId + ")");
    connection.run(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, "
        "applied_at timestamptz NOT NULL DEFAULT now())");
    const auto applied =
        connection.run("SELECT coalesce(max(version), 0) FROM schema_migrations").int64(0, 0);
    for (const auto& [version, text] : migrations()) {
      if (version <= applied) continue;
      connection.run(std::string(text));
      connection.run("INSERT INTO schema_migrations (version) VALUES (" + std::to_string(version) +
                     ")");
    }
    connection.run(kRaiseTokenFloor);
    connection.run("COMMIT");
  } catch (...) {
    if (connection.healthy()) connection.run("ROLLBACK");
    throw;
  }
}

class PgStore final : public Backend {
 public:
  explicit PgStore(const PgStoreOptions& options)
      : options_(options),
        pool_((migrate(options), options.url), options.pool_size, options.call_timeout,
              prepared_statements(), kRaiseTokenFloor),
        writes_(pool_) {}

  std::optional<LockHandle> try_grant(std::string_view key, std::string_view owner_id,
                                      std::string_view session_id,
                                      const GrantRequest& request) override {
    if (request.holder()) return insert_holder(key, owner_id, session_id, request);
    if (const auto value = request.leader_value()) {
      return insert_leader(key, owner_id, session_id, request.lease(), *value);
    }
    return insert_exclusive(key, owner_id, session_id, request.lease());
  }

  std::optional<LockHandle> insert_exclusive(std::string_view key, std::string_view owner_id,
                                             std::string_view session_id, LockLease lease) {
    const auto sent_at = SteadyClock::now();
    const auto granted = writes_.execute("acquire", {key, owner_id, session_id, lease_text(lease)});
    return granted_handle(key, owner_id, session_id, lease, sent_at, granted);
  }

  // Elections (ADR-0020): kAcquire with the value, the same one statement (kAcquireLeader).
  std::optional<LockHandle> insert_leader(std::string_view key, std::string_view owner_id,
                                          std::string_view session_id, LockLease lease,
                                          std::string_view value) {
    const auto sent_at = SteadyClock::now();
    const auto granted =
        writes_.execute("acquire_leader", {key, owner_id, session_id, lease_text(lease), value});
    return granted_handle(key, owner_id, session_id, lease, sent_at, granted);
  }

  LockInfo proclaim(const GrantRef& grant, std::string_view value) override {
    const auto result = writes_.execute("proclaim", {grant.key, grant.owner_id, grant.session_id,
                                                     token_text(grant.fencing_token), value});
    if (result.rows() == 0) throw util::lock_lost(grant.key, grant.fencing_token);
    return read_info_from<sql::kProclaimColumns>(result, 0);
  }

  // Holder sets (ADR-0020): one call of dlock_grant_holder (migrations/004_holder_sets.sql).
  std::optional<LockHandle> insert_holder(std::string_view key, std::string_view owner_id,
                                          std::string_view session_id,
                                          const GrantRequest& request) {
    const LockLease& lease = request.lease();
    const auto sent_at = SteadyClock::now();
    const auto granted = writes_.execute(
        "grant_holder", {key, owner_id, session_id, lease_text(lease), to_string(request.mode()),
                         std::to_string(request.limit())});
    if (granted.rows() == 0) return std::nullopt;  // held: a decision
    auto handle = handle_from<sql::kGrantHolderColumns>(
        key, owner_id, session_id,
        static_cast<FencingToken>(granted.int64(0, sql::kGrantHolderColumns["fencing_token"])),
        lease, sent_at, granted);
    handle.mode = request.mode();
    return handle;
  }

  std::vector<LockInfo> read_holders(std::string_view key) override {
    const auto result = pool_.lease()->execute("read_holders", {key});
    std::vector<LockInfo> holders;
    for (int row = 0; row < result.rows(); ++row) {
      holders.push_back(read_info_from<sql::kReadHoldersColumns>(result, row));
    }
    return holders;
  }

  std::optional<LockInfo> read(std::string_view key) override {
    const auto result = pool_.lease()->execute("read", {key});
    if (result.rows() == 0) return std::nullopt;
    return read_info_from<sql::kReadColumns>(result, 0);
  }

  std::vector<LockInfo> list(std::string_view prefix, const ListAfter& after,
                             std::size_t limit) override {
    const auto result = pool_.lease()->execute(
        "list", {prefix, std::to_string(limit), after.key,
                 std::to_string(static_cast<std::int64_t>(after.fencing_token))});
    std::vector<LockInfo> locks;
    for (int row = 0; row < result.rows(); ++row) {
      locks.push_back(read_info_from<sql::kListColumns>(result, row));
    }
    return locks;
  }

  std::vector<KeyDelay> list_delays(std::string_view prefix, std::string_view after,
                                    std::size_t limit) override {
    const auto result =
        pool_.lease()->execute("list_delays", {prefix, std::to_string(limit), after});
    std::vector<KeyDelay> delays;
    for (int row = 0; row < result.rows(); ++row) {
      delays.push_back(
          {result.text(row, sql::kListDelaysColumns["key"]),
           util::from_unix_micros(result.int64(row, sql::kListDelaysColumns["ends_us"]))});
    }
    return delays;
  }

  bool clear_delay(std::string_view key) override {
    const auto result = pool_.lease()->execute("clear_delay", {key});
    return result.rows() == 1 && result.boolean(0, sql::kClearDelayColumns["cleared"]);
  }

  LockHandle extend(const GrantRef& grant, std::chrono::milliseconds ttl) override {
    if (auto extended = extend_named(grant, ttl)) return *extended;
    throw util::lock_lost(grant.key, grant.fencing_token);
  }

  bool delete_if_owner(const GrantRef& grant) override {
    const auto result = writes_.execute(
        "delete_if_owner",
        {grant.key, grant.owner_id, grant.session_id, token_text(grant.fencing_token)});
    // One row: an exclusive grant deleted, or a shared or permit holder's release (ADR-0020),
    // NULL when that released nothing (the holder is gone, or ended and in its lock-delay).
    if (result.rows() == 0) return false;
    return !result.is_null(0, sql::kDeleteIfOwnerColumns["live"]) &&
           result.boolean(0, sql::kDeleteIfOwnerColumns["live"]);
  }

  std::optional<LockHandle> handover(const GrantRef& from, std::string_view next_owner_id,
                                     std::string_view next_session_id, LockLease lease) override {
    auto connection = pool_.lease();
    const auto sent_at = SteadyClock::now();
    try {
      const auto result = connection->execute(
          "handover", {from.key, from.owner_id, from.session_id, token_text(from.fencing_token),
                       next_owner_id, next_session_id, lease_text(lease)});
      if (result.rows() == 0) throw util::lock_lost(from.key, from.fencing_token);
      return handle_from<sql::kHandoverColumns>(
          from.key, next_owner_id, next_session_id,
          static_cast<FencingToken>(result.int64(0, sql::kHandoverColumns["fencing_token"])), lease,
          sent_at, result);
    } catch (const SessionNotFoundError&) {
      // The next session died while it waited: release `from` instead (rare path).
      const auto released = connection->execute(
          "delete_if_owner",
          {from.key, from.owner_id, from.session_id, token_text(from.fencing_token)});
      if (released.rows() == 1 && released.boolean(0, sql::kDeleteIfOwnerColumns["live"])) {
        return std::nullopt;
      }
      throw util::lock_lost(from.key, from.fencing_token);
    }
  }

  LockOutcome revoke(std::string_view key) override {
    const auto result = pool_.lease()->execute("revoke", {key});
    LockOutcome outcome;
    if (result.rows() == 1 && result.boolean(0, sql::kRevokeColumns["live"])) {
      outcome.revoked = true;
      outcome.fencing_token =
          static_cast<FencingToken>(result.int64(0, sql::kRevokeColumns["fencing_token"]));
      outcome.owner_id = result.text(0, sql::kRevokeColumns["owner_id"]);
    }
    return outcome;
  }

  ReapReport reap_expired() override {
    auto connection = pool_.lease();
    ReapReport report;
    connection->execute("reap_delays", {});  // lock-delay: ends fixed, rows kept
    const auto locks = connection->execute("reap_locks", {});
    for (int row = 0; row < locks.rows(); ++row) {
      report.expired_locks.push_back(lock_info_from<sql::kReapLocksColumns>(locks, row));
    }
    const auto holders = connection->execute("reap_holders", {});
    for (int row = 0; row < holders.rows(); ++row) {
      report.expired_locks.push_back(grant_info_from<sql::kReapHoldersColumns>(holders, row));
    }
    const auto sessions = connection->execute("reap_sessions", {});
    for (int row = 0; row < sessions.rows(); ++row) {
      report.expired_sessions.push_back(
          sessions.text(row, sql::kReapSessionsColumns["session_id"]));
    }
    return report;
  }

  ReleaseSubscriptionPtr watch_releases(std::string_view key,
                                        ReleaseCallback on_released) override {
    {
      // The LISTEN connection is opened by the first watcher, before its subscription returns.
      std::lock_guard lock(listener_mutex_);
      if (!listener_) {
        listener_ = std::make_unique<PgListener>(options_.url, options_.call_timeout, releases_);
      }
    }
    return releases_.subscribe(key, std::move(on_released));
  }

  std::string_view backend_id() const override { return backend_names::kPg; }

  using SessionRegistry::open_session;
  SessionInfo open_session(std::string_view owner_id, std::chrono::milliseconds ttl,
                           std::chrono::milliseconds lock_delay) override {
    const auto result = pool_.lease()->execute(
        "open_session", {owner_id, ms_text(ttl), util::random_id(), ms_text(lock_delay)});
    return SessionInfo{
        result.text(0, sql::kOpenSessionColumns["session_id"]), std::string(owner_id), ttl,
        util::from_unix_micros(result.int64(0, sql::kOpenSessionColumns["expires_us"])),
        lock_delay};
  }

  SessionInfo heartbeat(std::string_view session_id) override {
    const auto result = writes_.execute("heartbeat", {session_id});
    if (result.rows() == 0) throw SessionNotFoundError("session not found or expired");
    return session_from<sql::kHeartbeatColumns>(session_id, result);
  }

  std::vector<SessionInfo> list_sessions(std::string_view owner_prefix, std::string_view after,
                                         std::size_t limit) override {
    const auto result =
        pool_.lease()->execute("list_sessions", {owner_prefix, after, std::to_string(limit)});
    std::vector<SessionInfo> sessions;
    for (int row = 0; row < result.rows(); ++row) {
      sessions.push_back(session_from<sql::kListSessionsColumns>(
          result.text(row, sql::kListSessionsColumns["session_id"]), result.slice(row, 1)));
    }
    return sessions;
  }

  std::vector<LockInfo> session_grants(std::string_view session_id) override {
    const auto result = pool_.lease()->execute("session_grants", {session_id});
    std::vector<LockInfo> grants;
    for (int row = 0; row < result.rows(); ++row) {
      grants.push_back(read_info_from<sql::kSessionGrantsColumns>(result, row));
    }
    return grants;
  }

  std::optional<SessionInfo> get_session(std::string_view session_id) override {
    const auto result = pool_.lease()->execute("get_session", {session_id});
    if (result.rows() == 0) return std::nullopt;
    return session_from<sql::kGetSessionColumns>(session_id, result);
  }

  std::vector<LockInfo> close_session(std::string_view session_id) override {
    auto connection = pool_.lease();
    // Once the session row is gone the trigger refuses it any new grant, so deleting its locks
    // afterwards (a second statement) cannot miss one.
    const auto closed = connection->execute("close_session", {session_id});
    if (closed.rows() == 0 || !closed.boolean(0, sql::kCloseSessionColumns["live"])) {
      // Missing or already expired: its grants ended with it, not by this close, so they are
      // left to the reaper, which keeps each one's lock-delay (C2 "Lock-delay").
      throw SessionNotFoundError("session not found or expired");
    }
    const auto locks = connection->execute("release_session_locks", {session_id});
    std::vector<LockInfo> released;
    for (int row = 0; row < locks.rows(); ++row) {
      if (locks.boolean(row, sql::kReleaseSessionLocksColumns["live"])) {
        released.push_back(lock_info_from<sql::kReleaseSessionLocksColumns>(locks, row));
      }
    }
    const auto holders = connection->execute("release_session_holders", {session_id});
    for (int row = 0; row < holders.rows(); ++row) {
      if (holders.boolean(row, sql::kReleaseSessionHoldersColumns["live"])) {
        released.push_back(grant_info_from<sql::kReleaseSessionHoldersColumns>(holders, row));
      }
    }
    return released;
  }

 private:
  // The answer of kAcquire or kAcquireLeader: no row is "held by a live grant", a decision.
  static std::optional<LockHandle> granted_handle(std::string_view key, std::string_view owner_id,
                                                  std::string_view session_id,
                                                  const LockLease& lease,
                                                  SteadyClock::time_point sent_at,
                                                  const PgResult& granted) {
    if (granted.rows() == 0) return std::nullopt;
    return handle_from<sql::kAcquireColumns>(
        key, owner_id, session_id,
        static_cast<FencingToken>(granted.int64(0, sql::kAcquireColumns["fencing_token"])), lease,
        sent_at, granted);
  }

  // extend of the grant the token names, as kExtend's answer says what it is; std::nullopt when
  // it names no live grant.
  std::optional<LockHandle> extend_named(const GrantRef& grant, std::chrono::milliseconds ttl) {
    const auto sent_at = SteadyClock::now();
    const auto check_session_bound = [&]() -> std::optional<LockHandle> {
      // A checked no-op: the grant lives by its session (ADR-0018).
      const auto checked = pool_.lease()->execute(
          "check_session_bound",
          {grant.key, grant.owner_id, grant.session_id, token_text(grant.fencing_token)});
      if (checked.rows() == 0) return std::nullopt;
      return handle_from<sql::kCheckSessionBoundColumns>(grant.key, grant.owner_id,
                                                         grant.session_id, grant.fencing_token,
                                                         LockLease::session(), sent_at, checked);
    };
    const auto result = writes_.execute("extend", {grant.key, grant.owner_id, grant.session_id,
                                                   token_text(grant.fencing_token), ms_text(ttl)});
    if (result.rows() == 0) return std::nullopt;
    const auto kind = result.text(0, sql::kExtendColumns["kind"]);
    if (kind == "holder") return extend_holder(grant, ttl);
    if (kind == "session_bound") return check_session_bound();
    LockHandle extended{grant.key, grant.owner_id, grant.session_id, grant.fencing_token};
    extended.client_deadline = sent_at + ttl;
    extended.server_expiry =
        util::from_unix_micros(result.int64(0, sql::kExtendColumns["expires_us"]));
    extended.mode = HoldMode::kExclusive;
    return extended;
  }

  // extend of a shared or permit holder, its group row raised with it (ADR-0020);
  // std::nullopt when the token names none.
  std::optional<LockHandle> extend_holder(const GrantRef& grant, std::chrono::milliseconds ttl) {
    const auto sent_at = SteadyClock::now();
    const auto result =
        writes_.execute("extend_holder", {grant.key, grant.owner_id, grant.session_id,
                                          token_text(grant.fencing_token), ms_text(ttl)});
    if (result.rows() == 0) return std::nullopt;
    const bool session_bound = result.boolean(0, sql::kExtendHolderColumns["session_bound"]);
    LockHandle extended = handle_from<sql::kExtendHolderColumns>(
        grant.key, grant.owner_id, grant.session_id, grant.fencing_token,
        session_bound ? LockLease::session() : LockLease(ttl), sent_at, result);
    extended.mode = result.text(0, sql::kExtendHolderColumns["mode"]) == "permit"
                        ? HoldMode::kPermit
                        : HoldMode::kShared;
    return extended;
  }

  // The first row of `result`, with sql::kSessionRow's columns.
  template <const auto& columns>
  static SessionInfo session_from(std::string_view session_id, const PgResult& result) {
    return SessionInfo{std::string(session_id), result.text(0, columns["owner_id"]),
                       std::chrono::milliseconds(result.int64(0, columns["ttl_ms"])),
                       util::from_unix_micros(result.int64(0, columns["expires_us"])),
                       std::chrono::milliseconds(result.int64(0, columns["lock_delay_ms"]))};
  }

  const PgStoreOptions options_;
  PgPool pool_;
  // acquire, extend, delete_if_owner and heartbeat: the hot writes, batched (ADR-0019); the
  // leader grant and proclaim with them (one statement each, as the acquire).
  PgBatcher writes_;
  util::ReleaseHub releases_;
  std::mutex listener_mutex_;
  std::unique_ptr<PgListener> listener_;  // after releases_: stops feeding it before it dies
};

}  // namespace

BackendPtr make_pg_store(const PgStoreOptions& options) {
  return std::make_unique<util::ValidatingBackend>(std::make_unique<PgStore>(options),
                                                   options.limits);
}

}  // namespace dlock::store::pg
