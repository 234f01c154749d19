// What a real dlockd tells the world when it is in trouble, and what it keeps from one client:
// /readyz 503 while its backend calls hang, /healthz 200 meanwhile (C5 "Readiness"); and the
// log lines of one flooding client address bounded, counted and summarised while another
// client's lines still appear (C4 "Log lines").

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/parse.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "auth/crypto.h"
#include "auth/permissions.h"
#include "auth/tokens_file.h"
#include "support/dlockd_process.h"
#ifdef DLOCK_WITH_PG
#include <libpq-fe.h>

#include "support/postgres_server.h"
#endif

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;

#ifdef DLOCK_WITH_PG
// The PostgreSQL backend processes serving dlockd's pool (application_name "dlock").
std::vector<int> dlockd_backend_pids(const std::string& url) {
  PGconn* conn = PQconnectdb(url.c_str());
  std::vector<int> pids;
  PGresult* result =
      PQexec(conn, "SELECT pid FROM pg_stat_activity WHERE application_name = 'dlock'");
  for (int row = 0; PQresultStatus(result) == PGRES_TUPLES_OK && row < PQntuples(result); ++row) {
    pids.push_back(std::stoi(PQgetvalue(result, row, 0)));
  }
  PQclear(result);
  PQfinish(conn);
  return pids;
}

// Processes stopped (SIGSTOP) for as long as this lives: a backend that accepted the
// connection and never answers, which no client-side timeout of libpq notices.
class Stopped {
 public:
  explicit Stopped(std::vector<int> pids) : pids_(std::move(pids)) {
    for (int pid : pids_) ::kill(pid, SIGSTOP);
  }
  Stopped(const Stopped&) = delete;
  Stopped& operator=(const Stopped&) = delete;
  ~Stopped() { resume(); }
  void resume() {
    for (int pid : pids_) ::kill(pid, SIGCONT);
    pids_.clear();
  }

 private:
  std::vector<int> pids_;
};

int status_of(const std::string& address, const std::string& target) {
  return http_call(address, "GET", target).status;
}

// A request whose backend call hangs keeps a worker busy and nothing is answered: after the
// stall timeout (max(10 s, 2 x backend.timeout)) dlockd is wedged. /readyz says so (503) while
// /healthz, the liveness probe, stays 200 -- and answering a probe is not progress, so probing
// /healthz does not make /readyz ready again. Once the backend answers, /readyz is 200.
TEST(Readiness, ReadyzIs503WhileBackendCallsHangAndHealthzStays200) {
  PostgresServer postgres;
  postgres.ensure_database("dlock_wedge");
  DlockdOptions options;
  options.backend = "pg";
  options.pg_url = postgres.url("dlock_wedge");
  options.extra_args = {"--backend-timeout", "1s"};
  DlockdProcess dlockd(options);
  const std::string& address = dlockd.address();
  // Several requests at once, so the pool holds more than one connection: the request below
  // must find an idle (stopped) one rather than open a fresh one while the reaper uses another.
  std::vector<std::future<int>> warm;
  for (int i = 0; i < 4; ++i) {
    warm.push_back(std::async(std::launch::async, [&] {
      return http_call(address, "POST", "/v1/sessions", R"({"owner":"warm"})").status;
    }));
  }
  for (auto& answer : warm) ASSERT_EQ(answer.get(), 201);
  ASSERT_EQ(status_of(address, "/readyz"), 200);

  std::future<int> stuck;  // destroyed after `stopped` resumes the backend
  Stopped stopped(dlockd_backend_pids(options.pg_url));
  stuck = std::async(std::launch::async, [&] {
    return http_call(address, "POST", "/v1/sessions", R"({"owner":"stuck"})").status;
  });
  const auto wedged_at = std::chrono::steady_clock::now();
  ASSERT_EQ(stuck.wait_for(2s), std::future_status::timeout) << "the backend call did not hang";
  EXPECT_TRUE(wait_for([&] { return status_of(address, "/readyz") == 503; }, 30s, 250ms))
      << "/readyz never reported the wedge";
  EXPECT_GE(std::chrono::steady_clock::now() - wedged_at, 9s);  // not before the stall timeout
  for (int probe = 0; probe < 3; ++probe) {
    EXPECT_EQ(status_of(address, "/healthz"), 200) << probe;
    EXPECT_EQ(status_of(address, "/readyz"), 503) << probe;
  }

  stopped.resume();
  EXPECT_EQ(stuck.get(), 201);
  EXPECT_TRUE(wait_for([&] { return status_of(address, "/readyz") == 200; }, 10s, 100ms));
}
#endif

