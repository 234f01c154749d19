#include "sessions_scale.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <queue>

#include "http_connection.h"

namespace dlock::bench {

using http_detail::Connection;
using http_detail::json_string_field;
using http_detail::open_connections;
namespace asio = boost::asio;
namespace http = boost::beast::http;

namespace {

struct Due {
  Clock::time_point at;
  std::size_t session;
  bool operator>(const Due& other) const { return at > other.at; }
};

// One io_context: `openers` open the sessions as fast as dlockd answers; `renewers` take the
// session whose keepalive is due soonest (a min-heap on due time) as soon as it is due, so a
// session opened early is renewed on time even while later ones are still being opened. A
// ticker (every 2 ms) hands due sessions to idle renewers, prints progress and ends the open
// phase at its bound (open_limit) even when no open is being answered any more.
class ScaleDriver {
 public:
  static int renewer_count(const SessionsScaleOptions& options) {
    if (options.renewers > 0) return options.renewers;
    return static_cast<int>(std::clamp<std::uint64_t>(options.sessions / 1000, 32, 256));
  }

  ScaleDriver(const HttpTarget& target, const SessionsScaleOptions& options,
              const std::atomic<bool>& stop)
      : options_(options),
        stop_(stop),
        target_(target),
        openers_(open_connections(io_, {target}, options.connections)),
        renewers_(open_connections(io_, {target}, renewer_count(options))),
        idle_(renewers_.size(), true),
        ids_(options.sessions),
        ticker_(io_) {}

  SessionsScaleResult run() {
    start_ = last_progress_ = Clock::now();
    for (auto& c : openers_) open_next(c.get());
    tick();
    io_.run();
    result_.window_seconds =
        window_start_ == Clock::time_point{}
            ? 0
            : std::chrono::duration<double>(Clock::now() - window_start_).count();
    return result_;
  }

 private:
  void open_next(Connection* c) {
    if (!opening_ || next_open_ >= options_.sessions || stop_) return;
    const std::size_t n = next_open_++;
    const auto sent = Clock::now();
    c->send(http::verb::post, "/v1/sessions",
            "{\"owner\":\"bench-scale-" + std::to_string(n) +
                "\",\"ttl_ms\":" + std::to_string(options_.ttl.count()) + "}",
            [this, c, n, sent](int status, const std::string& body) {
              if (status == 201) {
                ids_[n] = json_string_field(body, "session_id");
                ++result_.opened;
                due_.push({sent + options_.keepalive_every, n});
              } else {
                ++result_.open_errors;
                http_detail::report_unexpected("open session", status, body);
              }
              if (opening_ && result_.opened + result_.open_errors == options_.sessions) {
                all_opened();
              }
              if (status >= 0) open_next(c);
            });
  }

  // The open phase is over (every session answered, or open_limit): the window starts.
  void all_opened() {
    opening_ = false;
    result_.opened_at_window = result_.opened;
    result_.open_seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    window_start_ = Clock::now();
    if (options_.all_open) options_.all_open();
  }

  void renew(std::size_t r) {
    const Due due = due_.top();
    due_.pop();
    idle_[r] = false;
    const auto sent = Clock::now();
    result_.max_behind_ms = std::max(result_.max_behind_ms, ms_between(due.at, sent));
    renewers_[r]->send(http::verb::post, "/v1/sessions/" + ids_[due.session] + "/keepalive", "",
                       [this, r, due, sent](int status, const std::string& body) {
                         idle_[r] = true;
                         if (status == 200) {
                           ++result_.keepalives;
                           if (window_start_ != Clock::time_point{}) {
                             result_.keepalive_ms.push_back(ms_between(sent, Clock::now()));
                           }
                           due_.push({sent + options_.keepalive_every, due.session});
                         } else if (status == 404) {
                           ++result_.lost;
                           http_detail::report_unexpected("keepalive (session lost)", status, body);
                         } else if (status < 0) {
                           // dlockd closed the connection (a fresh one must send its first
                           // request within server.header.timeout, 10 s, and a renewer may
                           // wait that long for its first keepalive): connect again, as a
                           // client would, outside this connection's handler.
                           due_.push({Clock::now(), due.session});
                           idle_[r] = false;
                           asio::post(io_, [this, r] { reconnect(r); });
                           return;
                         } else {
                           ++result_.keepalive_errors;
                           http_detail::report_unexpected("keepalive", status, body);
                           due_.push({Clock::now(), due.session});
                         }
                         dispatch();
                       });
  }

