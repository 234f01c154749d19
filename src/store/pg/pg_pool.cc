#include "store/pg/pg_pool.h"

#include "dlock/errors.h"

namespace dlock::store::pg {

PgPool::PgPool(std::string url, std::size_t size, std::chrono::milliseconds call_timeout,
               std::vector<PreparedStatement> statements, std::string on_connect)
    : url_(std::move(url)),
      size_(size == 0 ? 1 : size),
      call_timeout_(call_timeout),
      statements_(std::move(statements)),
      on_connect_(std::move(on_connect)) {}

PgPool::Lease PgPool::lease() {
  const auto deadline = std::chrono::steady_clock::now() + call_timeout_;
  std::unique_lock lock(mutex_);
  while (idle_.empty() && open_ >= size_) {
    if (available_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() &&
        open_ >= size_) {
      throw UnavailableError("pg: no connection free within the call timeout");
    }
  }
  if (!idle_.empty()) {
    auto connection = std::move(idle_.back());
    idle_.pop_back();
    return Lease(*this, std::move(connection));
  }
  ++open_;
  lock.unlock();
  try {
    auto connection = std::make_unique<PgConnection>(url_, call_timeout_, statements_);
    if (!on_connect_.empty()) connection->run(on_connect_);
    return Lease(*this, std::move(connection));
  } catch (...) {
    lock.lock();
    --open_;
    available_.notify_one();
    throw;
  }
}

void PgPool::give_back(std::unique_ptr<PgConnection> connection) {
  std::lock_guard lock(mutex_);
  if (connection && connection->healthy()) {
    idle_.push_back(std::move(connection));
  } else {
    --open_;
  }
  available_.notify_one();
}

}  // namespace dlock::store::pg
