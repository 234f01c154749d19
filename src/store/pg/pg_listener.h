#pragma once

// One LISTEN connection per store, feeding PostgreSQL NOTIFY events (channel dlock_release,
// payload: util::parse_release_notice's) into a ReleaseHub. Reconnects by itself; after a reconnect
// it wakes every subscriber, since releases may have been missed while it was away.

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "util/release_hub.h"

struct pg_conn;

namespace dlock::store::pg {

class PgListener {
 public:
  // Connects and LISTENs before returning, so no release after construction is missed.
  PgListener(std::string url, std::chrono::milliseconds call_timeout, util::ReleaseHub& hub);
  PgListener(const PgListener&) = delete;
  PgListener& operator=(const PgListener&) = delete;
  ~PgListener();

 private:
  bool connect();
  void run();

  const std::string url_;
  const std::chrono::milliseconds call_timeout_;
  util::ReleaseHub& hub_;
  pg_conn* conn_ = nullptr;
  int wake_pipe_[2] = {-1, -1};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace dlock::store::pg
