// The SQLite store (ADR-0005, ADR-0008, ADR-0013). Just over ~500 lines: the one SqliteStore class
// that maps each SPI operation to its statement under one write mutex; its helpers already live
// apart (sqlite_db, sqlite_rows, sqlite_holders, sqlite_delays, the statements in
// sqlite_statements.h), and what is left reads best as one class.

#include "store/sqlite/sqlite_store.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "store/sqlite/data_file.h"
#include "store/sqlite/sqlite_db.h"
#include "store/sqlite/sqlite_delays.h"
#include "store/sqlite/sqlite_holders.h"
#include "store/sqlite/sqlite_rows.h"
#include "store/sqlite/sqlite_statements.h"
#include "store/sqlite/store_clock.h"
#include "util/backend_names.h"
#include "util/ids.h"
#include "util/lock_lost.h"
#include "util/release_hub.h"
#include "util/time.h"
#include "util/validating_backend.h"

namespace dlock::store::sqlite {

const std::vector<std::pair<int, std::string_view>>& migrations();

namespace {

using sql::GrantTable;
using sql::kAcquire;
using sql::kDeleteHolderIfOwner;
using sql::kDeleteIfOwner;
using sql::kGrants;
using sql::kGrantTableOf;
using sql::kHolders;
using sql::kRaiseTokenFloor;

class SqliteStore final : public Backend {
 public:
  explicit SqliteStore(const SqliteStoreOptions& options)
      : data_file_(options.path),
        clock_vfs_([this] { return clock_.now_ms(); }),
        db_(data_file_.path(), static_cast<int>(options.busy_timeout.count()), clock_vfs_.name()),
        statements_(db_),
        writes_(db_, mutex_) {
    // WAL with synchronous=FULL: every commit (every grant, hence every token) is fsynced to the
    // WAL before COMMIT returns, so a token handed out survives a crash or power loss.
    db_.exec("PRAGMA journal_mode=WAL");
    db_.exec("PRAGMA synchronous=FULL");
    migrate();
    resume_clock();
  }

  std::optional<LockHandle> try_grant(std::string_view key, std::string_view owner_id,
                                      std::string_view session_id,
                                      const GrantRequest& request) override {
    if (request.holder()) return insert_holder(key, owner_id, session_id, request);
    // Elections (ADR-0020): a leader is the same acquire statement, with its value bound.
    const auto value = request.leader_value();
    auto granted = insert_exclusive(key, owner_id, session_id, request.lease(), value);
    if (granted && value) releases_.notify(key);  // the election's observers (watch_releases)
    return granted;
  }

  // One guarded UPDATE of the live exclusive grant named by key, owner, session and token, in the
  // write path as extend (group commit, ADR-0008: durable before it is answered). Neither the
  // token nor expires_at changes. A shared or permit holder's token names no row of `locks`.
  LockInfo proclaim(const GrantRef& grant, std::string_view value) override {
    std::optional<LockInfo> proclaimed;
    writes_.write([&] {
      proclaimed.reset();
      Statement& update = statements_.get(sql::kProclaim, sql::kProclaimColumns.list());
      ResetGuard reset(update);
      update.bind(1, grant.key).bind(2, grant.owner_id).bind(3, grant.session_id);
      update.bind(4, static_cast<std::int64_t>(grant.fencing_token)).bind(5, value);
      if (!update.step()) return false;  // nothing written
      proclaimed = lock_info_from<sql::kProclaimColumns>(update, clock_);
      return true;
    });
    if (!proclaimed) throw util::lock_lost(grant.key, grant.fencing_token);
    releases_.notify(grant.key);
    return std::move(*proclaimed);
  }

