// The linearizability workload (issue 43, docs/correctness.md) against real dlockd on every
// backend, without faults and under the faults of nemesis.h: sessions acquire, extend, read,
// release and abandon a few mutex, read-write lock and semaphore keys through the C++ client
// library; meanwhile others campaign, proclaim, resign and observe an election, and others hold a
// key with a lock-delay that an admin revokes now and then, over plain HTTP (one request per call,
// no retries). Every call is recorded (sent and answered on the steady clock, what was asked, what
// came back) as a history in the format of README.md, and dlock-lincheck checks it. The histories
// stay as artefacts in <build>/tests/linearizability/histories/<backend>.json (with <backend>-html/
// when illegal).
//
// Short mode (CI): 10 s per backend without faults, one round of every fault per backend. The
// network partitions need root (network namespaces); without it they are left out, and the run
// says so on stderr and in its history's description.
// DLOCK_LIN_LONG=1, the long mode: 60 s without faults, 120 s of fault rounds. DLOCK_LIN_SECONDS
// sets the length of either run.

#include <gtest/gtest.h>

#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dlock/client.h"
#include "linearizability/workload/nemesis.h"
#include "support/dlockd_backends.h"
#include "support/dlockd_process.h"
#ifdef DLOCK_WITH_NETNS
#include <unistd.h>

#include "support/partitions.h"
#endif

namespace dlock {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
      .count();
}

std::int64_t ns_of(SteadyClock::time_point at) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
}

bool long_mode() {
  const char* text = std::getenv("DLOCK_LIN_LONG");
  return text != nullptr && std::string(text) == "1";
}

// How long a run lasts: DLOCK_LIN_SECONDS, else `short_s` or, in the long mode, `long_s`.
int run_seconds(int short_s, int long_s) {
  const char* text = std::getenv("DLOCK_LIN_SECONDS");
  if (text != nullptr && *text != '\0') return std::atoi(text);
  return long_mode() ? long_s : short_s;
}

// Sessions outlive the run (the models see a session end only through close): its length and a
// minute more.
std::int64_t session_ttl_ms = 60'000;

// How long a plain-HTTP call may take before it is given up as unknown: as the client library's
// request timeout, shorter than a partition when the run has partitions (a request sent into one
// may get no answer, and no error, ever).
milliseconds http_timeout = std::chrono::minutes(5);

// Sessions opened so far: the nemesis starts once every worker has its session (a session's open
// is not a recorded call, and a worker without one cannot work).
std::atomic<int> sessions_open{0};

// When the workers stop: set before they start, or, under faults, once the nemesis is done.
struct Until {
  std::atomic<std::int64_t> ns{std::numeric_limits<std::int64_t>::max()};
  bool before() const { return now_ns() < ns.load(); }
};

// A key of the workload. Short TTLs are abandoned now and then, so that grants expire and are
// taken over during the run; the others outlive it unless released.
struct KeySpec {
  std::string name;
  std::string primitive;  // mutex, rwlock, semaphore
  milliseconds ttl;
};

// The history, shared by the workers.
class Recorder {
 public:
  void add(json::object op) {
    std::lock_guard lock(mutex_);
    operations_.push_back(std::move(op));
  }
  json::object history(const std::string& backend, const std::string& description) {
    std::lock_guard lock(mutex_);
    return {{"backend", backend},
            {"description", "tests/linearizability/workload_test.cc, " + description},
            {"operations", operations_}};
  }

 private:
  std::mutex mutex_;
  json::array operations_;
};

// After a call with an unknown outcome (a fault): the caller waits 100-200 ms before its next
// call, as a client backs off, so that an outage of a second is a handful of unknown calls, not
// thousands (each is pending until the end of the history: the checker's cost). And an unknown
// read or observe is not recorded: it changed nothing and says nothing.
bool keep_unknown(const json::object& op) {
  thread_local std::mt19937 random(std::random_device{}());
  std::this_thread::sleep_for(milliseconds(100 + random() % 100));  // a client's back-off: pacing
  return op.at("op") != "read" && op.at("op") != "observe";
}

