#include "executor.h"

#include <dlock/client.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <array>
#include <boost/json.hpp>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "fencing/fencing_guard.h"

namespace payout {
namespace {

namespace json = boost::json;
namespace dc = dlock::client;
namespace fencing = dlock::fencing;
using Clock = std::chrono::steady_clock;

// Monotonic nanoseconds (CLOCK_MONOTONIC: one clock for every process on the machine, so the
// tests can order events of different executors).
std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

class Log {
 public:
  explicit Log(std::string worker) : worker_(std::move(worker)) {}
  void emit(json::object event) {
    event["worker"] = worker_;
    event["pid"] = ::getpid();
    if (!event.contains("t")) event["t"] = now_ns();
    const std::string line = json::serialize(event) + "\n";
    std::lock_guard lock(mutex_);
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fflush(stdout);
  }

 private:
  std::string worker_;
  std::mutex mutex_;
};

struct ConnDeleter {
  void operator()(PGconn* conn) const { PQfinish(conn); }
};
using ConnPtr = std::unique_ptr<PGconn, ConnDeleter>;

ConnPtr connect(const std::string& url) {
  ConnPtr conn(PQconnectdb(url.c_str()));
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    throw std::runtime_error("cannot connect to PostgreSQL: " +
                             std::string(PQerrorMessage(conn.get())));
  }
  return conn;
}

// The dlock key that protects a batch; the fencing guard binds the batch to it.
std::string lock_key(const std::string& batch) { return "payouts/" + batch; }

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS payout (
  id           bigserial PRIMARY KEY,
  batch        text   NOT NULL,
  amount_cents bigint NOT NULL,
  status       text   NOT NULL DEFAULT 'pending'
);
-- No UNIQUE on payout_id, on purpose: fencing, not the schema, must prevent double payment,
-- and every insert records the token it was made under.
CREATE TABLE IF NOT EXISTS ledger (
  seq          bigserial PRIMARY KEY,
  payout_id    bigint NOT NULL REFERENCES payout (id),
  amount_cents bigint NOT NULL,
  token        bigint NOT NULL,
  worker       text   NOT NULL,
  paid_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
)sql";

struct Pending {
  std::string id;
  std::string amount_cents;
};

std::vector<Pending> pending_payouts(PGconn* conn, const std::string& batch) {
  std::vector<Pending> result;
  PGresult* rows = PQexecParams(
      conn,
      "SELECT id, amount_cents FROM payout WHERE batch = $1 AND status = 'pending' "
      "ORDER BY id",
      1, nullptr, std::array<const char*, 1>{batch.c_str()}.data(), nullptr, nullptr, 0);
  const bool ok = PQresultStatus(rows) == PGRES_TUPLES_OK;
  if (ok) {
    for (int i = 0; i < PQntuples(rows); ++i) {
      result.push_back({PQgetvalue(rows, i, 0), PQgetvalue(rows, i, 1)});
    }
  }
  PQclear(rows);
  if (!ok) throw fencing::FencingError(PQerrorMessage(conn));
  return result;
}

dc::ClientOptions client_options(const Config& config, Log& log) {
  dc::ClientOptions options;
  options.server_url = config.server_url;
  options.request_timeout = std::chrono::seconds(5);
  options.retry_budget = std::chrono::seconds(3);  // keep the loop responsive to outages
  options.log = [&log](std::string_view message) {
    log.emit({{"event", "client_log"}, {"message", std::string(message)}});
  };
  return options;
}

class Executor {
 public:
  explicit Executor(const Config& config)
      : config_(config),
        log_(config.worker_id),
        client_(client_options(config, log_)),
        conn_(connect(config.pg_url)) {
    limit_idle_transactions();
  }