  // ADR-0020 holder sets, in `lock_holders` (sqlite_holders.h).
  std::optional<LockHandle> insert_holder(std::string_view key, std::string_view owner_id,
                                          std::string_view session_id,
                                          const GrantRequest& request) {
    const LockLease& lease = request.lease();
    const auto sent_at = SteadyClock::now();
    std::optional<LockHandle> granted;
    writes_.write([&] {
      granted =
          grant_holder(statements_, key, owner_id, session_id, lease, request, sent_at, clock_);
      return granted.has_value();
    });
    return granted;
  }

  // An exclusive grant and live holders of one key never coexist (each grant checks for the
  // other), so reading both tables gives one or the other.
  std::vector<LockInfo> read_holders(std::string_view key) override {
    return select_live<sql::kReadHoldersColumns>(sql::kReadHolders, key);
  }

  std::optional<LockInfo> read(std::string_view key) override {
    auto found = select_live<sql::kReadColumns>(sql::kRead, key);
    if (found.empty()) return std::nullopt;
    return std::move(found.front());
  }

  // Keys compare as bytes (SQLite's BINARY collation), as the SPI's order says.
  std::vector<LockInfo> list(std::string_view prefix, const ListAfter& after,
                             std::size_t limit) override {
    std::lock_guard lock(mutex_);
    Statement& select = statements_.get(sql::kList, sql::kListColumns.list());
    ResetGuard reset(select);
    select.bind(1, prefix).bind(2, static_cast<std::int64_t>(limit)).bind(3, after.key);
    select.bind(4, static_cast<std::int64_t>(after.fencing_token));
    std::vector<LockInfo> result;
    while (select.step()) result.push_back(lock_info_from<sql::kListColumns>(select, clock_));
    return result;
  }

  std::vector<KeyDelay> list_delays(std::string_view prefix, std::string_view after,
                                    std::size_t limit) override {
    std::lock_guard lock(mutex_);
    std::vector<KeyDelay> delays;
    const auto offset = clock_.wall_offset_ms();
    for (auto& [key, ends_at] :
         delays_by_prefix(statements_, prefix, after, static_cast<std::int64_t>(limit))) {
      delays.push_back({std::move(key), StoreClock::wall_time(ends_at, offset)});
    }
    return delays;
  }

  bool clear_delay(std::string_view key) override {
    bool cleared = false;
    writes_.write([&] {
      cleared = clear_delays_of(statements_, key);
      return cleared;
    });
    if (cleared) releases_.notify(key);
    return cleared;
  }

  // The token names the grant -- exclusive, or one holder alone (ADR-0020). The answer carries
  // the grant's own mode.
  LockHandle extend(const GrantRef& grant, std::chrono::milliseconds ttl) override {
    // The UPDATE never matches a session-bound row.
    const auto sent_at = SteadyClock::now();
    LockHandle extended{grant.key, grant.owner_id, grant.session_id, grant.fencing_token};
    bool updated = false;
    writes_.write([&] {
      const GrantTable* table = table_of(grant);
      if (table == nullptr) return false;  // nothing written
      Statement& update = statements_.get(table->extend, sql::kExtendColumns.list());
      ResetGuard reset(update);
      update.bind(1, grant.key).bind(2, grant.owner_id).bind(3, grant.session_id);
      update.bind(4, static_cast<std::int64_t>(grant.fencing_token));
      update.bind(5, std::int64_t{ttl.count()});
      updated = update.step();
      if (!updated) return false;  // nothing written
      extended.client_deadline = sent_at + ttl;
      extended.server_expiry = StoreClock::wall_time(
          update.column_int64(sql::kExtendColumns["expires_at"]), clock_.wall_offset_ms());
      extended.mode = mode_from(update.column_text(sql::kExtendColumns["mode"]));
      return true;
    });
    if (!updated) return check_session_bound(grant);  // LockLostError unless session-bound
    return extended;
  }

  bool delete_if_owner(const GrantRef& grant) override {
    bool released = false;
    writes_.write([&] {
      released = delete_grant(grant);
      return true;
    });
    if (released) releases_.notify(grant.key);
    return released;
  }

