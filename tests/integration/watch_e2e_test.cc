// The watch of a key or a prefix (C3 "Watch", docs/adr/0032-watch.md) through a real dlockd, on
// every backend: the events of a grant, a queued waiter, a hand-over and an expiry in order; a
// watcher resuming from any position gets every later event once (none lost, none repeated);
// a long poll wakes at the event; a prefix watch sees its keys and namespace only; a position
// from before a restart is answered with a reset, never with a silent gap. And `dlock watch`
// (sqlite): one aligned line per event, --json, a lost connection reported and resumed, Ctrl-C.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/child_process.h"
#include "cli/watch_command.h"
#include "dlock/client.h"
#include "support/dlockd_backends.h"
#include "support/dlockd_process.h"
#include "support/subprocess.h"

namespace dlock {
namespace {

using std::chrono::milliseconds;
using testing::DlockdOptions;
using testing::DlockdProcess;
using testing::HttpResult;
namespace json = boost::json;

class WatchEndToEnd : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    DlockdOptions options = testing::dlockd_options(GetParam(), "dlock_watch");
    options.log_level = "info";
    server_ = std::make_unique<DlockdProcess>(options);
  }

  HttpResult call(const std::string& method, const std::string& target,
                  const json::object& body = {}) {
    return testing::http_call(server_->address(), method, target,
                              body.empty() ? "" : json::serialize(body));
  }

  std::string open_session(const std::string& owner, int ttl_ms = 60000) {
    const auto result = call("POST", "/v1/sessions", {{"owner", owner}, {"ttl_ms", ttl_ms}});
    EXPECT_EQ(result.status, 201) << result.body;
    return result.status == 201 ? std::string(result.json.at("session_id").as_string()) : "";
  }

  std::string fresh_key() {
    static std::atomic<int> counter{0};
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '-');
    return name + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  }

  HttpResult acquire(const std::string& key, const std::string& session, int wait_ms = 0,
                     const std::string& ns = "default") {
    return call("POST", "/v1/locks/" + key + "/acquire",
                {{"session_id", session}, {"ttl_ms", 60000}, {"wait_ms", wait_ms}, {"ns", ns}});
  }

  // The position "now" of a watch of `query` ("key=k" or "prefix=p").
  std::string now(const std::string& query) {
    const auto result = call("GET", "/v1/watch?" + query);
    EXPECT_EQ(result.status, 200) << result.body;
    return std::string(result.json.at("next").as_string());
  }

  // Every event after `after`, `limit` per answer, resuming from each answer's `next`; stops at
  // the first empty answer.
  std::vector<json::object> drain(const std::string& query, std::string after, int limit) {
    std::vector<json::object> events;
    for (int calls = 0; calls < 1000; ++calls) {
      const auto page =
          call("GET", "/v1/watch?" + query + "&limit=" + std::to_string(limit) + "&after=" + after);
      EXPECT_EQ(page.status, 200) << page.body;
      if (page.status != 200) break;
      const auto& got = page.json.at("events").as_array();
      EXPECT_LE(got.size(), static_cast<std::size_t>(limit));
      for (const auto& event : got) events.push_back(event.as_object());
      after = std::string(page.json.at("next").as_string());
      if (got.empty()) break;
    }
    return events;
  }

  static std::vector<std::string> kinds(const std::vector<json::object>& events) {
    std::vector<std::string> result;
    for (const auto& event : events) {
      std::string kind(event.at("kind").as_string());
      if (event.contains("reason")) kind += "(" + std::string(event.at("reason").as_string()) + ")";
      result.push_back(kind);
    }
    return result;
  }

  static std::uint64_t token_of(const HttpResult& result) {
    return result.json.at("fencing_token").to_number<std::uint64_t>();
  }

  std::unique_ptr<DlockdProcess> server_;
};