// One request from `source` (a loopback address of its own, so dlockd sees another client).
HttpResult call_from(const std::string& source, const std::string& address,
                     const std::string& method, const std::string& target,
                     const std::string& body = "", const std::string& bearer = "") {
  namespace beast = boost::beast;
  namespace http = beast::http;
  using tcp = boost::asio::ip::tcp;
  boost::asio::io_context io;
  tcp::socket socket(io, tcp::endpoint(boost::asio::ip::make_address(source), 0));
  const auto colon = address.rfind(':');
  socket.connect({boost::asio::ip::make_address(address.substr(0, colon)),
                  static_cast<unsigned short>(std::stoi(address.substr(colon + 1)))});
  http::request<http::string_body> request{http::string_to_verb(method), target, 11};
  request.set(http::field::host, address);
  request.set(http::field::content_type, "application/json");
  if (!bearer.empty()) request.set(http::field::authorization, "Bearer " + bearer);
  request.body() = body;
  request.prepare_payload();
  http::write(socket, request);
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  http::read(socket, buffer, response);
  HttpResult result;
  result.status = response.result_int();
  if (!response.body().empty()) result.json = boost::json::parse(response.body());
  return result;
}

// A session, then `rounds` acquire/release pairs from `source`: 2 audit lines a pair.
int lock_rounds(const std::string& source, const std::string& address, const std::string& key,
                int rounds) {
  const auto session = call_from(source, address, "POST", "/v1/sessions", R"({"owner":"o"})");
  if (session.status != 201) return 0;
  const std::string sid(session.json.at("session_id").as_string());
  int done = 0;
  for (; done < rounds; ++done) {
    const auto grant = call_from(source, address, "POST", "/v1/locks/" + key + "/acquire",
                                 R"({"session_id":")" + sid + "\"}");
    if (grant.status != 200) break;
    const auto token = std::to_string(grant.json.at("fencing_token").to_number<std::int64_t>());
    const auto release =
        call_from(source, address, "DELETE",
                  "/v1/locks/" + key + "?session_id=" + sid + "&fencing_token=" + token);
    if (release.status != 204) break;
  }
  return done;
}

double dropped_for_client_rate(const std::string& address) {
  const std::string name = "dlock_log_dropped_total{reason=\"client_rate\"} ";
  const auto body = http_call(address, "GET", "/metrics").body;
  const auto at = body.find(name);
  return at == std::string::npos ? -1 : std::stod(body.substr(at + name.size()));
}

std::vector<boost::json::object> log_lines(const std::string& path) {
  std::vector<boost::json::object> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    boost::system::error_code error;
    auto value = boost::json::parse(line, error);
    if (!error && value.is_object()) lines.push_back(std::move(value.as_object()));
  }
  return lines;
}

std::string field(const boost::json::object& line, const char* name) {
  const auto* value = line.if_contains(name);
  return value != nullptr && value->is_string() ? std::string(value->get_string()) : "";
}