  std::optional<LockHandle> handover(const GrantRef& from, std::string_view next_owner_id,
                                     std::string_view next_session_id, LockLease lease) override {
    auto next = handover_locked(from, next_owner_id, next_session_id, lease);
    // Granted: the holder changed without a release (watch_releases).
    releases_.notify(from.key, next ? next->fencing_token : 0);
    return next;
  }

  // Every holder of `key` goes: its exclusive grant or all its shared or permit holders.
  LockOutcome revoke(std::string_view key) override {
    LockOutcome outcome;
    writes_.write([&] {
      outcome = revoke_every_holder(statements_, key);
      return true;
    });
    if (outcome.revoked) releases_.notify(key);
    return outcome;
  }

  ReapReport reap_expired() override {
    std::vector<std::string> delays_over;
    auto report = reap_locked(delays_over);
    for (const auto& info : report.expired_locks) releases_.notify(info.key);
    // Lock-delays that are over: announced like a release, so waiters try again (C2).
    for (const auto& key : delays_over) releases_.notify(key);
    return report;
  }

  ReleaseSubscriptionPtr watch_releases(std::string_view key,
                                        ReleaseCallback on_released) override {
    return releases_.subscribe(key, std::move(on_released));
  }

  std::string_view backend_id() const override { return backend_names::kSqlite; }

  using SessionRegistry::open_session;
  SessionInfo open_session(std::string_view owner_id, std::chrono::milliseconds ttl,
                           std::chrono::milliseconds lock_delay) override {
    const std::string session_id = util::random_id();
    SessionInfo opened{session_id, std::string(owner_id), ttl, {}, lock_delay};
    writes_.write([&] {
      Statement& insert = statements_.get(sql::kOpenSession, sql::kOpenSessionColumns.list());
      ResetGuard reset(insert);
      insert.bind(1, session_id).bind(2, owner_id).bind(3, std::int64_t{ttl.count()});
      insert.bind(4, std::int64_t{lock_delay.count()});
      if (!insert.step()) throw InternalError("sqlite: session insert returned no row");
      opened.expires_at = StoreClock::wall_time(
          insert.column_int64(sql::kOpenSessionColumns["expires_at"]), clock_.wall_offset_ms());
      return true;
    });
    return opened;
  }

  SessionInfo heartbeat(std::string_view session_id) override {
    std::optional<SessionInfo> renewed;
    writes_.write([&] {
      Statement& update = statements_.get(sql::kHeartbeat, sql::kHeartbeatColumns.list());
      ResetGuard reset(update);
      update.bind(1, session_id);
      if (!update.step()) throw SessionNotFoundError("session not found or expired");
      renewed = session_from<sql::kHeartbeatColumns>(session_id, update, clock_);
      return true;
    });
    return *renewed;
  }

  std::vector<SessionInfo> list_sessions(std::string_view owner_prefix, std::string_view after,
                                         std::size_t limit) override {
    std::lock_guard lock(mutex_);
    Statement& select = statements_.get(sql::kListSessions, sql::kListSessionsColumns.list());
    ResetGuard reset(select);
    select.bind(1, owner_prefix).bind(2, after).bind(3, static_cast<std::int64_t>(limit));
    std::vector<SessionInfo> sessions;
    while (select.step()) {
      sessions.push_back(session_from<sql::kListSessionsColumns>(
          select.column_text(sql::kListSessionsColumns["session_id"]), select, clock_));
    }
    return sessions;
  }

  std::vector<LockInfo> session_grants(std::string_view session_id) override {
    return select_live<sql::kSessionGrantsColumns>(sql::kSessionGrants, session_id);
  }

  std::optional<SessionInfo> get_session(std::string_view session_id) override {
    std::lock_guard lock(mutex_);
    Statement& select = statements_.get(sql::kGetSession, sql::kGetSessionColumns.list());
    ResetGuard reset(select);
    select.bind(1, session_id);
    if (!select.step()) return std::nullopt;
    return session_from<sql::kGetSessionColumns>(session_id, select, clock_);
  }