// A grant, a waiter queued behind it, the release that hands the key over: the events in that
// order, with their tokens and owners; read from the start in one answer, or one event per
// answer (a watcher that stops and resumes after every event), the same list: nothing lost,
// nothing repeated.
TEST_P(WatchEndToEnd, AResumedWatchMissesAndRepeatsNothing) {
  const auto key = fresh_key();
  const auto start = now("key=" + key);
  const auto alice = open_session("alice");
  const auto bob = open_session("bob");
  const auto first = acquire(key, alice);
  ASSERT_EQ(first.status, 200) << first.body;
  auto waiting = std::async(std::launch::async, [&] { return acquire(key, bob, 20000); });
  ASSERT_TRUE(testing::wait_for([&] { return drain("key=" + key, start, 100).size() >= 2; },
                                milliseconds(10000)))
      << "the waiter never showed";
  ASSERT_EQ(call("DELETE", "/v1/locks/" + key + "?session_id=" + alice +
                               "&fencing_token=" + std::to_string(token_of(first)))
                .status,
            204);
  const auto second = waiting.get();
  ASSERT_EQ(second.status, 200) << second.body;

  const auto whole = drain("key=" + key, start, 100);
  const std::vector<std::string> expected = {"grant", "waiter_joined", "release",
                                             "waiter_left(granted)", "grant"};
  EXPECT_EQ(kinds(whole), expected);
  ASSERT_EQ(whole.size(), expected.size());
  EXPECT_EQ(whole[0].at("fencing_token").to_number<std::uint64_t>(), token_of(first));
  EXPECT_EQ(whole[0].at("owner").as_string(), "alice");
  EXPECT_EQ(whole[0].at("session_id").as_string(), alice);  // no authentication: shown (C6)
  EXPECT_EQ(whole[1].at("owner").as_string(), "bob");
  EXPECT_EQ(whole[2].at("fencing_token").to_number<std::uint64_t>(), token_of(first));
  EXPECT_EQ(whole[4].at("fencing_token").to_number<std::uint64_t>(), token_of(second));
  EXPECT_EQ(whole[4].at("owner").as_string(), "bob");
  // One per answer, each resumed from the previous answer's next: the same events.
  const auto resumed = drain("key=" + key, start, 1);
  ASSERT_EQ(resumed.size(), whole.size());
  for (std::size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(resumed[i], whole[i]) << "event " << i;
  }
  // Resuming from the middle: the rest, once.
  const auto rest = drain("key=" + key, std::string(whole[2].at("position").as_string()), 100);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0], whole[3]);
  EXPECT_EQ(rest[1], whole[4]);
}

// A long poll is answered at the first event, not at its deadline.
TEST_P(WatchEndToEnd, ALongPollWakesAtTheEvent) {
  const auto key = fresh_key();
  const auto start = now("key=" + key);
  const auto alice = open_session("alice");
  const auto began = std::chrono::steady_clock::now();
  auto polled = std::async(std::launch::async, [&] {
    return call("GET", "/v1/watch?key=" + key + "&wait_ms=20000&after=" + start);
  });
  ASSERT_EQ(polled.wait_for(milliseconds(300)), std::future_status::timeout)
      << "answered with no event";
  ASSERT_EQ(acquire(key, alice).status, 200);
  const auto answer = polled.get();
  EXPECT_LT(std::chrono::steady_clock::now() - began, milliseconds(10000));
  ASSERT_EQ(answer.status, 200) << answer.body;
  ASSERT_EQ(answer.json.at("events").as_array().size(), 1u) << answer.body;
  EXPECT_EQ(answer.json.at("events").at(0).at("kind").as_string(), "grant");
  // Nothing new: a short poll ends empty at its deadline, its next still usable.
  const auto next = std::string(answer.json.at("next").as_string());
  const auto empty = call("GET", "/v1/watch?key=" + key + "&wait_ms=200&after=" + next);
  ASSERT_EQ(empty.status, 200);
  EXPECT_TRUE(empty.json.at("events").as_array().empty());
  EXPECT_EQ(empty.json.at("next").as_string(), next);
}

