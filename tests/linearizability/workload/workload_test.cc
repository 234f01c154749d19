// The first linearizability workload (issue 43): sessions acquire, extend, read, release and
// abandon a few mutex, read-write lock and semaphore keys through the C++ client library against
// a real dlockd on every backend, with no faults. Every call is recorded (sent and answered on
// the steady clock, what was asked, what came back) as a history in the format of README.md,
// and dlock-lincheck checks it. The histories stay as artefacts in
// <build>/tests/linearizability/histories/<backend>.json (with <backend>-html/ when illegal).
//
// DLOCK_LIN_SECONDS (default 10) sets how long each backend's run lasts.

#include <gtest/gtest.h>

#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dlock/client.h"
#include "support/dlockd_backends.h"
#include "support/dlockd_process.h"

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

int run_seconds() {
  const char* text = std::getenv("DLOCK_LIN_SECONDS");
  return text != nullptr && *text != '\0' ? std::atoi(text) : 10;
}

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
  json::object history(const std::string& backend) {
    std::lock_guard lock(mutex_);
    return {{"backend", backend},
            {"description", "tests/linearizability/workload_test.cc, no faults"},
            {"operations", operations_}};
  }

 private:
  std::mutex mutex_;
  json::array operations_;
};

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
  recorder.add(std::move(op));
  return outcome;
}

struct Held {
  FencingToken token = 0;
  HoldMode mode = HoldMode::kExclusive;
};

// One session's calls until `until`; at the end it releases what it holds.
void work(int id, client::Client& client, const std::string& server,
          const std::vector<KeySpec>& keys, SteadyClock::time_point until, Recorder& recorder,
          std::atomic<int>& grants) {
  std::mt19937 random(static_cast<unsigned>(id) * 7919u + 17u);
  const std::string session =
      client.open_session("lin-" + std::to_string(id), milliseconds(60'000)).session_id;
  std::map<std::string, Held> held;
  const auto base = [&](const KeySpec& key, const std::string& op) {
    return json::object{{"client", id},    {"server", server},           {"session", session},
                        {"key", key.name}, {"primitive", key.primitive}, {"op", op}};
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
  while (SteadyClock::now() < until) {
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
      auto op = base(key, "read");
      op.erase("session");
      record(recorder, std::move(op), [&](json::object& output) {
        json::array holders;
        for (const auto& holder : client.holders(key.name)) {
          holders.push_back(
              json::object{{"session", holder.session_id}, {"token", holder.fencing_token}});
        }
        output = {{"holders", holders}};
        return std::string("ok");
      });
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
      record(recorder, std::move(op), [&](json::object& output) {
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
                              "mutex,rwlock,semaphore -html-dir '" +
                              html_dir + "' '" + history + "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  char buffer[4096];
  while (const auto n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

class LinearizabilityWorkload : public ::testing::TestWithParam<std::string> {};

TEST_P(LinearizabilityWorkload, SessionsOnLocksRwLocksAndSemaphoresAreLinearizable) {
  if (std::string(DLOCK_GO_EXECUTABLE).empty()) GTEST_SKIP() << "go not found";
  const std::string backend = GetParam();
  testing::DlockdProcess server(testing::dlockd_options(backend, "dlock_linearizability"));
  client::ClientOptions options;
  options.server_url = server.url();
  client::Client client(options);
  // Fresh names: the etcd and PostgreSQL of this binary outlive one run.
  const std::string run = std::to_string(::getpid()) + "-" + backend + "-";
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
  std::atomic<int> grants{0};
  const auto until = SteadyClock::now() + std::chrono::seconds(run_seconds());
  std::vector<std::thread> workers;
  for (int id = 0; id < 6; ++id) {
    workers.emplace_back([&, id] {
      try {
        work(id, client, server.address(), keys, until, recorder, grants);
      } catch (const std::exception& error) {
        ADD_FAILURE() << "worker " << id << ": " << error.what();
      }
    });
  }
  for (auto& worker : workers) worker.join();

  const std::filesystem::path dir = DLOCK_LINCHECK_OUT;
  std::filesystem::create_directories(dir);
  const auto path = dir / (backend + ".json");
  const auto history = recorder.history(backend);
  std::ofstream(path) << json::serialize(history);
  const auto operations = history.at("operations").as_array().size();
  EXPECT_GT(grants.load(), 50) << "too few grants to say anything";

  const auto [status, output] = lincheck(path.string(), (dir / (backend + "-html")).string());
  std::printf("%s: %zu calls, %d grants, history %s\n%s", backend.c_str(), operations,
              grants.load(), path.c_str(), output.c_str());
  EXPECT_EQ(status, 0) << output;
}

INSTANTIATE_TEST_SUITE_P(Backends, LinearizabilityWorkload,
                         ::testing::ValuesIn(testing::dlockd_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dlock