// One call: sent now, answered when `call` returns or throws. `call` fills "output" and returns
// the outcome; the errors that say the call did not take effect are "fail" with their code, and
// those that leave it open (a 503, a lost connection) "unknown".
template <class Call>
std::string record(Recorder& recorder, json::object op, Call&& call) {
  op["invoke_ns"] = now_ns();
  std::string outcome = "fail";
  json::object output;
  const auto failed = [&](const char* code) { output = {{"error", code}}; };
  try {
    outcome = call(output);
  } catch (const LockLostError&) {
    failed("lock_lost");
  } catch (const ConflictError&) {
    failed("conflict");
  } catch (const SessionNotFoundError&) {
    failed("session_not_found");
  } catch (const ResourceExhaustedError&) {
    failed("too_many_requests");
  } catch (const UnavailableError&) {  // also UnknownOutcomeError, NotLeaderError
    outcome = "unknown";
    output = {};
  }
  op["complete_ns"] = now_ns();
  op["outcome"] = outcome;
  op["output"] = output;
  if (outcome != "unknown" || keep_unknown(op)) recorder.add(std::move(op));
  return outcome;
}

// One call over plain HTTP (one request, no retry): 2xx ok, 409 and 404 and 429 fail with their
// code, 5xx or no answer unknown. `on_ok` fills the output from a 2xx answer.
std::string record_http(Recorder& recorder, json::object op, const std::string& address,
                        const std::string& method, const std::string& target,
                        const json::object& body,
                        const std::function<void(const testing::HttpResult&, json::object&)>& on_ok,
                        const std::map<std::string, std::string>& headers = {}) {
  op["invoke_ns"] = now_ns();
  std::string outcome = "unknown";
  json::object output;
  try {
    const auto answer = testing::http_call(
        address, method, target, body.empty() ? "" : json::serialize(body), headers, http_timeout);
    if (answer.status >= 200 && answer.status < 300) {
      outcome = "ok";
      on_ok(answer, output);
    } else if (answer.status == 409 || answer.status == 404 || answer.status == 429) {
      outcome = "fail";
      output = {{"error", answer.error_code()}};
    } else if (answer.status < 500) {
      ADD_FAILURE() << method << " " << target << ": " << answer.status << " " << answer.body;
      outcome = "fail";
      output = {{"error", answer.error_code()}};
    }
  } catch (const std::runtime_error& error) {
    // No answer: unknown. No connection (dlockd down): never sent, no effect.
    if (std::string_view(error.what()).starts_with("connect ")) {
      outcome = "fail";
      output = {{"error", "not_sent"}};
    }
  }
  op["complete_ns"] = now_ns();
  op["outcome"] = outcome;
  op["output"] = output;
  if (output.contains("error") && output.at("error") == "not_sent") keep_unknown(op);  // paced
  if (outcome != "unknown" || keep_unknown(op)) recorder.add(std::move(op));
  return outcome;
}

std::uint64_t token_of(const testing::HttpResult& answer) {
  return answer.json.at("fencing_token").to_number<std::uint64_t>();
}

// Opens a session over HTTP; throws unless 201.
std::string open_http_session(const std::string& address, const std::string& owner,
                              int lock_delay_ms) {
  json::object body{{"owner", owner}, {"ttl_ms", session_ttl_ms}};
  if (lock_delay_ms > 0) body["lock_delay_ms"] = lock_delay_ms;
  const auto answer = testing::http_call(address, "POST", "/v1/sessions", json::serialize(body));
  if (answer.status != 201) throw std::runtime_error("open session: " + answer.body);
  return std::string(answer.json.at("session_id").as_string());
}

// Closes `session` (recorded once for each of `keys`, of `primitive`).
void close_http_session(Recorder& recorder, const std::string& address, int id,
                        const std::string& session, const std::string& primitive,
                        const std::vector<std::string>& keys) {
  const auto invoke_ns = now_ns();
  std::string outcome = "unknown";
  json::object output;
  try {
    const auto answer = testing::http_call(address, "DELETE", "/v1/sessions/" + session);
    if (answer.status == 204) {
      outcome = "ok";
    } else if (answer.status == 404) {
      outcome = "fail";
      output = {{"error", answer.error_code()}};
    }
  } catch (const std::runtime_error&) {
  }
  const auto complete_ns = now_ns();
  for (const auto& key : keys) {
    recorder.add({{"client", id},
                  {"server", address},
                  {"session", session},
                  {"key", key},
                  {"primitive", primitive},
                  {"op", "close"},
                  {"input", json::object{}},
                  {"output", output},
                  {"outcome", outcome},
                  {"invoke_ns", invoke_ns},
                  {"complete_ns", complete_ns}});
  }
}