// A prefix watch: every key beginning with it, in its namespace only; a key watch: that key only.
TEST_P(WatchEndToEnd, APrefixWatchSeesItsKeysInItsNamespaceOnly) {
  const auto base = fresh_key();
  const auto start = now("prefix=" + base + "%2F");
  const auto key_start = now("key=" + base + "%2Fa");
  const auto alice = open_session("alice");
  ASSERT_EQ(acquire(base + "%2Fa", alice).status, 200);
  ASSERT_EQ(acquire(base + "%2Fab", alice).status, 200);
  ASSERT_EQ(acquire(base + "%2Fb", alice).status, 200);
  ASSERT_EQ(acquire(base + "-other", alice).status, 200);
  ASSERT_EQ(acquire(base + "%2Fa", alice, 0, "elsewhere").status, 200);
  std::vector<std::string> keys;
  for (const auto& event : drain("prefix=" + base + "%2F", start, 100)) {
    EXPECT_EQ(event.at("ns").as_string(), "default");
    keys.emplace_back(event.at("key").as_string());
  }
  EXPECT_EQ(keys, (std::vector<std::string>{base + "/a", base + "/ab", base + "/b"}));
  const auto one = drain("key=" + base + "%2Fa", key_start, 100);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].at("key").as_string(), base + "/a");
  // The other namespace's grant, in its own watch.
  const auto elsewhere = call("GET", "/v1/watch?ns=elsewhere&key=" + base + "%2Fa&after=" +
                                         key_start.substr(0, key_start.rfind('.')) + ".0");
  ASSERT_EQ(elsewhere.status, 200) << elsewhere.body;
  ASSERT_EQ(elsewhere.json.at("events").as_array().size(), 1u) << elsewhere.body;
  EXPECT_EQ(elsewhere.json.at("events").at(0).at("ns").as_string(), "elsewhere");
}

// A grant that ends without a release (its session lapsed) is an expire event.
TEST_P(WatchEndToEnd, AnExpiredGrantIsAnExpireEvent) {
  const auto key = fresh_key();
  const auto start = now("key=" + key);
  const auto alice = open_session("alice", 1000);  // never kept alive
  const auto held = acquire(key, alice);
  ASSERT_EQ(held.status, 200) << held.body;
  std::vector<json::object> events;
  ASSERT_TRUE(testing::wait_for(
      [&] {
        events = drain("key=" + key, start, 100);
        return events.size() >= 2;
      },
      milliseconds(15000)))
      << "no expire event";
  EXPECT_EQ(kinds(events), (std::vector<std::string>{"grant", "expire"}));
  EXPECT_EQ(events[1].at("fencing_token").to_number<std::uint64_t>(), token_of(held));
  EXPECT_EQ(events[1].at("owner").as_string(), "alice");
}

// A position from before a restart (another process) is answered with a reset event first, then
// the events from then on: never a silent gap. So is a malformed-but-shaped one.
TEST_P(WatchEndToEnd, APositionFromBeforeARestartIsAnsweredWithAReset) {
  const auto key = fresh_key();
  const auto before = now("key=" + key);
  server_->kill9();
  server_->start();
  const auto answer = call("GET", "/v1/watch?key=" + key + "&after=" + before);
  ASSERT_EQ(answer.status, 200) << answer.body;
  const auto& events = answer.json.at("events").as_array();
  ASSERT_EQ(events.size(), 1u) << answer.body;
  EXPECT_EQ(events.at(0).at("kind").as_string(), "reset");
  EXPECT_NE(events.at(0).at("reason").as_string().find("another dlockd process"),
            std::string::npos);
  const auto next = std::string(answer.json.at("next").as_string());
  EXPECT_NE(next, before);
  const auto alice = open_session("alice");
  ASSERT_EQ(acquire(key, alice).status, 200);
  const auto after = drain("key=" + key, next, 100);
  EXPECT_EQ(kinds(after), std::vector<std::string>{"grant"});
  // A position ahead of the log (same process) is a reset too, not an error or a wait.
  const auto ahead = call("GET", "/v1/watch?key=" + key + "&wait_ms=5000&after=" +
                                     next.substr(0, next.rfind('.')) + ".999999");
  ASSERT_EQ(ahead.status, 200);
  EXPECT_EQ(ahead.json.at("events").at(0).at("kind").as_string(), "reset");
}

