#include "elections.h"

#include <time.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include "http_connection.h"
#include "scenarios.h"

namespace dlock::bench {

using http_detail::Connection;
using http_detail::json_number_field;
using http_detail::json_string_field;
using http_detail::report_unexpected;
namespace asio = boost::asio;
namespace http = boost::beast::http;
using WallClock = std::chrono::system_clock;

namespace {

struct Answer {
  int status = 0;
  std::string body;
  Clock::time_point at;  // when it was received
};

// Sends on `c` and records the answer into `out` (the caller runs `io`).
void post(Connection& c, http::verb verb, const std::string& target, std::string body,
          Answer& out) {
  c.send(verb, target, std::move(body), [&out](int status, const std::string& text) {
    out = {status, text, Clock::now()};
  });
}

Answer call(asio::io_context& io, Connection& c, http::verb verb, const std::string& target,
            std::string body = "") {
  Answer answer;
  post(c, verb, target, std::move(body), answer);
  io.restart();
  io.run();
  return answer;
}

// "2026-12-01T20:27:21.123Z" (dlockd's format_time: UTC, milliseconds).
WallClock::time_point parse_rfc3339(const std::string& text) {
  std::tm parts{};
  int millis = 0;
  if (std::sscanf(text.c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &parts.tm_year, &parts.tm_mon,
                  &parts.tm_mday, &parts.tm_hour, &parts.tm_min, &parts.tm_sec, &millis) != 7) {
    throw std::runtime_error("election failover: cannot parse expires_at '" + text + "'");
  }
  parts.tm_year -= 1900;
  parts.tm_mon -= 1;
  return WallClock::from_time_t(timegm(&parts)) + std::chrono::milliseconds(millis);
}

std::string open_session(asio::io_context& io, Connection& c, const std::string& owner, int ttl_ms,
                         Answer& answer) {
  answer = call(io, c, http::verb::post, "/v1/sessions",
                "{\"owner\":\"" + owner + "\",\"ttl_ms\":" + std::to_string(ttl_ms) + "}");
  if (answer.status != 201) throw std::runtime_error("open session: " + answer.body);
  return json_string_field(answer.body, "session_id");
}

}  // namespace

ElectionFailover http_election_failover(const HttpTarget& target, const std::string& backend,
                                        int rounds, int ttl_ms) {
  constexpr int kWaitMs = 30000;  // W's and the observer's wait: far beyond any failover
  ElectionFailover result;
  asio::io_context io;
  Connection leader(io, target), waiter(io, target), observer(io, target);
  std::vector<double> grant_ms, observe_ms;
  std::uint64_t errors = 0, rounds_run = 0;
  std::mt19937 random(20201);  // fixed seed: runs pause alike
  std::uniform_int_distribution<int> stagger(0, 499);
  const auto start = Clock::now();
  for (int round = 0; round < rounds; ++round) {
    const std::string name = "/v1/elections/bench-election-" + std::to_string(round);
    const std::string value = "leader-" + std::to_string(round);
    // A round lasts about TTL + failover: back to back, rounds would start in step with a
    // periodic expiry check (etcd's lessor, every 500 ms) and all sample one phase of it.
    std::this_thread::sleep_for(std::chrono::milliseconds(stagger(random)));
    Answer answer;
    // W's session first, so that L's TTL is not spent on it.
    const std::string w_session = open_session(io, waiter, "bench-election-w", 60000, answer);
    const auto l_sent = Clock::now();
    const std::string l_session = open_session(io, leader, "bench-election-l", ttl_ms, answer);
    const auto wall_received = WallClock::now();
    result.ttl_ms = std::stod(json_number_field(answer.body, "ttl_ms"));
    // L's expiry as its client counts it (ADR-0011): the session request's send time + the
    // answered ttl_ms, never later than the backend's. Not `expires_at`: the sqlite store's
    // clock resumes from its file's last instant (ADR-0013) and may lag the wall clock.
    const auto l_expiry = l_sent + std::chrono::milliseconds(static_cast<long>(result.ttl_ms));
    if (round == 0) {
      const auto expires_at = parse_rfc3339(json_string_field(answer.body, "expires_at"));
      log(backend + " election failover: session round trip " +
          std::to_string(ms_between(l_sent, answer.at)) + " ms; expires_at − (wall clock at " +
          "the answer + ttl_ms) = " +
          std::to_string(
              std::chrono::duration<double, std::milli>(expires_at - wall_received).count() -
              result.ttl_ms) +
          " ms");
    }
    const Answer campaign =
        call(io, leader, http::verb::post, name + "/campaign",
             "{\"session_id\":\"" + l_session + "\",\"value\":\"" + value + "\"}");
    if (campaign.status != 200) {
      report_unexpected("campaign", campaign.status, campaign.body);
      result.note = "the leader's campaign answered " + std::to_string(campaign.status) + ": " +
                    campaign.body;
      call(io, waiter, http::verb::delete_, "/v1/sessions/" + w_session);
      break;  // the rounds measured so far still count
    }
    ++rounds_run;
    const std::string token = json_number_field(campaign.body, "fencing_token");
    // L never renews its session. W waits in the name's queue; the observer waits for a leader
    // newer than L's (token, value).
    Answer granted, observed;
    post(waiter, http::verb::post, name + "/campaign",
         "{\"session_id\":\"" + w_session + "\",\"value\":\"next-" + std::to_string(round) +
             "\",\"wait_ms\":" + std::to_string(kWaitMs) + "}",
         granted);
    post(observer, http::verb::get,
         name + "?after_token=" + token + "&after_value=" + value +
             "&wait_ms=" + std::to_string(kWaitMs),
         "", observed);
    const auto sent = Clock::now();
    io.restart();
    io.run();
    if (sent >= l_expiry) {
      // W and the observer must wait before L expires, or this is no failover.
      ++errors;
      log(backend + " election failover: round " + std::to_string(round) +
          " sent its waiters after L's expiry; not counted");
    } else if (granted.status != 200 || observed.status != 200) {
      ++errors;
      report_unexpected("failover campaign", granted.status, granted.body);
      report_unexpected("failover observe", observed.status, observed.body);
    } else {
      grant_ms.push_back(ms_between(l_expiry, granted.at));
      observe_ms.push_back(ms_between(l_expiry, observed.at));
    }
    if (granted.status == 200) {
      const Answer resigned = call(io, waiter, http::verb::post, name + "/resign",
                                   "{\"session_id\":\"" + w_session + "\",\"fencing_token\":" +
                                       json_number_field(granted.body, "fencing_token") + "}");
      if (resigned.status != 204) report_unexpected("resign", resigned.status, resigned.body);
    }
    call(io, waiter, http::verb::delete_, "/v1/sessions/" + w_session);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (const auto& [workload, samples] :
       {std::pair<const char*, const std::vector<double>*>{"failover-grant", &grant_ms},
        {"failover-observe", &observe_ms}}) {
    ClientStats stats;
    stats.op_ms = *samples;
    stats.ops = samples->size();
    stats.attempts = rounds_run;
    stats.errors = errors;
    result.measurements.push_back(summarize(backend, "http", workload, 1, seconds, {stats}));
  }
  return result;
}

}  // namespace dlock::bench