// An election's candidate: campaigns (at once or waiting 200 ms), proclaims, resigns and
// observes until `until`; resigns and closes its session at the end.
void campaign_work(int id, const std::string& address, const std::string& name, const Until& until,
                   Recorder& recorder, std::atomic<int>& grants) {
  std::mt19937 random(static_cast<unsigned>(id) * 104729u + 3u);
  const auto session = open_http_session(address, "candidate-" + std::to_string(id), 0);
  ++sessions_open;
  const std::string route = "/v1/elections/" + name;
  const auto base = [&](const std::string& op) {
    return json::object{{"client", id}, {"server", address},       {"session", session},
                        {"key", name},  {"primitive", "election"}, {"op", op}};
  };
  std::uint64_t leading = 0;  // the token this candidate leads with; 0: none
  int values = 0;
  // Observes the election (recorded); the leader's token if `mine` leads.
  const auto observe = [&](const std::string& mine) {
    auto op = base("observe");
    op.erase("session");
    std::optional<std::uint64_t> mine_leads;
    record_http(
        recorder, std::move(op), address, "GET", route, {},
        [&](const testing::HttpResult& answer, json::object& output) {
          output = {{"token", token_of(answer)}, {"value", answer.json.at("leader").at("value")}};
          if (const auto* session = answer.json.as_object().if_contains("session_id")) {
            output["session"] = *session;
            if (session->as_string() == mine) mine_leads = token_of(answer);
          }
        });
    return mine_leads;
  };
  const auto resign = [&] {
    auto op = base("resign");
    op["input"] = {{"token", leading}};
    record_http(recorder, std::move(op), address, "POST", route + "/resign",
                {{"session_id", session}, {"fencing_token", leading}},
                [](const testing::HttpResult&, json::object&) {});
    leading = 0;  // resigned, lost or unknown: no longer counted on
  };
  while (until.before()) {
    const int dice = static_cast<int>(random() % 10);
    if (dice < 3) {
      observe("");
    } else if (leading && dice < 6) {
      const std::string value = "v" + std::to_string(id) + "-" + std::to_string(++values);
      auto op = base("proclaim");
      op["input"] = {{"token", leading}, {"value", value}};
      const auto outcome =
          record_http(recorder, std::move(op), address, "POST", route + "/proclaim",
                      {{"session_id", session}, {"fencing_token", leading}, {"value", value}},
                      [](const testing::HttpResult& answer, json::object& output) {
                        output = {{"token", token_of(answer)}};
                      });
      if (outcome != "ok") leading = 0;
    } else if (leading && dice < 8) {
      resign();
    } else {
      const std::string value = "v" + std::to_string(id) + "-" + std::to_string(++values);
      const int wait_ms = random() % 3 == 0 ? 200 : 0;
      auto op = base("campaign");
      op["input"] = {{"value", value}, {"wait_ms", wait_ms}};
      std::optional<std::uint64_t> token;
      const auto outcome =
          record_http(recorder, std::move(op), address, "POST", route + "/campaign",
                      {{"session_id", session}, {"value", value}, {"wait_ms", wait_ms}},
                      [&](const testing::HttpResult& answer, json::object& output) {
                        token = token_of(answer);
                        output = {{"token", *token}};
                      });
      if (outcome == "unknown") token = observe(session);  // a fault: did it win?
      if (token) {
        leading = *token;
        ++grants;
      }
    }
  }
  if (leading) resign();
  close_http_session(recorder, address, id, session, "election", {name});
}