TEST_P(WatchEndToEnd, BadQueriesAreRefusedNamingTheField) {
  const auto field = [&](const std::string& query) {
    const auto result = call("GET", "/v1/watch" + query);
    EXPECT_EQ(result.status, 400) << query << " " << result.body;
    return result.status == 400 ? std::string(result.json.at("error").at("field").as_string())
                                : std::string();
  };
  EXPECT_EQ(field(""), "key");
  EXPECT_EQ(field("?key=a&prefix=b"), "prefix");
  EXPECT_EQ(field("?key="), "key");
  EXPECT_EQ(field("?key=a&after=XYZ"), "after");
  EXPECT_EQ(field("?key=a&after=" + std::string(65, '1')), "after");
  EXPECT_EQ(field("?key=a&wait_ms=-1"), "wait_ms");
  EXPECT_EQ(field("?key=a&limit=0"), "limit");
  EXPECT_EQ(field("?key=a&ns=a%2Fb"), "ns");
}

INSTANTIATE_TEST_SUITE_P(Backends, WatchEndToEnd, ::testing::ValuesIn(testing::dlockd_backends()),
                         [](const auto& info) { return info.param; });

// A waiting watch holds a connection and counts against its client's share of them (C6
// "Connections": here one, a quarter of 4); a client that closes its connection while its watch
// waits gives its share back at once, not at the next event of the key.
TEST(WatchLimits, AWatchWhoseClientLeftGivesItsShareBack) {
  DlockdOptions options;
  options.extra_args = {"--server-max-connections", "4"};
  DlockdProcess server(options);
  const auto waiting_watch = [&] {
    return testing::http_call(server.address(), "GET", "/v1/watch?key=quiet&wait_ms=300");
  };
  // Nothing holds the share: a waiting watch is served (empty at its deadline).
  ASSERT_EQ(waiting_watch().status, 200);
  for (int round = 0; round < 3; ++round) {
    // A watch that waits, and its client leaves.
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    const auto colon = server.address().rfind(':');
    address.sin_port =
        htons(static_cast<std::uint16_t>(std::stoi(server.address().substr(colon + 1))));
    ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    const std::string request =
        "GET /v1/watch?key=quiet&wait_ms=60000 HTTP/1.1\r\nHost: dlockd\r\n\r\n";
    ASSERT_EQ(::write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
    // The share is taken while it waits (once dlockd has read the request).
    EXPECT_TRUE(
        testing::wait_for([&] { return waiting_watch().status == 429; }, milliseconds(5000)))
        << "round " << round << ": a waiting watch did not take the share";
    ::close(fd);
    // Given back at once: served again within a moment, long before the 60 s wait.
    EXPECT_TRUE(
        testing::wait_for([&] { return waiting_watch().status == 200; }, milliseconds(5000)))
        << "round " << round << ": the watch of a closed connection kept its share";
  }
}

// --- dlock watch ------------------------------------------------------------------------------

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

// What a terminal line shows: server strings escaped, so a value cannot act on the terminal.
TEST(WatchLine, EscapesServerStrings) {
  client::WatchEvent event;
  event.kind = "grant";
  event.key = "a\x1b]0;pwned\x07";
  event.owner = "ali\rce";
  event.mode = "exclusive";
  event.fencing_token = 42;
  event.session_id = "s\x1b[2J";
  const auto line = cli::watch_line(event);
  EXPECT_EQ(line.find('\x1b'), std::string::npos) << line;
  EXPECT_EQ(line.find('\r'), std::string::npos) << line;
  EXPECT_NE(line.find("a\\x1b]0;pwned\\x07"), std::string::npos) << line;
  EXPECT_NE(line.find("ali\\x0dce"), std::string::npos) << line;
  EXPECT_NE(line.find("token 42  exclusive  session s\\x1b[2J"), std::string::npos) << line;
}

// `dlock watch --prefix`: one line per event (a header first); a dlockd restart is reported on
// stderr at once, the watch resumes by itself and says that events may be missing (a reset,
// since the position was the old process's); Ctrl-C ends it with 0. --json: one event object
// per line.
TEST(DlockWatch, PrintsEventsResumesAfterARestartAndExitsZeroOnSigint) {
  DlockdOptions options;
  options.fixed_port = true;  // the watch keeps its --server across the restart
  DlockdProcess server(options);
  const std::filesystem::path dir = testing::make_temp_dir("dlock-watch");
  sigset_t none;
  sigemptyset(&none);
  const auto start = [&](const std::string& flags, const std::string& name) {
    return std::make_unique<cli::ChildProcess>(
        std::vector<std::string>{"sh", "-c",
                                 "exec \"$DLOCK\" --server \"$SERVER\" " + flags + " > \"$DIR/" +
                                     name + ".out\" 2> \"$DIR/" + name + ".err\""},
        std::vector<std::string>{"DLOCK=" DLOCK_BINARY, "SERVER=" + server.url(),
                                 "DIR=" + dir.string()},
        none);
  };
  auto text = start("watch --prefix jobs/", "text");
  auto json_watch = start("--json watch jobs/a", "json");
  const auto printed = [&](const std::string& name, const std::string& what) {
    return testing::wait_for([&] { return read_file(dir / name).find(what) != std::string::npos; },
                             milliseconds(20'000));
  };
  ASSERT_TRUE(printed("text.out", "TIME"));
  // The watch pins its position with a first answer; then the events. Nothing shows that first
  // answer (no gauge counts waiting watches): a pause.
  std::this_thread::sleep_for(milliseconds(500));
  client::ClientOptions client_options;
  client_options.server_url = server.url();
  client::Client client(client_options);
  client::AcquireOptions ten_seconds;
  ten_seconds.ttl = milliseconds(10'000);
  {
    client::Session session(client, {"worker", milliseconds(10'000), {}});
    auto lock = session.acquire("jobs/a", ten_seconds);
    ASSERT_TRUE(lock.has_value());
    ASSERT_TRUE(printed("text.out", "grant"));
    ASSERT_TRUE(printed("json.out", "\"kind\":\"grant\""));
    lock->release();
    ASSERT_TRUE(printed("text.out", "release"));
    const auto lines = read_file(dir / "text.out");
    EXPECT_NE(lines.find("jobs/a"), std::string::npos) << lines;
    EXPECT_NE(lines.find("worker"), std::string::npos) << lines;
    EXPECT_NE(lines.find("token " + std::to_string(lock->token())), std::string::npos) << lines;
    // --json: one object per line, the server's.
    std::istringstream json_lines(read_file(dir / "json.out"));
    std::string line;
    while (std::getline(json_lines, line)) {
      EXPECT_TRUE(boost::json::parse(line).is_object()) << line;
    }
  }
  server.kill9();
  ASSERT_TRUE(printed("text.err", "connection lost")) << read_file(dir / "text.err");
  server.start();
  ASSERT_TRUE(printed("text.err", "resumed")) << read_file(dir / "text.err");
  ASSERT_TRUE(printed("text.err", "events may be missing")) << read_file(dir / "text.err");
  ASSERT_TRUE(printed("text.out", "reset"));
  {
    client::Session session(client, {"after-restart", milliseconds(10'000), {}});
    auto lock = session.acquire("jobs/b", ten_seconds);
    ASSERT_TRUE(lock.has_value());
    ASSERT_TRUE(printed("text.out", "jobs/b")) << read_file(dir / "text.out");
  }
  for (auto* watch : {text.get(), json_watch.get()}) {
    watch->signal(SIGINT);
    testing::wait_for([&] { return watch->try_wait().has_value(); }, milliseconds(20'000));
    EXPECT_EQ(watch->status(), 0);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dlock