  int run() {
    const auto give_up = Clock::now() + config_.give_up;
    log_.emit({{"event", "start"}, {"fencing", config_.fencing}, {"read", config_.read}});
    if (config_.read) return read_all(give_up);
    while (Clock::now() < give_up) {
      std::vector<std::string> todo;
      try {
        for (const auto& batch : config_.batches) {
          if (!pending_payouts(conn_.get(), batch).empty()) todo.push_back(batch);
        }
      } catch (const std::exception& error) {
        log_.emit({{"event", "db_error"}, {"message", error.what()}});
        reconnect();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      if (todo.empty()) {
        log_.emit({{"event", "exit"}, {"code", 0}});
        return 0;
      }
      for (const auto& batch : todo) work_on(batch);
    }
    log_.emit({{"event", "exit"}, {"code", 1}});
    return 1;
  }

 private:
  // A holder paused inside its transaction keeps the resource's fencing row locked, which would
  // stall every later holder; PostgreSQL ends such a session after a while instead (the paused
  // holder's commit then fails, and nothing of it is applied).
  void limit_idle_transactions() {
    PQclear(PQexec(conn_.get(), "SET idle_in_transaction_session_timeout = '5s'"));
  }

  void reconnect() {
    PQreset(conn_.get());
    if (PQstatus(conn_.get()) == CONNECTION_OK) limit_idle_transactions();
  }

  // --read: every batch read once (a read refused as stale, or failed, is tried again).
  int read_all(Clock::time_point give_up) {
    std::vector<std::string> todo = config_.batches;
    while (!todo.empty() && Clock::now() < give_up) {
      std::erase_if(todo, [this](const std::string& batch) { return work_on(batch); });
    }
    const int code = todo.empty() ? 0 : 1;
    log_.emit({{"event", "exit"}, {"code", code}});
    return code;
  }

  // One grant of `batch`'s key (shared with --read) and its work: pays the batch, or reads it.
  // True when the work was done (read mode: one admitted read).
  bool work_on(const std::string& batch) {
    try {
      if (!session_ || session_->lost()) {
        session_.reset();
        dc::SessionOptions options;
        options.owner = config_.worker_id;
        options.ttl = config_.ttl;
        session_.emplace(client_, options);
        log_.emit({{"event", "session"}, {"session", session_->id()}});
      }
    } catch (const std::exception& error) {
      log_.emit({{"event", "session_error"}, {"message", error.what()}});
      session_.reset();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return false;
    }
    const std::string key = lock_key(batch);
    const auto start = now_ns();
    std::optional<dc::Lock> lock;
    std::optional<dc::Leadership> leadership;
    try {
      if (config_.elect) {
        dc::CampaignOptions options;
        options.wait = config_.wait;
        leadership = session_->campaign(key, config_.worker_id, options);
      } else {
        dc::AcquireOptions options;
        options.ttl = config_.ttl;
        options.wait = config_.wait;
        options.auto_extend = true;
        options.mode = config_.read ? dlock::HoldMode::kShared : dlock::HoldMode::kExclusive;
        lock = session_->acquire(key, options);
      }
    } catch (const dlock::UnknownOutcomeError& error) {
      op("acquire", key, start, "unknown", 0, error.what());
      return false;
    } catch (const std::exception& error) {
      op("acquire", key, start, "fail", 0, error.what());
      return false;
    }
    // The grant underneath: the lock, or the leadership's session-bound lock (its release()
    // resigns).
    dc::Lock* held = leadership ? &leadership->lock() : lock ? &*lock : nullptr;
    if (held == nullptr) {
      op("acquire", key, start, "fail", 0, "held");
      return false;
    }
    // The deadline the lock was promised until (the safety checker's I5 reads it).
    op("acquire", key, start, "ok", held->token(), "",
       std::chrono::duration_cast<std::chrono::nanoseconds>(
           held->client_deadline().time_since_epoch())
           .count());
    bool done = true;
    if (config_.read) {
      done = read(batch, key, held->token());
    } else {
      pay_batch(batch, key, *held);
    }
    const auto release_start = now_ns();
    try {
      held->release();
      op("release", key, release_start, "ok", held->token(), "");
    } catch (const std::exception& error) {
      op("release", key, release_start, "fail", held->token(), error.what());
    }
    return done;
  }

  void pay_batch(const std::string& batch, const std::string& key, dc::Lock& lock) {
    std::vector<Pending> payouts;
    try {
      payouts = pending_payouts(conn_.get(), batch);
    } catch (const std::exception& error) {
      log_.emit({{"event", "db_error"}, {"message", error.what()}});
      reconnect();
      return;
    }
    for (const auto& payout : payouts) {
      if (!lock.still_valid()) {
        log_.emit({{"event", "lock_lost"}, {"key", key}, {"reason", lock.lost_reason()}});
        return;
      }
      // The check above and the write below are not atomic: a pause here (GC, swap, SIGSTOP)
      // can outlast the lease. Only the fencing guard makes the write safe.
      log_.emit({{"event", "pay_begin"}, {"batch", batch}, {"payout", payout.id}});
      if (config_.hold_extra.count() > 0) std::this_thread::sleep_for(config_.hold_extra);
      if (!pay(batch, key, lock.token(), payout)) return;
    }
  }

  // One payout: the guard, the ledger insert and the status update commit together.
  bool pay(const std::string& batch, const std::string& key, dlock::FencingToken token,
           const Pending& payout) {
    json::object event{{"event", "write"},
                       {"batch", batch},
                       {"payout", payout.id},
                       {"token", token},
                       {"start", now_ns()}};
    return guarded(
        std::move(event), [&] { return fencing::admit(conn_.get(), batch, token, key); },
        [&](json::object&) {
          fencing::exec(conn_.get(),
                        "INSERT INTO ledger (payout_id, amount_cents, token, worker) "
                        "VALUES ($1, $2, $3, $4)",
                        {payout.id, payout.amount_cents, std::to_string(token), config_.worker_id});
          fencing::exec(conn_.get(), "UPDATE payout SET status = 'done' WHERE id = $1",
                        {payout.id});
        });
  }

  // One read under a shared grant (docs/fencing.md "Read-write locks"): admit_read records the
  // reader's token at the resource -- every later write with a smaller token is refused -- and
  // the read (how many payouts of the batch are paid) happens in the same transaction, behind
  // the row lock admit_read took. Logged as a "read" event: ok, rejected (a writer with a
  // greater token wrote already), fail or unknown.
  bool read(const std::string& batch, const std::string& key, dlock::FencingToken token) {
    json::object event{{"event", "read"}, {"batch", batch}, {"token", token}, {"start", now_ns()}};
    return guarded(
        std::move(event), [&] { return fencing::admit_read(conn_.get(), batch, token, key); },
        [&](json::object& logged) {
          logged["paid"] = fencing::exec(
              conn_.get(), "SELECT 1 FROM payout WHERE batch = $1 AND status = 'done'", {batch});
        });
  }

  // One transaction: `admit` (the guard, skipped with --no-fencing), then `body` (which may add
  // to the event), then COMMIT. Logs `event` with its outcome and end: rejected (the guard said
  // kStale; nothing done), ok (committed), fail (not applied) or unknown (COMMIT failed: it may
  // have been applied). True when ok.
  template <typename Admit, typename Body>
  bool guarded(json::object event, Admit admit, Body body) {
    bool committing = false;
    try {
      fencing::Transaction tx(conn_.get());
      if (config_.fencing && admit() == fencing::Admission::kStale) {
        event["outcome"] = "rejected";
      } else {
        body(event);
        committing = true;
        tx.commit();
        event["outcome"] = "ok";
      }
    } catch (const std::exception& error) {
      event["outcome"] = committing ? "unknown" : "fail";
      event["message"] = error.what();
      if (PQstatus(conn_.get()) != CONNECTION_OK) reconnect();
    }
    event["end"] = now_ns();
    const bool ok = event["outcome"] == "ok";
    log_.emit(std::move(event));
    return ok;
  }

  void op(const char* kind, const std::string& key, std::int64_t start, const char* outcome,
          dlock::FencingToken token, const std::string& message, std::int64_t promised_until = 0) {
    json::object event{{"event", kind},   {"key", key},         {"start", start},
                       {"end", now_ns()}, {"outcome", outcome}, {"token", token}};
    event["session"] = session_ ? session_->id() : "";
    if (config_.read) event["mode"] = "shared";
    if (!message.empty()) event["message"] = message;
    if (promised_until > 0) event["promised_until"] = promised_until;
    log_.emit(std::move(event));
  }

  const Config& config_;
  Log log_;
  dc::Client client_;
  ConnPtr conn_;
  std::optional<dc::Session> session_;
};

}  // namespace

int init_database(const Config& config) {
  auto conn = connect(config.pg_url);
  fencing::install_schema(conn.get());
  fencing::Transaction tx(conn.get());
  fencing::exec(conn.get(), "SELECT pg_advisory_xact_lock(7207002)");
  fencing::exec(conn.get(), kSchema);
  for (const auto& batch : config.batches) {
    // The guard compares tokens of this batch's lock key only.
    fencing::bind_resource(conn.get(), batch, lock_key(batch));
    const int existing =
        fencing::exec(conn.get(), "SELECT 1 FROM payout WHERE batch = $1 LIMIT 1", {batch});
    if (existing > 0) continue;
    for (int i = 0; i < config.seed_payouts; ++i) {
      fencing::exec(conn.get(), "INSERT INTO payout (batch, amount_cents) VALUES ($1, $2)",
                    {batch, std::to_string(100 * (i + 1))});
    }
  }
  tx.commit();
  return 0;
}

int run_executor(const Config& config) {
  Executor executor(config);
  return executor.run();
}

}  // namespace payout