// A holder of `key` whose session has a lock-delay: acquires, extends, releases and abandons it
// (TTL 1.5 s) until `until`; meanwhile revoke_work revokes it now and then.
void delay_work(int id, const std::string& address, const std::string& key, const Until& until,
                Recorder& recorder, std::atomic<int>& grants) {
  constexpr int kDelayMs = 200;
  constexpr int kTtlMs = 1500;
  std::mt19937 random(static_cast<unsigned>(id) * 15485863u + 5u);
  const auto session = open_http_session(address, "delayed-" + std::to_string(id), kDelayMs);
  ++sessions_open;
  const std::string route = "/v1/locks/" + key;
  const auto base = [&](const std::string& op) {
    return json::object{{"client", id}, {"server", address},        {"session", session},
                        {"key", key},   {"primitive", "lockdelay"}, {"op", op}};
  };
  const auto ttl_of = [](const testing::HttpResult& answer, json::object& output) {
    output = {{"token", token_of(answer)},
              {"ttl_ms", answer.json.at("ttl_ms").to_number<std::int64_t>()}};
  };
  std::uint64_t holding = 0;  // the token of the grant held; 0: none
  // Reads the key (recorded); the token of this session's grant if it holds it.
  const auto read = [&] {
    auto op = base("read");
    op.erase("session");
    std::optional<std::uint64_t> mine;
    record_http(recorder, std::move(op), address, "GET", route, {},
                [&](const testing::HttpResult& answer, json::object& output) {
                  json::array holders;
                  for (const auto& holder : answer.json.at("holders").as_array()) {
                    holders.push_back(json::object{{"session", holder.at("session_id")},
                                                   {"token", holder.at("fencing_token")}});
                    if (holder.at("session_id").as_string() == session) {
                      mine = holder.at("fencing_token").to_number<std::uint64_t>();
                    }
                  }
                  output = {{"holders", holders}};
                });
    return mine;
  };
  while (until.before()) {
    const int dice = static_cast<int>(random() % 10);
    if (holding && dice < 4) {
      auto op = base("release");
      op["input"] = {{"token", holding}};
      record_http(recorder, std::move(op), address, "DELETE",
                  route + "?session_id=" + session + "&fencing_token=" + std::to_string(holding),
                  {}, [](const testing::HttpResult&, json::object&) {});
      holding = 0;
    } else if (holding && dice < 7) {
      auto op = base("extend");
      op["input"] = {{"token", holding}, {"ttl_ms", kTtlMs}, {"lock_delay_ms", kDelayMs}};
      if (record_http(recorder, std::move(op), address, "POST", route + "/extend",
                      {{"session_id", session}, {"fencing_token", holding}, {"ttl_ms", kTtlMs}},
                      ttl_of) != "ok") {
        holding = 0;
      }
    } else if (holding && dice < 9) {
      holding = 0;  // abandoned: it expires, and its delay runs
    } else if (!holding && dice < 7) {
      auto op = base("acquire");
      op["input"] = {{"ttl_ms", kTtlMs}, {"lock_delay_ms", kDelayMs}};
      std::optional<std::uint64_t> token;
      if (record_http(recorder, std::move(op), address, "POST", route + "/acquire",
                      {{"session_id", session}, {"ttl_ms", kTtlMs}},
                      [&](const testing::HttpResult& answer, json::object& output) {
                        ttl_of(answer, output);
                        token = token_of(answer);
                      }) == "unknown") {
        token = read();  // a fault: was it granted?
      }
      if (token) {
        holding = *token;
        ++grants;
      }
    } else {
      read();
    }
  }
  if (holding) {
    auto op = base("release");
    op["input"] = {{"token", holding}};
    record_http(recorder, std::move(op), address, "DELETE",
                route + "?session_id=" + session + "&fencing_token=" + std::to_string(holding), {},
                [](const testing::HttpResult&, json::object&) {});
  }
  close_http_session(recorder, address, id, session, "lockdelay", {key});
}

constexpr const char* kAdminToken = "linearizability-admin-0123456789abcdef";

// The admin: revokes `key` every 150-450 ms until `until`.
void revoke_work(int id, const std::string& address, const std::string& key, const Until& until,
                 Recorder& recorder) {
  std::mt19937 random(static_cast<unsigned>(id) + 99u);
  while (until.before()) {
    std::this_thread::sleep_for(milliseconds(150 + random() % 300));  // a pace, not a wait
    record_http(recorder,
                {{"client", id},
                 {"server", address},
                 {"key", key},
                 {"primitive", "lockdelay"},
                 {"op", "revoke"}},
                address, "POST", "/v1/admin/locks/" + key + "/revoke", {},
                [](const testing::HttpResult& answer, json::object& output) {
                  output = {{"revoked", answer.json.at("revoked").as_bool()}};
                  if (const auto* token = answer.json.as_object().if_contains("fencing_token")) {
                    output["token"] = *token;
                  }
                },
                {{"Authorization", std::string("Bearer ") + kAdminToken}});
  }
}

