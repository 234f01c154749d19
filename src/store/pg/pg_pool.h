#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/pg/pg_connection.h"

namespace dlock::store::pg {

// A small fixed-size pool. Connections are opened lazily, prepared once, and dropped when they
// break, so the pool heals by itself after a PostgreSQL restart. `on_connect`, when not empty,
// runs once on every new connection before its first use (the store's restore floor).
class PgPool {
 public:
  PgPool(std::string url, std::size_t size, std::chrono::milliseconds call_timeout,
         std::vector<PreparedStatement> statements, std::string on_connect = {});
  PgPool(const PgPool&) = delete;
  PgPool& operator=(const PgPool&) = delete;

  // A connection on loan; it returns to the pool (or is discarded if broken) on destruction.
  class Lease {
   public:
    Lease(PgPool& pool, std::unique_ptr<PgConnection> connection)
        : pool_(pool), connection_(std::move(connection)) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { pool_.give_back(std::move(connection_)); }
    PgConnection* operator->() { return connection_.get(); }
    PgConnection& operator*() { return *connection_; }

   private:
    PgPool& pool_;
    std::unique_ptr<PgConnection> connection_;
  };

  // Waits at most the call timeout for a connection; throws UnavailableError otherwise.
  Lease lease();

 private:
  void give_back(std::unique_ptr<PgConnection> connection);

  const std::string url_;
  const std::size_t size_;
  const std::chrono::milliseconds call_timeout_;
  const std::vector<PreparedStatement> statements_;
  const std::string on_connect_;
  std::mutex mutex_;
  std::condition_variable available_;
  std::vector<std::unique_ptr<PgConnection>> idle_;
  std::size_t open_ = 0;
};

}  // namespace dlock::store::pg