  std::vector<LockInfo> close_session(std::string_view session_id) override {
    auto released = close_locked(session_id);
    for (const auto& info : released) releases_.notify(info.key);
    return released;
  }

 private:
  // An exclusive grant, or a leader with its value (?6 of kAcquire; unbound, i.e. NULL, for a
  // plain lock, which so drops a leader's value when it takes the name over).
  std::optional<LockHandle> insert_exclusive(std::string_view key, std::string_view owner_id,
                                             std::string_view session_id, LockLease lease,
                                             std::optional<std::string_view> value) {
    const auto sent_at = SteadyClock::now();
    std::optional<LockHandle> granted;
    writes_.write([&] {
      const FencingToken token = take_token(statements_);
      Statement& acquire = statements_.get(kAcquire, sql::kAcquireColumns.list());
      ResetGuard reset(acquire);
      acquire.bind(1, key).bind(2, owner_id).bind(3, session_id);
      acquire.bind(4, static_cast<std::int64_t>(token));
      bind_lease(acquire, 5, lease);
      if (value) acquire.bind(6, *value);
      if (!acquire.step()) return false;  // held: rolling back returns the token unused
      granted = handle_from<sql::kAcquireColumns>(
          key, owner_id, session_id,
          static_cast<FencingToken>(acquire.column_int64(sql::kAcquireColumns["fencing_token"])),
          lease, sent_at, acquire, clock_);
      return true;
    });
    return granted;
  }

  // The bodies of handover, reap_expired and close_session, run under the mutex; their public
  // wrappers notify waiters after the mutex is released.
  std::optional<LockHandle> handover_locked(const GrantRef& from, std::string_view next_owner_id,
                                            std::string_view next_session_id, LockLease lease) {
    const auto sent_at = SteadyClock::now();
    std::optional<LockHandle> next;
    writes_.write([&] {
      next.reset();
      const FencingToken token = take_token(statements_);
      Statement& update = statements_.get(sql::kHandover, sql::kHandoverColumns.list());
      ResetGuard reset(update);
      update.bind(1, from.key).bind(2, from.owner_id).bind(3, from.session_id);
      update.bind(4, static_cast<std::int64_t>(from.fencing_token));
      update.bind(5, next_owner_id).bind(6, next_session_id);
      update.bind(7, static_cast<std::int64_t>(token));
      bind_lease(update, 8, lease);
      bool granted = false;
      try {
        granted = update.step();
      } catch (const SessionNotFoundError&) {
        // The next session died while it waited: release `from` and report no hand-over.
        update.reset();
        if (!delete_grant(from)) throw util::lock_lost(from.key, from.fencing_token);
        return true;
      }
      if (!granted) throw util::lock_lost(from.key, from.fencing_token);
      next = handle_from<sql::kHandoverColumns>(from.key, next_owner_id, next_session_id, token,
                                                lease, sent_at, update, clock_);
      return true;
    });
    return next;
  }

  ReapReport reap_locked(std::vector<std::string>& delays_over) {
    ReapReport report;
    writes_.write([&] {
      // One 'now' for every statement: a grant that ended between the statement recording the
      // delays and the one deleting the ended grants would go without its lock-delay, and a
      // session that expired after its grants were looked at would leave them without their
      // session's delay.
      const ClockVfs::PinnedNow one_now(clock_.now_ms());
      report = ReapReport{};
      for (const auto* table : {&kGrants, &kHolders}) {
        keep_delays(statements_, table->keep_delays_reaped);  // before the rows and sessions go
        Statement& locks = statements_.get(table->reap, sql::kReapColumns.list());
        ResetGuard reset_locks(locks);
        while (locks.step()) {
          report.expired_locks.push_back(lock_info_from<sql::kReapColumns>(locks, clock_));
        }
      }
      Statement& sessions = statements_.get(sql::kReapSessions, sql::kReapSessionsColumns.list());
      ResetGuard reset_sessions(sessions);
      while (sessions.step()) {
        report.expired_sessions.push_back(
            sessions.column_text(sql::kReapSessionsColumns["session_id"]));
      }
      delays_over = end_delays(statements_);
      return true;
    });
    return report;
  }