// A client that floods gets its audit lines cut to its budget (100 a second, bursts of 200),
// every line it lost counted in its end notice; another client's lines are all there.
TEST(LogVolume, OneClientsFloodIsBoundedAndCountedWhileAnotherClientsLinesAppear) {
  DlockdProcess dlockd(DlockdOptions{});
  const std::string& address = dlockd.address();
  const auto started = std::chrono::steady_clock::now();
  std::atomic<bool> stop{false};
  std::vector<std::future<int>> flooders;
  for (int i = 0; i < 4; ++i) {
    flooders.push_back(std::async(std::launch::async, [&, i] {
      int pairs = 0;
      while (!stop) pairs += lock_rounds("127.0.0.1", address, "flood-" + std::to_string(i), 25);
      return pairs;
    }));
  }
  ASSERT_TRUE(wait_for([&] { return dropped_for_client_rate(address) >= 200; }, 60s, 50ms));
  const int other_pairs = lock_rounds("127.0.0.2", address, "other", 5);  // in the flood
  stop = true;
  int flood_pairs = 0;
  for (auto& flooder : flooders) flood_pairs += flooder.get();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_EQ(other_pairs, 5);

  // Counted from the log: the flooder's audit lines written and those its end notices (told
  // once it has been quiet for a second) say were dropped, the other client's audit lines.
  struct Tally {
    std::int64_t flood_written = 0, flood_dropped = 0, other = 0, starts = 0;
  } tally;
  const auto count = [&] {
    tally = {};
    for (const auto& line : log_lines(dlockd.log_path())) {
      const auto event = field(line, "event");
      if (event == "audit" && field(line, "remote") == "127.0.0.1") ++tally.flood_written;
      if (event == "audit" && field(line, "remote") == "127.0.0.2") ++tally.other;
      if (event != "client_log_limited" || field(line, "client") != "127.0.0.1") continue;
      if (field(line, "state") == "start") ++tally.starts;
      if (field(line, "state") != "end") continue;
      for (const auto& [kind, dropped] : line.at("dropped_by_kind").as_object()) {
        if (std::string_view(kind).starts_with("audit:")) tally.flood_dropped += dropped.as_int64();
      }
    }
    return tally.flood_written + tally.flood_dropped == 2 * flood_pairs;
  };
  // Nothing lost silently: every audit event of the flooder is either written or counted.
  EXPECT_TRUE(wait_for(count, 10s, 200ms))
      << tally.flood_written << " written + " << tally.flood_dropped << " counted, "
      << 2 * flood_pairs << " audit events";
  EXPECT_EQ(tally.other, 2 * 5);  // every grant and release of the other client
  EXPECT_GE(tally.starts, 1);
  EXPECT_GT(tally.flood_dropped, 0);
  // Bounded: the burst plus the rate over the flood (and a margin for the clock).
  EXPECT_LE(static_cast<double>(tally.flood_written), 200 + 100 * seconds + 50)
      << tally.flood_written << " lines in " << seconds << " s";
}

// Denials (401 and 403) follow the per-client log bounds of C4 like every audit line: one
// client's flood of forbidden requests is bounded and counted for that client, and another
// client's denials are each written; no denial is dropped without being counted for its client.
TEST(LogVolume, OneClientsDenialsDoNotEraseAnothersAuditLines) {
  char pattern[] = "/tmp/dlock-denials-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  const auto token = auth::random_token();
  std::ofstream(dir + "/tokens") << auth::tokens_file_line("reader", token,
                                                           auth::parse_permissions("read:else"))
                                 << "\n";
  DlockdOptions options;
  options.dir = dir;
  options.extra_args = {"--auth-tokens-file", dir + "/tokens"};
  DlockdProcess dlockd(options);
  const std::string& address = dlockd.address();
  constexpr int kFlood = 400;
  const auto flood = [&](int requests) {
    for (int i = 0; i < requests; ++i) {
      ASSERT_EQ(call_from("127.0.0.1", address, "GET", "/v1/locks", "", token).status, 403);
    }
  };
  flood(kFlood / 2);
  for (int i = 0; i < 5; ++i) {  // in the middle of the flood
    ASSERT_EQ(
        call_from("127.0.0.2", address, "GET", "/v1/locks/k" + std::to_string(i), "", token).status,
        403);
  }
  flood(kFlood / 2);
  struct Tally {
    std::int64_t flood_written = 0, flood_dropped = 0, other = 0;
  } tally;
  const auto count = [&] {
    tally = {};
    for (const auto& line : log_lines(dlockd.log_path())) {
      const auto event = field(line, "event");
      const bool denied = event == "audit" && field(line, "action") == "denied";
      if (denied && field(line, "remote") == "127.0.0.1") ++tally.flood_written;
      if (denied && field(line, "remote") == "127.0.0.2") ++tally.other;
      if (event != "client_log_limited" || field(line, "client") != "127.0.0.1") continue;
      if (field(line, "state") != "end") continue;
      if (const auto* dropped =
              line.at("dropped_by_kind").as_object().if_contains("audit:denied")) {
        tally.flood_dropped += dropped->as_int64();
      }
    }
    return tally.flood_written + tally.flood_dropped == kFlood && tally.other == 5;
  };
  // Every denial of the flooder written or counted for it (its end notice comes once it has
  // been quiet for a second); each of the other client's five written.
  EXPECT_TRUE(wait_for(count, 10s, 200ms))
      << tally.flood_written << " written + " << tally.flood_dropped << " counted of " << kFlood
      << "; the other client's: " << tally.other << " of 5";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dlock::testing