  void reconnect(std::size_t r) {
    try {
      renewers_[r] = std::make_unique<Connection>(io_, target_);
      ++result_.reconnects;
      idle_[r] = true;
      dispatch();
    } catch (const std::exception& e) {
      ++result_.keepalive_errors;
      http_detail::report_unexpected("keepalive reconnect", -1, e.what());
    }
  }

  // Every idle renewer takes a due session.
  void dispatch() {
    const auto now = Clock::now();
    for (std::size_t r = 0; r < renewers_.size(); ++r) {
      if (stop_ || due_.empty() || due_.top().at > now) return;
      if (idle_[r]) renew(r);
    }
  }

  void tick() {
    if (stop_) {
      // The requests in flight finish; whatever has not answered within 2 s is abandoned.
      ticker_.expires_after(std::chrono::seconds(2));
      ticker_.async_wait([this](boost::system::error_code) { io_.stop(); });
      return;
    }
    dispatch();
    const auto now = Clock::now();
    if (opening_ && options_.open_limit.count() > 0 && now - start_ >= options_.open_limit) {
      result_.open_limit_hit = true;
      if (options_.progress) {
        options_.progress("sessions-scale: open phase stopped at its bound with " +
                          std::to_string(result_.opened) + "/" + std::to_string(options_.sessions) +
                          " open");
      }
      all_opened();
    }
    if (options_.progress && now - last_progress_ >= std::chrono::seconds(5)) {
      last_progress_ = now;
      options_.progress("sessions-scale: " + std::to_string(result_.opened) + "/" +
                        std::to_string(options_.sessions) + " open after " +
                        std::to_string(static_cast<int>(ms_between(start_, now) / 1000)) + " s, " +
                        std::to_string(result_.keepalives) + " keepalives, " +
                        std::to_string(result_.lost) + " lost, " +
                        std::to_string(result_.keepalive_errors) + " keepalive errors, " +
                        std::to_string(result_.reconnects) + " reconnects, " +
                        std::to_string(static_cast<long long>(result_.max_behind_ms)) +
                        " ms most behind schedule");
    }
    ticker_.expires_after(std::chrono::milliseconds(2));
    ticker_.async_wait([this](boost::system::error_code ec) {
      if (!ec) tick();
    });
  }

  const SessionsScaleOptions& options_;
  const std::atomic<bool>& stop_;
  const HttpTarget target_;
  asio::io_context io_;
  std::vector<std::unique_ptr<Connection>> openers_, renewers_;
  std::vector<bool> idle_;
  std::vector<std::string> ids_;
  std::priority_queue<Due, std::vector<Due>, std::greater<>> due_;
  asio::steady_timer ticker_;
  std::size_t next_open_ = 0;
  bool opening_ = true;  // until all_opened()
  Clock::time_point start_, last_progress_, window_start_;
  SessionsScaleResult result_;
};

}  // namespace

SessionsScaleResult http_sessions_scale(const HttpTarget& target,
                                        const SessionsScaleOptions& options,
                                        const std::atomic<bool>& stop) {
  ScaleDriver driver(target, options, stop);
  return driver.run();
}

CloseSessionsResult http_close_sessions(const HttpTarget& target,
                                        const std::vector<std::string>& session_ids,
                                        int connections, std::chrono::milliseconds limit) {
  CloseSessionsResult result;
  if (session_ids.empty()) return result;
  asio::io_context io;
  auto open = open_connections(io, {target}, connections);
  const auto start = Clock::now();
  const auto deadline = start + limit;
  std::size_t next = 0, in_flight = 0;
  // Abandons what is still unanswered 10 s after the limit (a dlockd that stopped answering).
  asio::steady_timer abandon(io, deadline + std::chrono::seconds(10));
  abandon.async_wait([&io](boost::system::error_code ec) {
    if (!ec) io.stop();
  });
  std::function<void(Connection*)> close_next = [&](Connection* c) {
    if (next >= session_ids.size() || Clock::now() >= deadline) {
      if (next < session_ids.size()) result.stopped = true;
      if (in_flight == 0) abandon.cancel();
      return;
    }
    ++in_flight;
    c->send(http::verb::delete_, "/v1/sessions/" + session_ids[next++], "",
            [&, c](int status, const std::string& body) {
              --in_flight;
              if (status == 204) {
                ++result.closed;
              } else {
                ++result.errors;
                http_detail::report_unexpected("close session", status, body);
              }
              if (status < 0) {
                if (in_flight == 0) abandon.cancel();
                return;
              }
              close_next(c);
            });
  };
  for (auto& c : open) close_next(c.get());
  io.run();
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (result.closed + result.errors < session_ids.size()) result.stopped = true;
  return result;
}

}  // namespace dlock::bench