struct Held {
  FencingToken token = 0;
  HoldMode mode = HoldMode::kExclusive;
};

// One session's calls until `until`; at the end it releases what it holds.
void work(int id, client::Client& client, const std::string& server,
          const std::vector<KeySpec>& keys, const Until& until, Recorder& recorder,
          std::atomic<int>& grants) {
  std::mt19937 random(static_cast<unsigned>(id) * 7919u + 17u);
  const std::string session =
      client.open_session("lin-" + std::to_string(id), milliseconds(session_ttl_ms)).session_id;
  ++sessions_open;
  std::map<std::string, Held> held;
  const auto base = [&](const KeySpec& key, const std::string& op) {
    return json::object{{"client", id},    {"server", server},           {"session", session},
                        {"key", key.name}, {"primitive", key.primitive}, {"op", op}};
  };
  // Reads `key` (recorded); this session's token if it holds it.
  const auto read = [&](const KeySpec& key) {
    auto op = base(key, "read");
    op.erase("session");
    std::optional<FencingToken> mine;
    record(recorder, std::move(op), [&](json::object& output) {
      json::array holders;
      for (const auto& holder : client.holders(key.name)) {
        holders.push_back(
            json::object{{"session", holder.session_id}, {"token", holder.fencing_token}});
        if (holder.session_id == session) mine = holder.fencing_token;
      }
      output = {{"holders", holders}};
      return std::string("ok");
    });
    return mine;
  };
  const auto release = [&](const KeySpec& key, Held grant) {
    auto op = base(key, "release");
    op["input"] = {{"token", grant.token}};
    record(recorder, std::move(op), [&](json::object&) {
      client.release(key.name, session, grant.token, {}, {}, grant.mode);
      return std::string("ok");
    });
    held.erase(key.name);  // released, lost or unknown: this client no longer counts on it
  };
  while (until.before()) {
    const KeySpec& key = keys[random() % keys.size()];
    const auto it = held.find(key.name);
    const int dice = static_cast<int>(random() % 20);
    if (it != held.end() && dice < 8) {
      release(key, it->second);
    } else if (it != held.end() && dice < 14) {
      auto op = base(key, "extend");
      op["input"] = {{"token", it->second.token}, {"ttl_ms", key.ttl.count()}};
      const Held grant = it->second;
      const auto outcome = record(recorder, std::move(op), [&](json::object& output) {
        const auto result =
            client.extend(key.name, session, grant.token, key.ttl, {}, {}, grant.mode);
        output = {{"token", result.fencing_token},
                  {"ttl_ms", result.ttl.count()},
                  {"expires_ns", ns_of(result.client_deadline)}};
        return std::string("ok");
      });
      if (outcome != "ok") held.erase(key.name);
    } else if (it != held.end() && dice < 16) {
      if (key.ttl < milliseconds(5000)) held.erase(key.name);  // abandoned: left to expire
    } else if (dice < 18) {
      read(key);
    } else {
      auto op = base(key, "acquire");
      const milliseconds wait(random() % 5 == 0 ? 300 : 0);
      HoldMode mode = HoldMode::kExclusive;
      std::uint32_t limit = 0;
      json::object input{{"ttl_ms", key.ttl.count()}, {"wait_ms", wait.count()}};
      if (key.primitive == "rwlock") {
        mode = random() % 3 == 0 ? HoldMode::kExclusive : HoldMode::kShared;
        input["mode"] = to_string(mode);
      } else if (key.primitive == "semaphore") {
        mode = HoldMode::kPermit;
        limit = random() % 10 == 0 ? 3 : 2;  // now and then another limit: a conflict
        input["limit"] = limit;
      }
      op["input"] = std::move(input);
      std::optional<LockHandle> grant;
      const auto outcome = record(recorder, std::move(op), [&](json::object& output) {
        grant = limit > 0 ? client.acquire_permit(key.name, session, limit, key.ttl, wait)
                          : client.acquire(key.name, session, key.ttl, wait, {}, {}, mode);
        if (!grant) {
          output = {{"error", "held"}};
          return std::string("fail");
        }
        output = {{"token", grant->fencing_token}, {"expires_ns", ns_of(grant->client_deadline)}};
        return std::string("ok");
      });
      if (grant) {
        held[key.name] = {grant->fencing_token, mode};
        ++grants;
      } else if (outcome == "unknown") {
        // A fault: was it granted? (A read lists every holder; a shared holder or permit of this
        // session is this grant, the session asks one at a time.)
        if (const auto mine = read(key)) held[key.name] = {*mine, mode};
      }
    }
  }
  for (const auto& key : keys) {
    if (const auto it = held.find(key.name); it != held.end()) release(key, it->second);
  }
  // The close ends the grants this session abandoned: recorded once per key (the models see
  // one key each), with the same times.
  const auto invoke_ns = now_ns();
  std::string outcome = "ok";
  json::object output;
  try {
    client.close_session(session);
  } catch (const SessionNotFoundError&) {
    outcome = "fail", output = {{"error", "session_not_found"}};
  } catch (const UnavailableError&) {
    outcome = "unknown";
  }
  const auto complete_ns = now_ns();
  for (const auto& key : keys) {
    auto op = base(key, "close");
    op["invoke_ns"] = invoke_ns;
    op["complete_ns"] = complete_ns;
    op["outcome"] = outcome;
    op["output"] = output;
    recorder.add(std::move(op));
  }
}