  std::vector<LockInfo> close_locked(std::string_view session_id) {
    bool was_live = false;
    std::vector<LockInfo> released;
    writes_.write([&] {
      // One 'now' for every statement, as the reaper's: a grant that ends between them is
      // either kept with its delay or released live, never deleted without either.
      const ClockVfs::PinnedNow one_now(clock_.now_ms());
      released.clear();
      // Before the session row goes: a session-bound grant is live while the session is, and
      // reports the session's expiry. One transaction, so no grant slips in between.
      for (const auto* table : {&kGrants, &kHolders}) {
        // A grant of the session that had already ended keeps its lock-delay (C2).
        keep_delays(statements_, table->keep_delays_of_session, session_id);
        Statement& locks = statements_.get(table->close, sql::kCloseColumns.list());
        ResetGuard reset(locks);
        locks.bind(1, session_id);
        while (locks.step()) {
          if (locks.column_int64(sql::kCloseColumns["live"]) != 0) {
            released.push_back(lock_info_from<sql::kCloseColumns>(locks, clock_));
          }
        }
      }
      Statement& remove = statements_.get(sql::kCloseSession, sql::kCloseSessionColumns.list());
      ResetGuard reset(remove);
      remove.bind(1, session_id);
      was_live = remove.step() && remove.column_int64(sql::kCloseSessionColumns["live"]) != 0;
      return true;
    });
    if (!was_live) throw SessionNotFoundError("session not found or expired");
    return released;
  }

  void migrate() {
    WriteTransaction transaction(db_);
    db_.exec(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
        "applied_at INTEGER NOT NULL)");
    std::int64_t applied = 0;
    {
      Statement current(db_.handle(), "SELECT coalesce(max(version), 0) FROM schema_migrations");
      if (current.step()) applied = current.column_int64(0);
    }
    for (const auto& [version, sql] : migrations()) {
      if (version <= applied) continue;
      db_.exec(sql);
      Statement record(db_.handle(),
                       "INSERT INTO schema_migrations VALUES (?1, " DLOCK_SQLITE_NOW ")");
      record.bind(1, std::int64_t{version});
      record.step();
    }
    // Inside the open's write transaction: no grant (of this or another process) interleaves.
    Statement floor(db_.handle(), kRaiseTokenFloor);
    floor.bind(1, util::to_unix_micros(WallClock::now()));
    floor.step();
    transaction.commit();
  }

  // Persisted times were read on an earlier run's clock, which this run's wall clock cannot be
  // compared with (it may have stepped while the store was closed, by any amount). While any
  // lease, session or lock-delay was live at the latest instant the earlier run provably reached
  // (its latest grant, session creation or keepalive), the store clock resumes from that instant:
  // each lease keeps at least the lifetime it had left then, and the time the store was closed
  // counts as none of it. Otherwise it resumes from the wall clock, never earlier than that
  // instant, so nothing expired comes back. Reads only: opening a store on a full disk writes
  // nothing (docs/adr/0013-sqlite-store-clock.md).
  void resume_clock() {
    Statement last(db_.handle(), sql::kLastReached);
    last.check_columns(sql::kLastReachedColumns.list());
    if (!last.step()) return;
    const std::int64_t reached = last.column_int64(sql::kLastReachedColumns["reached"]);
    const bool live = last.column_int64(sql::kLastReachedColumns["live"]) != 0;
    if (reached <= 0) return;  // nothing persisted
    clock_.resume_at(live ? reached : std::max(reached, clock_.now_ms()));
  }

