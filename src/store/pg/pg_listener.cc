#include "store/pg/pg_listener.h"

#include <libpq-fe.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>

#include "dlock/errors.h"

namespace dlock::store::pg {

PgListener::PgListener(std::string url, std::chrono::milliseconds call_timeout,
                       util::ReleaseHub& hub)
    : url_(std::move(url)), call_timeout_(call_timeout), hub_(hub) {
  if (pipe(wake_pipe_) != 0) throw InternalError("pg listener: pipe failed");
  if (!connect()) {
    close(wake_pipe_[0]);
    close(wake_pipe_[1]);
    throw UnavailableError("pg listener: cannot LISTEN on dlock_release");
  }
  thread_ = std::thread([this] { run(); });
}

PgListener::~PgListener() {
  stopping_ = true;
  const char byte = 0;
  [[maybe_unused]] const auto written = write(wake_pipe_[1], &byte, 1);
  thread_.join();
  PQfinish(conn_);
  close(wake_pipe_[0]);
  close(wake_pipe_[1]);
}

bool PgListener::connect() {
  const std::string timeout = std::to_string(std::max<long long>(1, call_timeout_.count() / 1000));
  const char* keywords[] = {"dbname", "connect_timeout", "application_name", nullptr};
  const char* values[] = {url_.c_str(), timeout.c_str(), "dlock-listener", nullptr};
  conn_ = PQconnectdbParams(keywords, values, 1);
  if (PQstatus(conn_) == CONNECTION_OK) {
    PGresult* result = PQexec(conn_, "LISTEN dlock_release");
    const bool ok = PQresultStatus(result) == PGRES_COMMAND_OK;
    PQclear(result);
    if (ok) return true;
  }
  PQfinish(conn_);
  conn_ = nullptr;
  return false;
}

void PgListener::run() {
  auto backoff = std::chrono::milliseconds(50);
  while (!stopping_) {
    if (conn_ == nullptr) {
      pollfd wake{wake_pipe_[0], POLLIN, 0};
      poll(&wake, 1, static_cast<int>(backoff.count()));
      if (stopping_) return;
      if (!connect()) {
        backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
        continue;
      }
      backoff = std::chrono::milliseconds(50);
      hub_.notify_all();  // whatever happened while we were away
    }
    pollfd fds[2] = {{PQsocket(conn_), POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) continue;
    if (fds[1].revents != 0) return;
    if (PQconsumeInput(conn_) == 0) {
      PQfinish(conn_);
      conn_ = nullptr;
      continue;
    }
    while (PGnotify* notice = PQnotifies(conn_)) {
      hub_.notify(util::parse_release_notice(notice->extra));
      PQfreemem(notice);
    }
  }
}

}  // namespace dlock::store::pg