// Runs dlock-lincheck (go run, from its module) on `history`; returns its exit status and output.
std::pair<int, std::string> lincheck(const std::string& history, const std::string& html_dir) {
  const std::string command = std::string("cd '") + DLOCK_LINCHECK_DIR +
                              "' && GOFLAGS=-mod=readonly '" + DLOCK_GO_EXECUTABLE +
                              "' run ./cmd/dlock-lincheck -time-limit 60s -require "
                              "mutex,rwlock,semaphore,election,lockdelay -html-dir '" +
                              html_dir + "' '" + history + "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  char buffer[4096];
  while (const auto n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

// A run: dlockd on `backend` (two where the backend is shared: pg, etcd), the workers of this
// file through them until `until`, and the history checked. `faults`: the nemesis of nemesis.h
// runs meanwhile (`only_partitions`: its network partitions alone), and the workers stop once it
// is done.
void run_and_check(const std::string& backend, bool faults, bool only_partitions = false) {
  const std::string label = backend + (only_partitions ? "-partitions" : faults ? "-faults" : "");
  const int seconds = run_seconds(10, only_partitions ? 60 : faults ? 120 : 60);
  session_ttl_ms = std::max<std::int64_t>(60'000, (seconds + 60) * 1000LL);
  std::unique_ptr<testing::SteppedClock> clock;
  if (faults && !only_partitions && testing::SteppedClock::available()) {
    clock = std::make_unique<testing::SteppedClock>();
  }
  auto dlockd =
      testing::dlockd_options(backend, faults ? "dlock_lin_faults" : "dlock_linearizability");
  dlockd.extra_args.insert(dlockd.extra_args.end(),
                           {"--admin-enabled", "true", "--admin-token", kAdminToken});
  lin::FaultTargets targets;
  std::string no_partitions;  // why partitions are not run, if they are not
  bool partitions = false;
#ifdef DLOCK_WITH_NETNS
  partitions = faults && ::geteuid() == 0;
  if (faults && !partitions) no_partitions = "network namespaces need root";
  http_timeout = partitions ? milliseconds(2000) : std::chrono::minutes(5);
  std::unique_ptr<testing::DlockdNetwork> network;
#ifdef DLOCK_WITH_ETCD
  std::unique_ptr<testing::PartitionedEtcd> partitioned_etcd;
#endif
  if (partitions) {
    testing::remove_stale_namespaces();
    // A dlockd cut off from its backend answers 503 within 1 s rather than 5
    // (partition_fault_test).
    dlockd.extra_args.insert(dlockd.extra_args.end(), {"--backend-timeout", "1s"});
#ifdef DLOCK_WITH_ETCD
    if (backend == "etcd") partitioned_etcd = std::make_unique<testing::PartitionedEtcd>();
    targets.partitioned_etcd = partitioned_etcd.get();
    network = std::make_unique<testing::DlockdNetwork>(
        partitioned_etcd ? &partitioned_etcd->member_namespace(0) : nullptr);
#else
    network = std::make_unique<testing::DlockdNetwork>();
#endif
    targets.network = network.get();
    targets.backend_cable = backend == "pg";
    // Partitions alone: longer ones, more calls answered (or not) on each side while they last.
    if (only_partitions) targets.partition = milliseconds(5000);
  }
#else
  if (faults) no_partitions = "built without network namespaces (DLOCK_WITH_NETNS)";
#endif
  if (!no_partitions.empty()) {
    std::fprintf(stderr, "\n*** NETWORK PARTITIONS NOT RUN on %s: %s ***\n\n", backend.c_str(),
                 no_partitions.c_str());
  }
#ifdef DLOCK_WITH_ETCD
  std::unique_ptr<testing::EtcdCluster> etcd;
  if (faults && backend == "etcd") {
    // A leader to kill, a minority to lose (to the network too, with partitions).
#ifdef DLOCK_WITH_NETNS
    if (partitioned_etcd) targets.etcd = &partitioned_etcd->cluster();
#endif
    if (!targets.etcd) {
      etcd = std::make_unique<testing::EtcdCluster>(3);
      targets.etcd = etcd.get();
    }
    dlockd.etcd_endpoints = targets.etcd->endpoints();
  }
#endif
#ifdef DLOCK_WITH_PG
  if (faults && backend == "pg") targets.postgres = &testing::shared_postgres();
#endif
  if (faults) {
    dlockd.fixed_port = true;  // restarted on its address
    if (clock) dlockd.env = clock->env();
    targets.clock = clock.get();
  }
  std::vector<std::unique_ptr<testing::DlockdProcess>> servers;
  std::vector<std::unique_ptr<client::Client>> clients;
  for (int i = 0; i < (backend == "sqlite" ? 1 : 2); ++i) {
    auto server = dlockd;
#ifdef DLOCK_WITH_NETNS
    if (i == 0 && network) network->place(server);
#endif
    servers.push_back(std::make_unique<testing::DlockdProcess>(server));
    targets.dlockds.push_back(servers.back().get());
    client::ClientOptions options;
    options.server_url = servers.back()->url();
    if (faults) {
      // One attempt per call: a release retried after a lost answer could be answered
      // lock_lost for the release that took effect (README.md "Workloads").
      options.backoff_initial = options.backoff_max = std::chrono::hours(1);
    }
    if (partitions) {
      // Shorter than a partition: a call sent into one is given up as unknown, and may still
      // take effect after the heal (its request delivered then).
      options.request_timeout = milliseconds(2000);
    }
    clients.push_back(std::make_unique<client::Client>(options));
  }
  // Fresh names: the etcd and PostgreSQL of this binary outlive one run.
  const std::string run = std::to_string(::getpid()) + "-" + label + "-";
  const std::vector<KeySpec> keys = {
      {run + "mutex-a", "mutex", milliseconds(30'000)},
      {run + "mutex-b", "mutex", milliseconds(30'000)},
      {run + "mutex-short", "mutex", milliseconds(1'500)},
      {run + "rw", "rwlock", milliseconds(30'000)},
      {run + "rw-short", "rwlock", milliseconds(1'500)},
      {run + "sem", "semaphore", milliseconds(30'000)},
      {run + "sem-short", "semaphore", milliseconds(1'500)},
  };
  Recorder recorder;
  sessions_open = 0;
  std::atomic<int> grants{0};
  Until until;
  if (!faults) until.ns = now_ns() + seconds * 1'000'000'000LL;
  const auto started = SteadyClock::now();
  std::vector<std::thread> workers;
  const auto spawn = [&](int id, std::function<void()> body) {
    workers.emplace_back([id, body = std::move(body)] {
      try {
        body();
      } catch (const std::exception& error) {
        ADD_FAILURE() << "worker " << id << ": " << error.what();
      }
    });
  };
  const auto address = [&](int id) { return servers[id % servers.size()]->address(); };
  for (int id = 0; id < 6; ++id) {
    spawn(id, [&, id] {
      work(id, *clients[id % clients.size()], address(id), keys, until, recorder, grants);
    });
  }
  std::atomic<int> leaders{0};
  std::atomic<int> delayed{0};
  for (int id = 6; id < 9; ++id) {
    spawn(id,
          [&, id] { campaign_work(id, address(id), run + "election", until, recorder, leaders); });
  }
  for (int id = 9; id < 11; ++id) {
    spawn(id, [&, id] { delay_work(id, address(id), run + "delayed", until, recorder, delayed); });
  }
  spawn(11, [&] { revoke_work(11, address(11), run + "delayed", until, recorder); });
  std::vector<std::string> applied;
  if (faults) {
    testing::wait_for([&] { return sessions_open.load() == 11; }, std::chrono::seconds(30));
    // The pause outlasts the 1.5 s TTLs. Short mode: one round (every fault once); the long
    // mode: rounds until the run's length.
    auto nemesis = lin::faults_for(targets, milliseconds(2'500), long_mode());
    if (only_partitions) std::erase_if(nemesis, [](const auto& fault) { return !fault.partition; });
    applied = lin::run_nemesis(nemesis, milliseconds(long_mode() ? 1'000 : 500),
                               started + std::chrono::seconds(seconds));
    until.ns = now_ns();
  }
  for (auto& worker : workers) worker.join();
  const auto elapsed = std::chrono::duration<double>(SteadyClock::now() - started).count();

  const std::filesystem::path dir = DLOCK_LINCHECK_OUT;
  std::filesystem::create_directories(dir);
  const auto path = dir / (label + ".json");
  std::string description = faults ? "faults:" : "no faults";
  for (const auto& fault : applied) description += " " + fault + ";";
  if (faults && !only_partitions && !clock)
    description += " (no clock steps: libfaketime is not installed)";
  if (!no_partitions.empty()) description += " (NO NETWORK PARTITIONS: " + no_partitions + ")";
  const auto history = recorder.history(backend, description);
  std::ofstream(path) << json::serialize(history);
  const auto operations = history.at("operations").as_array().size();
  EXPECT_GT(grants.load(), 50) << "too few grants to say anything";
  EXPECT_GT(leaders.load(), 10) << "too few leaders to say anything";
  EXPECT_GT(delayed.load(), 5) << "too few lock-delayed grants to say anything";

  const auto [status, output] = lincheck(path.string(), (dir / (label + "-html")).string());
  std::printf(
      "%s: %.1f s, %zu calls, %d grants, %d leaders, %d delayed grants, %zu faults, "
      "history %s\n%s",
      label.c_str(), elapsed, operations, grants.load(), leaders.load(), delayed.load(),
      applied.size(), path.c_str(), output.c_str());
  EXPECT_EQ(status, 0) << output;
}

class LinearizabilityWorkload : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (std::string(DLOCK_GO_EXECUTABLE).empty()) GTEST_SKIP() << "go not found";
  }
};

TEST_P(LinearizabilityWorkload, EveryPrimitiveIsLinearizableWithoutFaults) {
  run_and_check(GetParam(), false);
}

TEST_P(LinearizabilityWorkload, EveryPrimitiveIsLinearizableUnderFaults) {
  run_and_check(GetParam(), true);
}

// The network partitions alone, round after round: the long mode's, and the negative control of
// a bug only a partition shows (scripts/mutations-linearizability.table).
TEST_P(LinearizabilityWorkload, EveryPrimitiveIsLinearizableUnderPartitions) {
#ifdef DLOCK_WITH_NETNS
  if (::geteuid() != 0) GTEST_SKIP() << "NETWORK PARTITIONS NOT RUN: network namespaces need root";
  run_and_check(GetParam(), true, true);
#else
  GTEST_SKIP() << "NETWORK PARTITIONS NOT RUN: built without network namespaces";
#endif
}

INSTANTIATE_TEST_SUITE_P(Backends, LinearizabilityWorkload,
                         ::testing::ValuesIn(testing::dlockd_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dlock
