#include "http_load.h"

#include "client/client_core.h"
#include "http_connection.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>

namespace dlock::bench {

using http_detail::Connection;
using http_detail::json_number_field;
using http_detail::json_string_field;
using http_detail::open_connections;
using http_detail::report_unexpected;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

std::optional<std::string>& configured_bearer() {
  static std::optional<std::string> token;
  return token;
}

}  // namespace

std::string resolve_bearer_token(const std::string& token_file) {
  client::ClientOptions options;
  options.token_file = token_file;
  return client::detail::resolve_token(options);
}

void set_bearer_token(std::string token) { configured_bearer() = std::move(token); }

std::string bearer_token() {
  return configured_bearer() ? *configured_bearer() : resolve_bearer_token("");
}

std::shared_ptr<asio::ssl::context> tls_client_context(const std::string& ca_file) {
  auto context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  context->set_options(asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                       asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
  context->load_verify_file(ca_file);
  context->set_verify_mode(asio::ssl::verify_peer);
  return context;
}

namespace {

// Opens one session per connection (before the clock starts).
void open_sessions(asio::io_context& io, std::vector<std::unique_ptr<Connection>>& connections,
                   const std::string& prefix) {
  int index = 0;
  for (auto& c : connections) {
    c->owner = prefix + "-" + std::to_string(index++);
    Connection* raw = c.get();
    raw->send(http::verb::post, "/v1/sessions",
              "{\"owner\":\"" + raw->owner + "\",\"ttl_ms\":600000}",
              [raw](int status, const std::string& body) {
                if (status != 201) throw std::runtime_error("open session: " + body);
                raw->session_id = json_string_field(body, "session_id");
              });
  }
  io.run();
  io.restart();
}

}  // namespace

namespace {

// One acquire + release per round on connection i: `acquire_target(i)` with `acquire_body`,
// released through `release_base(i)` + "?session_id=…&fencing_token=…".
Measurement http_rounds(const HttpTarget& target, const std::string& backend, int clients,
                        std::chrono::milliseconds duration, const std::string& path,
                        const std::string& workload,
                        const std::function<std::string(int)>& acquire_target,
                        const std::string& acquire_body,
                        const std::function<std::string(int)>& release_base) {
  asio::io_context io;
  auto connections = open_connections(io, {target}, clients);
  open_sessions(io, connections, "bench-" + workload);
  std::vector<ClientStats> stats(static_cast<std::size_t>(clients));
  const auto start = Clock::now();
  const auto deadline = start + duration;

  std::function<void(int)> round = [&](int i) {
    if (Clock::now() >= deadline) return;
    Connection* c = connections[static_cast<std::size_t>(i)].get();
    auto& out = stats[static_cast<std::size_t>(i)];
    const auto t0 = Clock::now();
    c->send(http::verb::post, acquire_target(i),
            "{\"session_id\":\"" + c->session_id + "\"," + acquire_body + "}",
            [&, c, i, t0](int status, const std::string& body) {
              const auto t1 = Clock::now();
              if (status != 200) {
                ++out.errors;
                report_unexpected("acquire", status, body);
                if (status < 0) return;
                return round(i);
              }
              const std::string token = json_number_field(body, "fencing_token");
              c->send(http::verb::delete_,
                      release_base(i) + "?session_id=" + c->session_id + "&fencing_token=" + token,
                      "", [&, i, t0, t1](int status2, const std::string& body2) {
                        if (status2 != 204) {
                          ++out.errors;
                          report_unexpected("release", status2, body2);
                        }
                        if (status2 < 0) return;
                        ++out.ops;
                        out.acquire_ms.push_back(ms_between(t0, t1));
                        out.op_ms.push_back(ms_between(t0, Clock::now()));
                        round(i);
                      });
            });
  };
  for (int i = 0; i < clients; ++i) round(i);
  io.run();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return summarize(backend, path, workload, clients, seconds, stats);
}

}  // namespace

Measurement http_pairs(const HttpTarget& target, const std::string& backend, int clients,
                       std::chrono::milliseconds duration, bool session_bound) {
  const std::string lease = session_bound ? R"("lease":"session")" : R"("ttl_ms":30000)";
  const auto key = [](int i) { return "/v1/locks/bench-http-" + std::to_string(i); };
  return http_rounds(
      target, backend, clients, duration, session_bound ? "http-sb" : "http", "pairs",
      [&](int i) { return key(i) + "/acquire"; }, lease, key);
}

const char* holder_workload(HolderShape shape) {
  switch (shape) {
    case HolderShape::kSharedPairs:
      return "shared-pairs";
    case HolderShape::kSharedHot:
      return "shared-hot";
    case HolderShape::kPermits:
      return "permits";
  }
  return "?";
}

Measurement http_holders(const HttpTarget& target, const std::string& backend, int clients,
                         std::chrono::milliseconds duration, HolderShape shape) {
  const bool permits = shape == HolderShape::kPermits;
  const std::string base =
      permits ? "/v1/semaphores/bench-http-permits" : "/v1/locks/bench-http-shared";
  const std::string body = permits ? R"("ttl_ms":30000,"limit":)" + std::to_string(clients)
                                   : R"("ttl_ms":30000,"mode":"shared")";
  const auto name = [&](int i) {
    return shape == HolderShape::kSharedPairs ? base + "-" + std::to_string(i) : base;
  };
  return http_rounds(
      target, backend, clients, duration, "http", holder_workload(shape),
      [&](int i) { return name(i) + "/acquire"; }, body, name);
}

Measurement http_hot(const std::vector<HttpTarget>& targets, const std::string& backend,
                     int clients, std::chrono::milliseconds duration,
                     std::vector<double>& handoff_ms, std::vector<double>& handoff_sent_ms,
                     bool session_bound) {
  const std::string lease = session_bound ? R"("lease":"session")" : R"("ttl_ms":30000)";
  asio::io_context io;
  auto connections = open_connections(io, targets, clients);
  open_sessions(io, connections, "bench-hot");
  std::vector<ClientStats> stats(static_cast<std::size_t>(clients));
  // Grants are exclusive, so the k-th grant received follows the (k-1)-th release.
  std::vector<Clock::time_point> granted_at, release_sent_at, released_at;
  const auto start = Clock::now();
  const auto deadline = start + duration;
  const std::string key = "bench-hot";

  std::function<void(int)> attempt = [&](int i) {
    if (Clock::now() >= deadline) return;
    Connection* c = connections[static_cast<std::size_t>(i)].get();
    auto& out = stats[static_cast<std::size_t>(i)];
    const auto t0 = Clock::now();
    ++out.attempts;
    c->send(http::verb::post, "/v1/locks/" + key + "/acquire",
            "{\"session_id\":\"" + c->session_id + "\"," + lease + ",\"wait_ms\":60000}",
            [&, c, i, t0](int status, const std::string& body) {
              const auto t1 = Clock::now();
              if (status != 200) {
                if (status != 409) {
                  ++out.errors;
                  report_unexpected("hot acquire", status, body);
                }
                if (status < 0) return;
                return attempt(i);
              }
              const std::size_t index = granted_at.size();
              granted_at.push_back(t1);
              released_at.emplace_back();
              release_sent_at.emplace_back();
              ++out.ops;
              out.op_ms.push_back(ms_between(t0, t1));
              const std::string token = json_number_field(body, "fencing_token");
              release_sent_at[index] = Clock::now();
              c->send(
                  http::verb::delete_,
                  "/v1/locks/" + key + "?session_id=" + c->session_id + "&fencing_token=" + token,
                  "", [&, i, index](int status2, const std::string& body2) {
                    released_at[index] = Clock::now();
                    if (status2 != 204) {
                      ++out.errors;
                      report_unexpected("hot release", status2, body2);
                    }
                    if (status2 < 0) return;
                    attempt(i);
                  });
            });
  };
  for (int i = 0; i < clients; ++i) attempt(i);
  io.run();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (std::size_t k = 1; k < granted_at.size(); ++k) {
    if (released_at[k - 1] != Clock::time_point{}) {
      handoff_ms.push_back(ms_between(released_at[k - 1], granted_at[k]));
      handoff_sent_ms.push_back(ms_between(release_sent_at[k - 1], granted_at[k]));
    }
  }
  const char* path = targets.size() > 1 ? "http2" : session_bound ? "http-sb" : "http";
  return summarize(backend, path, "hot", clients, seconds, stats);
}

void http_handoff(const HttpTarget& holder_target, const HttpTarget& waiter_target, int waiters,
                  int rounds, const std::function<double()>& queued,
                  std::vector<double>& handoff_ms, std::vector<double>& handoff_sent_ms) {
  asio::io_context io;
  auto connections = open_connections(io, {holder_target}, 1);
  for (auto& c : open_connections(io, {waiter_target}, waiters))
    connections.push_back(std::move(c));
  open_sessions(io, connections, "bench-handoff");
  Connection& holder = *connections[0];
  const std::string key = "bench-handoff";
  const auto release_target = [&](const Connection& c, const std::string& token) {
    return "/v1/locks/" + key + "?session_id=" + c.session_id + "&fencing_token=" + token;
  };
  for (int round = 0; round < rounds; ++round) {
    std::string token;
    holder.send(http::verb::post, "/v1/locks/" + key + "/acquire",
                "{\"session_id\":\"" + holder.session_id + "\",\"ttl_ms\":30000}",
                [&](int status, const std::string& body) {
                  if (status != 200) report_unexpected("handoff holder acquire", status, body);
                  token = json_number_field(body, "fencing_token");
                });
    io.run();
    io.restart();
    if (token.empty()) return;
    Clock::time_point first_grant{};
    for (int i = 1; i <= waiters; ++i) {
      Connection* c = connections[static_cast<std::size_t>(i)].get();
      c->send(http::verb::post, "/v1/locks/" + key + "/acquire",
              "{\"session_id\":\"" + c->session_id + "\",\"ttl_ms\":30000,\"wait_ms\":60000}",
              [&, c](int status, const std::string& body) {
                if (status != 200) return report_unexpected("handoff waiter", status, body);
                if (first_grant == Clock::time_point{}) first_grant = Clock::now();
                c->send(http::verb::delete_,
                        release_target(*c, json_number_field(body, "fencing_token")), "",
                        [](int status2, const std::string& body2) {
                          if (status2 != 204) report_unexpected("handoff release", status2, body2);
                        });
              });
    }
    // Every waiter queued at dlockd (their requests written and parked) before the release.
    const auto give_up = Clock::now() + std::chrono::seconds(30);
    while (queued() < waiters && Clock::now() < give_up) {
      io.run_for(std::chrono::milliseconds(1));
    }
    Clock::time_point released_at{};
    const auto release_sent = Clock::now();
    holder.send(http::verb::delete_, release_target(holder, token), "",
                [&](int status, const std::string& body) {
                  released_at = Clock::now();
                  if (status != 204) report_unexpected("handoff holder release", status, body);
                });
    io.run();  // until every waiter has been granted and has released
    io.restart();
    if (first_grant != Clock::time_point{} && released_at != Clock::time_point{}) {
      handoff_ms.push_back(ms_between(released_at, first_grant));
      handoff_sent_ms.push_back(ms_between(release_sent, first_grant));
    }
  }
}

FillResult http_fill(const HttpTarget& target, int connections_count, std::uint64_t sessions,
                     std::uint64_t locks) {
  asio::io_context io;
  auto connections = open_connections(io, {target}, connections_count);
  FillResult result;
  std::vector<std::string> session_ids;
  std::uint64_t next = 0;
  const auto start = Clock::now();
  std::function<void(Connection*)> open_next = [&](Connection* c) {
    if (next >= sessions) return;
    const auto n = next++;
    c->send(http::verb::post, "/v1/sessions",
            "{\"owner\":\"bench-fill-" + std::to_string(n) + "\",\"ttl_ms\":3600000}",
            [&, c](int status, const std::string& body) {
              if (status != 201) ++result.errors;
              if (status < 0) return;
              if (status == 201) session_ids.push_back(json_string_field(body, "session_id"));
              open_next(c);
            });
  };
  for (auto& c : connections) open_next(c.get());
  io.run();
  io.restart();
  result.sessions = session_ids.size();
  result.session_ids = session_ids;
  if (session_ids.empty()) return result;
  next = 0;
  std::function<void(Connection*)> acquire_next = [&](Connection* c) {
    if (next >= locks) return;
    const auto n = next++;
    const auto& sid = session_ids[n % session_ids.size()];
    c->send(http::verb::post, "/v1/locks/bench-fill-" + std::to_string(n) + "/acquire",
            "{\"session_id\":\"" + sid + "\",\"ttl_ms\":3600000}",
            [&, c](int status, const std::string&) {
              if (status == 200)
                ++result.locks;
              else
                ++result.errors;
              if (status < 0) return;
              acquire_next(c);
            });
  };
  for (auto& c : connections) acquire_next(c.get());
  io.run();
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

std::uint64_t http_blocked_waiters(const HttpTarget& target,
                                   const std::vector<std::string>& session_ids, int waiters,
                                   std::chrono::milliseconds settle,
                                   const std::function<void()>& while_blocked) {
  if (session_ids.size() < 2) return 0;
  asio::io_context io;
  const std::string key = "bench-waited";
  Connection holder(io, target);
  bool held = false;
  holder.send(http::verb::post, "/v1/locks/" + key + "/acquire",
              "{\"session_id\":\"" + session_ids[0] + "\",\"ttl_ms\":600000}",
              [&](int status, const std::string&) { held = status == 200; });
  io.run();
  io.restart();
  if (!held) return 0;
  std::vector<std::unique_ptr<Connection>> connections;
  std::uint64_t written = 0;
  for (int i = 0; i < waiters; ++i) {
    try {
      connections.push_back(std::make_unique<Connection>(io, target));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[dlock-bench] waiter %d: %s\n", i, e.what());
      break;
    }
    const auto& sid = session_ids[1 + static_cast<std::size_t>(i) % (session_ids.size() - 1)];
    connections.back()->send(http::verb::post, "/v1/locks/" + key + "/acquire",
                             "{\"session_id\":\"" + sid + "\",\"ttl_ms\":30000,\"wait_ms\":120000}",
                             [](int, const std::string&) {});
    ++written;
  }
  // Let the writes go out and dlockd queue them, then look, then drop everything.
  asio::steady_timer timer(io, settle);
  timer.async_wait([&](beast::error_code) {
    while_blocked();
    io.stop();
  });
  io.run();
  return written;
}

std::string http_get_text(const HttpTarget& target, const std::string& path) {
  try {
    asio::io_context io;
    Connection c(io, target);
    std::string text;
    c.send(http::verb::get, path, "", [&](int status, const std::string& body) {
      if (status == 200) text = body;
    });
    io.run();
    return text;
  } catch (const std::exception&) {
    return "";
  }
}

namespace {

// `clients` connections, each sending one body-less request after another until `duration`
// ends: `target_of()` gives the next request's target, `expected` is the status that counts as
// done; any other status is an error (reported, and the connection stops on a transport error).
Measurement http_requests(const HttpTarget& target, const std::string& backend, int clients,
                          std::chrono::milliseconds duration, const std::string& workload,
                          http::verb verb, const std::function<std::string()>& target_of,
                          int expected) {
  asio::io_context io;
  auto connections = open_connections(io, {target}, clients);
  std::vector<ClientStats> stats(static_cast<std::size_t>(clients));
  const auto start = Clock::now();
  const auto deadline = start + duration;
  std::function<void(int)> next = [&](int i) {
    if (Clock::now() >= deadline) return;
    auto& out = stats[static_cast<std::size_t>(i)];
    const auto t0 = Clock::now();
    connections[static_cast<std::size_t>(i)]->send(
        verb, target_of(), "", [&, i, t0](int status, const std::string& body) {
          if (status != expected) {
            ++out.errors;
            report_unexpected(workload.c_str(), status, body);
            if (status < 0) return;
          } else {
            ++out.ops;
            out.op_ms.push_back(ms_between(t0, Clock::now()));
          }
          next(i);
        });
  };
  for (int i = 0; i < clients; ++i) next(i);
  io.run();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return summarize(backend, "http", workload, clients, seconds, stats);
}

}  // namespace

Measurement http_probe(const HttpTarget& target, const std::string& backend, int clients,
                       std::chrono::milliseconds duration, ProbeShape shape) {
  // The probed lock is never held: a read answers 404, the health check 200.
  if (shape == ProbeShape::kFloor) {
    return http_requests(
        target, backend, clients, duration, "floor", http::verb::get,
        [] { return std::string("/healthz"); }, 200);
  }
  return http_requests(
      target, backend, clients, duration, "read", http::verb::get,
      [] { return std::string("/v1/locks/bench-http-probe"); }, 404);
}

Measurement http_keepalives(const HttpTarget& target, const std::string& backend, int clients,
                            const std::vector<std::string>& session_ids,
                            std::chrono::milliseconds duration) {
  if (session_ids.empty()) return summarize(backend, "http", "keepalive", clients, 0, {});
  std::size_t next = 0;
  return http_requests(
      target, backend, clients, duration, "keepalive", http::verb::post,
      [&] { return "/v1/sessions/" + session_ids[next++ % session_ids.size()] + "/keepalive"; },
      200);
}

}  // namespace dlock::bench