  // extend of a session-bound grant: a checked no-op answering the session's expiry (ADR-0018).
  LockHandle check_session_bound(const GrantRef& grant) {
    const auto sent_at = SteadyClock::now();
    std::lock_guard lock(mutex_);
    if (const GrantTable* table = table_of(grant)) {
      Statement& select =
          statements_.get(table->check_session_bound, sql::kCheckSessionBoundColumns.list());
      ResetGuard reset(select);
      select.bind(1, grant.key).bind(2, grant.owner_id).bind(3, grant.session_id);
      select.bind(4, static_cast<std::int64_t>(grant.fencing_token));
      if (select.step()) {
        return handle_from<sql::kCheckSessionBoundColumns>(
            grant.key, grant.owner_id, grant.session_id, grant.fencing_token, LockLease::session(),
            sent_at, select, clock_,
            mode_from(select.column_text(sql::kCheckSessionBoundColumns["mode"])));
      }
    }
    throw util::lock_lost(grant.key, grant.fencing_token);
  }

  // The table of the grant `grant` names -- kGrants for an exclusive grant, kHolders for a
  // shared or permit holder -- as the store's rows say, live or not; null when neither has it.
  // Under mutex_.
  const GrantTable* table_of(const GrantRef& grant) {
    Statement& select = statements_.get(kGrantTableOf, sql::kGrantTableOfColumns.list());
    ResetGuard reset(select);
    select.bind(1, grant.key).bind(2, grant.owner_id).bind(3, grant.session_id);
    select.bind(4, static_cast<std::int64_t>(grant.fencing_token));
    if (!select.step()) return nullptr;
    return select.column_int64(sql::kGrantTableOfColumns["holder"]) == 0 ? &kGrants : &kHolders;
  }

  bool delete_grant(const GrantRef& grant) {
    const GrantTable* table = table_of(grant);
    if (table == nullptr) return false;
    Statement& remove = statements_.get(table == &kHolders ? kDeleteHolderIfOwner : kDeleteIfOwner,
                                        sql::kDeleteIfOwnerColumns.list());
    ResetGuard reset(remove);
    remove.bind(1, grant.key).bind(2, grant.owner_id).bind(3, grant.session_id);
    remove.bind(4, static_cast<std::int64_t>(grant.fencing_token));
    if (!remove.step()) return false;
    // A grant that had already ended keeps its lock-delay (C2): 0 when it has none left.
    if (const std::int64_t delay_ends =
            remove.column_int64(sql::kDeleteIfOwnerColumns["delay_ends"]);
        delay_ends > 0) {
      keep_delay(statements_, grant.key, delay_ends);
    }
    return remove.column_int64(sql::kDeleteIfOwnerColumns["live"]) != 0;
  }

  // The rows of a DLOCK_SQLITE_LIVE_GRANTS statement for ?1 = `text` (and ?2 = `number`).
  template <const auto& columns>
  std::vector<LockInfo> select_live(const char* statement, std::string_view text,
                                    std::optional<std::int64_t> number = std::nullopt) {
    std::lock_guard lock(mutex_);
    Statement& select = statements_.get(statement, columns.list());
    ResetGuard reset(select);
    select.bind(1, text);
    if (number) select.bind(2, *number);
    std::vector<LockInfo> result;
    while (select.step()) result.push_back(lock_info_from<columns>(select, clock_));
    return result;
  }

  DataFile data_file_;  // 0700/0600 and one process only; outlives db_
  std::mutex mutex_;    // guards db_ and statements_; held by writes_ for a whole group
  StoreClock clock_;
  ClockVfs clock_vfs_;  // 'now' in SQL is clock_; outlives db_
  Database db_;
  StatementCache statements_;
  GroupCommit writes_;
  util::ReleaseHub releases_;
};

}  // namespace

BackendPtr make_sqlite_store(const SqliteStoreOptions& options) {
  return std::make_unique<util::ValidatingBackend>(std::make_unique<SqliteStore>(options),
                                                   options.limits);
}

}  // namespace dlock::store::sqlite
