// The dlock CLI and the client library against a real dlockd (embedded sqlite store): dlock
// run passes the token and CMD's status, exits 75 when the key stays held, kills CMD's whole
// process group (exit 76) when an admin revokes the lock, and stops it before the lock's
// deadline when the server stops answering (ADR-0014); every other subcommand round-trips
// through the server; elect and leader --watch (C3 "Elections").

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "cli/child_process.h"
#include "cli/cli.h"
#include "dlock/client.h"
#include "support/dlockd_process.h"
#include "support/subprocess.h"

namespace dlock {
namespace {

using std::chrono::milliseconds;
using testing::DlockdOptions;
using testing::DlockdProcess;

// admin.token needs 32+ characters, 8+ distinct (ADR-0016).
constexpr const char* kAdminToken = "cli-e2e-token-0123456789abcdefghij";

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

class CliEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    DlockdOptions options;
    options.extra_args = {"--admin-enabled", "true", "--admin-token", kAdminToken};
    server_ = std::make_unique<DlockdProcess>(options);
    dir_ = testing::make_temp_dir("cli-e2e");
  }
  void TearDown() override {
    // A process a failing test left behind (dlock's grandchild, not ours to reap).
    for (pid_t pid : leftovers_) ::kill(pid, SIGKILL);
    std::filesystem::remove_all(dir_);
  }

  // The pid CMD wrote to $DIR/<name>, waiting for it; -1 when it never came.
  pid_t pid_from(const char* name) {
    const std::filesystem::path path = std::filesystem::path(dir_) / name;
    if (!testing::wait_for([&] { return read_file(path).find('\n') != std::string::npos; },
                           milliseconds(20'000))) {
      return -1;
    }
    const pid_t pid = std::stoi(read_file(path));
    leftovers_.push_back(pid);
    return pid;
  }

  static bool gone(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

  struct Outcome {
    int status;
    std::string out;
    std::string err;
  };

  // Runs a non-`run` subcommand in-process, exactly as main() would.
  Outcome dlock(std::vector<std::string> args) {
    args.insert(args.begin(), {"dlock", "--server", server_->url()});
    std::vector<const char*> argv;
    for (const std::string& arg : args) argv.push_back(arg.c_str());
    std::ostringstream out, err;
    const int status = cli::run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
    return {status, out.str(), err.str()};
  }

  // `dlock run` as its own process: it owns signals and children.
  // CMD gets $DIR, and $DLOCK (the binary) and $SERVER to call dlock itself. `global`: flags
  // before `run`.
  std::unique_ptr<cli::ChildProcess> start_run(const std::string& key,
                                               std::vector<std::string> flags,
                                               const std::string& script,
                                               std::vector<std::string> global = {}) {
    std::vector<std::string> argv = {DLOCK_BINARY, "--server", server_->url()};
    argv.insert(argv.end(), global.begin(), global.end());
    argv.insert(argv.end(), {"run", key});
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--", "sh", "-c", script});
    sigset_t none;
    sigemptyset(&none);
    return std::make_unique<cli::ChildProcess>(
        argv,
        std::vector<std::string>{"DIR=" + dir_, std::string("DLOCK=") + DLOCK_BINARY,
                                 "SERVER=" + server_->url()},
        none);
  }

  static std::optional<int> wait_exit(cli::ChildProcess& process, milliseconds timeout) {
    testing::wait_for([&] { return process.try_wait().has_value(); }, timeout);
    return process.status();
  }

  client::ClientOptions client_options() const {
    client::ClientOptions options;
    options.server_url = server_->url();
    options.admin_token = kAdminToken;
    options.retry_budget = milliseconds(2000);
    return options;
  }

  std::unique_ptr<DlockdProcess> server_;
  std::string dir_;
  std::vector<pid_t> leftovers_;
};

TEST_F(CliEndToEnd, RunPassesTheTokenAndExitsWithTheCommandsStatus) {
  const std::string script = R"(echo "$DLOCK_KEY $DLOCK_FENCING_TOKEN" > "$DIR/seen"; exit 5)";
  auto first = start_run("payouts/batch-17", {"--ttl", "5s"}, script);
  ASSERT_EQ(wait_exit(*first, milliseconds(20'000)), 5);
  std::istringstream seen(read_file(std::filesystem::path(dir_) / "seen"));
  std::string key;
  FencingToken first_token = 0;
  seen >> key >> first_token;
  EXPECT_EQ(key, "payouts/batch-17");
  EXPECT_GT(first_token, 0U);

  // Released on exit: the key is free, and the next run gets a strictly greater token.
  client::Client client(client_options());
  EXPECT_FALSE(client.get("payouts/batch-17").has_value());
  auto second = start_run("payouts/batch-17", {}, script);
  ASSERT_EQ(wait_exit(*second, milliseconds(20'000)), 5);
  std::istringstream seen_again(read_file(std::filesystem::path(dir_) / "seen"));
  FencingToken second_token = 0;
  seen_again >> key >> second_token;
  EXPECT_GT(second_token, first_token);
}

// `dlock run` exports DLOCK_NAMESPACE, and a dlock inside CMD reads it: the key it looks at is
// the one held, in the same namespace (issue 41: it printed "foo is free" while it was held).
TEST_F(CliEndToEnd, DlockInsideRunSeesTheRunsNamespace) {
  auto run =
      start_run("foo", {}, R"("$DLOCK" --server "$SERVER" get "$DLOCK_KEY" > "$DIR/seen" 2>&1)",
                {"--ns", "payments"});
  ASSERT_EQ(wait_exit(*run, milliseconds(20'000)), 0);
  const std::string seen = read_file(std::filesystem::path(dir_) / "seen");
  EXPECT_EQ(seen.find("is free"), std::string::npos) << seen;
  EXPECT_NE(seen.find("owner"), std::string::npos) << seen;
  // Outside the namespace the key is free.
  EXPECT_NE(dlock({"get", "foo"}).out.find("is free"), std::string::npos);
}

TEST_F(CliEndToEnd, RunExits75WhenTheKeyStaysHeld) {
  client::Client client(client_options());
  client::Session holder(client, {"holder", milliseconds(10'000), {}});
  auto lock = holder.acquire("reports/daily", {});
  ASSERT_TRUE(lock.has_value());
  auto run = start_run("reports/daily", {"--wait", "300ms"}, R"(touch "$DIR/ran")");
  EXPECT_EQ(wait_exit(*run, milliseconds(20'000)), 75);
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(dir_) / "ran"));
  EXPECT_TRUE(lock->still_valid());
}

TEST_F(CliEndToEnd, RunWaitsForTheHolderAndGetsAGreaterToken) {
  client::Client client(client_options());
  client::Session holder(client, {"holder", milliseconds(10'000), {}});
  auto lock = holder.acquire("queue/head", {});
  ASSERT_TRUE(lock.has_value());
  auto run =
      start_run("queue/head", {"--wait", "15s"}, R"(echo "$DLOCK_FENCING_TOKEN" > "$DIR/token")");
  lock->release();
  ASSERT_EQ(wait_exit(*run, milliseconds(20'000)), 0);
  EXPECT_GT(std::stoull(read_file(std::filesystem::path(dir_) / "token")), lock->token());
}

TEST_F(CliEndToEnd, RevokedLockKillsTheCommandAndExits76) {
  // CMD ignores SIGTERM, so dlock must escalate to SIGKILL after --kill-grace.
  auto run = start_run("payouts/batch-18", {"--ttl", "3s", "--kill-grace", "500ms"},
                       R"(trap "" TERM; echo $$ > "$DIR/pid"; while :; do sleep 0.05; done)");
  const std::filesystem::path pid_file = std::filesystem::path(dir_) / "pid";
  ASSERT_TRUE(
      testing::wait_for([&] { return !read_file(pid_file).empty(); }, milliseconds(20'000)));
  const pid_t command_pid = std::stoi(read_file(pid_file));

  const Outcome revoked =
      dlock({"--admin-token", kAdminToken, "--json", "revoke", "payouts/batch-18"});
  ASSERT_EQ(revoked.status, 0) << revoked.err;
  EXPECT_EQ(boost::json::parse(revoked.out).at("revoked").as_bool(), true);

  // The next extend (every ttl/3 = 1 s) answers lock_lost.
  EXPECT_EQ(wait_exit(*run, milliseconds(20'000)), 76);
  EXPECT_EQ(::kill(command_pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(CliEndToEnd, RevokedLockStopsEveryProcessOfTheCommandsGroup) {
  // `sleep` is the shell's background child: signalling the shell alone leaves it running
  // without the lock (the bug reported against `consul lock`).
  auto run =
      start_run("payouts/batch-19", {"--ttl", "3s"}, R"(sleep 1000 & echo $! > "$DIR/pid"; wait)");
  const pid_t grandchild = pid_from("pid");
  ASSERT_GT(grandchild, 0);
  ASSERT_EQ(dlock({"--admin-token", kAdminToken, "revoke", "payouts/batch-19"}).status, 0);
  EXPECT_EQ(wait_exit(*run, milliseconds(20'000)), 76);
  // dlock leaves only once nothing of the group exists; allow for the kernel all the same.
  EXPECT_TRUE(testing::wait_for([&] { return gone(grandchild); }, milliseconds(5'000)))
      << "the background child of CMD survived the revoked lock";
}

TEST_F(CliEndToEnd, FrozenServerStopsTheCommandBeforeTheLocksDeadline) {
  // CMD ignores SIGTERM: only SIGKILL stops it, due 700 ms before the deadline (margin 1 s,
  // grace 300 ms).
  auto run =
      start_run("payouts/batch-20", {"--ttl", "3s", "--stop-margin", "1s", "--kill-grace", "300ms"},
                R"(trap "" TERM; echo $$ > "$DIR/pid"; while :; do sleep 0.05; done)");
  const pid_t command = pid_from("pid");
  ASSERT_GT(command, 0);
  // Freeze dlockd right after an extend was committed: the lock's client deadline is then at
  // most 3 s after we saw the new expiry (the extend was sent before).
  client::Client client(client_options());
  const auto first = client.get("payouts/batch-20");
  ASSERT_TRUE(first.has_value());
  std::chrono::steady_clock::time_point extended_seen;
  ASSERT_TRUE(testing::wait_for(
      [&] {
        const auto now = client.get("payouts/batch-20");
        extended_seen = std::chrono::steady_clock::now();
        return now && now->expires_at != first->expires_at;
      },
      milliseconds(10'000), milliseconds(1)));
  server_->process().signal(SIGSTOP);
  const bool died =
      testing::wait_for([&] { return gone(command); }, milliseconds(10'000), milliseconds(2));
  const auto died_at = std::chrono::steady_clock::now();
  server_->process().signal(SIGCONT);
  ASSERT_TRUE(died);
  const auto deadline_bound = extended_seen + milliseconds(3'000);
  std::cout << "[ measured ] CMD died "
            << std::chrono::duration_cast<milliseconds>(deadline_bound - died_at).count()
            << " ms before the latest possible deadline\n";
  EXPECT_LT(died_at, deadline_bound - milliseconds(400))
      << "died " << std::chrono::duration_cast<milliseconds>(deadline_bound - died_at).count()
      << " ms before the latest possible deadline";
  EXPECT_EQ(wait_exit(*run, milliseconds(30'000)), 76);
}

TEST_F(CliEndToEnd, RevokeWithAWrongTokenExits77) {
  const Outcome outcome = dlock({"--admin-token", "wrong", "revoke", "k"});
  EXPECT_EQ(outcome.status, 77) << outcome.err;
}

TEST_F(CliEndToEnd, SessionAcquireExtendGetListReleaseClose) {
  Outcome opened = dlock({"--json", "session", "open", "--ttl", "10s", "--owner", "e2e"});
  ASSERT_EQ(opened.status, 0) << opened.err;
  const std::string session_id(boost::json::parse(opened.out).at("session_id").as_string().c_str());

  Outcome acquired =
      dlock({"--json", "acquire", "jobs/a b", "--session", session_id, "--ttl", "5s"});
  ASSERT_EQ(acquired.status, 0) << acquired.err;
  const auto token =
      boost::json::parse(acquired.out).at("fencing_token").to_number<std::uint64_t>();
  const std::string token_text = std::to_string(token);

  Outcome other = dlock({"session", "open"});
  ASSERT_EQ(other.status, 0);
  // Human output: "session <id>  owner ..."
  const std::string other_id = other.out.substr(8, other.out.find(' ', 8) - 8);
  EXPECT_EQ(dlock({"acquire", "jobs/a b", "--session", other_id, "--wait", "100ms"}).status, 75);

  EXPECT_EQ(dlock({"extend", "jobs/a b", "--session", session_id, "--token", token_text}).status,
            0);
  Outcome got = dlock({"--json", "get", "jobs/a b"});
  ASSERT_EQ(got.status, 0) << got.err;
  const auto info = boost::json::parse(got.out);
  EXPECT_TRUE(info.at("held").as_bool());
  EXPECT_EQ(info.at("owner").as_string(), "e2e");
  EXPECT_EQ(info.at("fencing_token").to_number<std::uint64_t>(), token);

  Outcome listed = dlock({"list", "--prefix", "jobs/"});
  ASSERT_EQ(listed.status, 0) << listed.err;
  EXPECT_NE(listed.out.find("jobs/a b  exclusive  " + token_text), std::string::npos) << listed.out;

  // Releasing somebody else's grant is refused as lock lost.
  EXPECT_EQ(dlock({"release", "jobs/a b", "--session", other_id, "--token", token_text}).status,
            76);
  EXPECT_EQ(dlock({"release", "jobs/a b", "--session", session_id, "--token", token_text}).status,
            0);
  EXPECT_NE(dlock({"get", "jobs/a b"}).out.find("is free"), std::string::npos);
  EXPECT_EQ(dlock({"session", "keepalive", session_id}).status, 0);
  EXPECT_EQ(dlock({"session", "close", session_id}).status, 0);
  EXPECT_EQ(dlock({"session", "keepalive", session_id}).status, 1);
}

// `dlock list` (issue 41: it printed 100 of 105 held locks and said nothing of the rest; no
// mode or age; tab-separated): aligned columns with MODE and AGE, and a last line when the
// answer stopped at the limit.
TEST_F(CliEndToEnd, ListIsAlignedAndSaysWhenTheAnswerWasCut) {
  client::Client client(client_options());
  client::Session holder(client, {"lister", milliseconds(20'000), {}});
  std::vector<client::Lock> locks;
  for (int i = 0; i < 105; ++i) {
    auto lock = holder.acquire("batch/" + std::to_string(1000 + i), {});
    ASSERT_TRUE(lock.has_value());
    locks.push_back(std::move(*lock));
  }
  const Outcome listed = dlock({"list"});
  ASSERT_EQ(listed.status, 0) << listed.err;
  std::vector<std::string> lines;
  std::istringstream in(listed.out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 1U + 100U + 1U) << listed.out;
  EXPECT_EQ(lines.back(), "showing the first 100; more are held: use --all, --limit N or --prefix");
  // Every column starts where its header does.
  const std::string& header = lines.front();
  EXPECT_EQ(header.rfind("KEY", 0), 0U);
  for (const char* column : {"MODE", "FENCING_TOKEN", "OWNER", "SESSION", "AGE", "EXPIRES_AT"}) {
    const std::size_t at = header.find(column);
    ASSERT_NE(at, std::string::npos) << column;
    for (std::size_t row = 1; row <= 100; ++row) {
      EXPECT_NE(lines[row][at], ' ') << column << " misaligned in: " << lines[row];
      EXPECT_EQ(lines[row][at - 1], ' ') << column << " misaligned in: " << lines[row];
    }
  }
  EXPECT_NE(lines[1].find("batch/1000  exclusive  "), std::string::npos) << lines[1];

  // Asked for all of them: no note. JSON says when it was cut.
  const Outcome all = dlock({"list", "--limit", "105"});
  EXPECT_EQ(all.out.find("showing the first"), std::string::npos);
  EXPECT_EQ(std::count(all.out.begin(), all.out.end(), '\n'), 106);
  const auto json = boost::json::parse(dlock({"--json", "list", "--limit", "3"}).out).as_object();
  EXPECT_EQ(json.at("locks").as_array().size(), 3U);
  EXPECT_EQ(json.at("truncated").as_bool(), true);
  // Beyond one page (C3: at most 1000): --all and a --limit above 1000 follow the pages (the
  // server refused limit=1001 before).
  for (const auto& args : {std::vector<std::string>{"list", "--all"},
                           std::vector<std::string>{"list", "--limit", "1001"}}) {
    const Outcome every = dlock(args);
    ASSERT_EQ(every.status, 0) << every.err;
    EXPECT_EQ(every.out.find("showing the first"), std::string::npos) << every.out;
    EXPECT_EQ(std::count(every.out.begin(), every.out.end(), '\n'), 106) << every.out;
  }
}

// `dlock sessions` (issue 41): the live sessions in aligned columns, filtered by owner, a page at
// a time, and a last line when more were not shown.
TEST_F(CliEndToEnd, SessionsAreListedAlignedAndPaged) {
  std::set<std::string> opened;
  for (const auto* owner : {"sess-lister-a", "sess-lister-b", "sess-lister-c"}) {
    const Outcome open = dlock({"--json", "session", "open", "--owner", owner});
    ASSERT_EQ(open.status, 0) << open.err;
    opened.insert(std::string(boost::json::parse(open.out).at("session_id").as_string()));
  }
  const Outcome all = dlock({"sessions", "--owner", "sess-lister-", "--all"});
  ASSERT_EQ(all.status, 0) << all.err;
  std::vector<std::string> lines;
  std::istringstream in(all.out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u) << all.out;
  const std::string& header = lines.front();
  EXPECT_EQ(header.rfind("SESSION  ", 0), 0u) << header;
  for (const char* column : {"OWNER", "PRINCIPAL", "TTL", "LOCK_DELAY", "EXPIRES_AT"}) {
    const std::size_t at = header.find(column);
    ASSERT_NE(at, std::string::npos) << column;
    for (std::size_t row = 1; row < lines.size(); ++row) {
      EXPECT_NE(lines[row][at], ' ') << column << " misaligned in: " << lines[row];
      EXPECT_EQ(lines[row][at - 1], ' ') << column << " misaligned in: " << lines[row];
    }
  }
  std::set<std::string> listed;
  for (std::size_t row = 1; row < lines.size(); ++row) {
    listed.insert(lines[row].substr(0, lines[row].find(' ')));
  }
  EXPECT_EQ(listed, opened) << all.out;

  const Outcome first = dlock({"sessions", "--owner", "sess-lister-", "--limit", "2"});
  EXPECT_EQ(std::count(first.out.begin(), first.out.end(), '\n'), 4) << first.out;
  EXPECT_NE(first.out.find("more sessions follow: use --all or --limit N\n"), std::string::npos)
      << first.out;
  const auto json = boost::json::parse(
      dlock({"--json", "sessions", "--owner", "sess-lister-", "--limit", "1"}).out);
  EXPECT_EQ(json.at("sessions").as_array().size(), 1u);
  EXPECT_EQ(json.at("truncated").as_bool(), true);
  EXPECT_EQ(dlock({"sessions", "--owner", "nobody-here"}).out, "no sessions\n");
}

// `dlock session show` (issue 41): what a session holds, in every namespace, and waits for; and
// `dlock list -A` (every namespace, for an administrator; no tokens file here: everyone is).
TEST_F(CliEndToEnd, SessionShowAndListEveryNamespace) {
  const auto open = [this](const char* owner) {
    const Outcome opened = dlock({"--json", "session", "open", "--owner", owner});
    EXPECT_EQ(opened.status, 0) << opened.err;
    return std::string(boost::json::parse(opened.out).at("session_id").as_string());
  };
  const std::string holder = open("show-holder"), waiter = open("show-waiter");
  ASSERT_EQ(dlock({"--ns", "show-a", "acquire", "jobs/x", "--session", holder}).status, 0);
  ASSERT_EQ(dlock({"--ns", "show-b", "acquire", "jobs/y", "--session", holder, "--shared"}).status,
            0);
  std::thread waits([&] {
    dlock({"--ns", "show-a", "acquire", "jobs/x", "--session", waiter, "--wait", "20s"});
  });
  ASSERT_TRUE(testing::wait_for(
      [&] {
        return dlock({"session", "show", waiter}).out.find("waits for   1") != std::string::npos;
      },
      std::chrono::seconds(10)));

  const Outcome shown = dlock({"session", "show", holder});
  ASSERT_EQ(shown.status, 0) << shown.err;
  EXPECT_NE(shown.out.find("owner       show-holder\n"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("holds       2\nNAMESPACE  KEY     MODE       FENCING_TOKEN"),
            std::string::npos)
      << shown.out;
  EXPECT_NE(shown.out.find("\nshow-a     jobs/x  exclusive  "), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("\nshow-b     jobs/y  shared     "), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("waits for   nothing on this dlockd"), std::string::npos) << shown.out;
  const Outcome waiting = dlock({"session", "show", waiter});
  EXPECT_NE(waiting.out.find("\nshow-a     jobs/x  exclusive  1         "), std::string::npos)
      << waiting.out;
  const auto json = boost::json::parse(dlock({"--json", "session", "show", holder}).out);
  EXPECT_EQ(json.at("holds").as_array().size(), 2u);
  EXPECT_EQ(dlock({"session", "show", "s-no-such-session"}).status, 1);

  // Every namespace: a NAMESPACE column, and the waiter counted in WAITERS.
  const Outcome every = dlock({"list", "-A", "--all"});
  ASSERT_EQ(every.status, 0) << every.err;
  EXPECT_EQ(every.out.rfind("NAMESPACE  KEY", 0), 0u) << every.out;
  const auto row_of = [&every](const std::string& start) {
    const auto at = every.out.find("\n" + start);
    return at == std::string::npos
               ? std::string()
               : every.out.substr(at + 1, every.out.find('\n', at + 1) - at - 1);
  };
  const std::string x = row_of("show-a     jobs/x"), y = row_of("show-b     jobs/y");
  ASSERT_FALSE(x.empty()) << every.out;
  ASSERT_FALSE(y.empty()) << every.out;
  EXPECT_NE(x.find("  1  "), std::string::npos) << "one waiter: " << x;
  EXPECT_NE(y.find("  0  "), std::string::npos) << "no waiter: " << y;
  EXPECT_EQ(dlock({"list", "-A", "--prefix", "jobs"}).status, 64) << "-A excludes --prefix";

  ASSERT_EQ(dlock({"session", "close", holder}).status, 0);
  waits.join();
  dlock({"session", "close", waiter});
}

TEST_F(CliEndToEnd, UnreachableServerExits69) {
  const std::string url = server_->url();
  server_.reset();
  std::vector<const char*> argv = {"dlock", "--server", url.c_str(), "--timeout",
                                   "300ms", "get",      "k"};
  std::ostringstream out, err;
  EXPECT_EQ(cli::run_cli(static_cast<int>(argv.size()), argv.data(), out, err), 69) << err.str();
}

// Read-write locks (ADR-0020): two `run --shared` hold the key at once, `get` shows both
// readers, and an exclusive `run --wait` runs only after both are gone, with a greater token.
TEST_F(CliEndToEnd, SharedRunsOverlapAndAWriterWaitsForThem) {
  const std::filesystem::path dir(dir_);
  // Each reader notes its token, then holds the key until the test creates $DIR/go.
  const auto reader = [&](const std::string& name) {
    return start_run("reports/daily", {"--shared", "--ttl", "10s"},
                     "echo \"$DLOCK_LOCK_MODE $DLOCK_FENCING_TOKEN\" > \"$DIR/" + name +
                         "\"; i=0; while [ ! -e \"$DIR/go\" ] && [ $i -lt 400 ]; do sleep 0.05; "
                         "i=$((i+1)); done; touch \"$DIR/" +
                         name + ".done\"");
  };
  auto first = reader("r1");
  auto second = reader("r2");
  // A reader that was refused exits at once: stop waiting then.
  testing::wait_for(
      [&] {
        return (!read_file(dir / "r1").empty() && !read_file(dir / "r2").empty()) ||
               first->try_wait() || second->try_wait();
      },
      milliseconds(20'000));
  ASSERT_TRUE(!read_file(dir / "r1").empty() && !read_file(dir / "r2").empty())
      << "the two readers did not hold the key at the same time";
  const Outcome got = dlock({"--json", "get", "reports/daily"});
  ASSERT_EQ(got.status, 0) << got.err;
  const auto info = boost::json::parse(got.out);
  EXPECT_EQ(info.at("mode").as_string(), "shared");
  EXPECT_EQ(info.at("holders").as_array().size(), 2u) << got.out;

  auto writer = start_run(
      "reports/daily", {"--wait", "20s"},
      R"(if [ -e "$DIR/r1.done" ] && [ -e "$DIR/r2.done" ]; then r=after; else r=during; fi
         echo "$r $DLOCK_LOCK_MODE $DLOCK_FENCING_TOKEN" > "$DIR/w")");
  // `get` shows the waiting writer (issue 41, C3 "Waiters"): position, owner, mode, how long.
  boost::json::value queued;
  EXPECT_TRUE(testing::wait_for(
      [&] {
        queued = boost::json::parse(dlock({"--json", "get", "reports/daily"}).out);
        return !queued.at("waiters").as_array().empty();
      },
      milliseconds(10'000)))
      << queued;
  ASSERT_EQ(queued.at("waiters").as_array().size(), 1u) << queued;
  const auto& waiter = queued.at("waiters").at(0);
  EXPECT_EQ(waiter.at("position").to_number<int>(), 1);
  EXPECT_EQ(waiter.at("mode").as_string(), "exclusive");
  EXPECT_FALSE(waiter.at("owner").as_string().empty()) << queued;
  EXPECT_GE(waiter.at("waiting_ms").to_number<std::int64_t>(), 0);
  const auto text = dlock({"get", "reports/daily"}).out;
  // Aligned columns (issue 41), the head first.
  EXPECT_NE(text.find("waiters        1\nPOSITION  OWNER"), std::string::npos) << text;
  EXPECT_NE(text.find("\n1         "), std::string::npos) << text;
  EXPECT_FALSE(std::filesystem::exists(dir / "w")) << "a writer ran while readers held the key";
  std::ofstream(dir / "go").put('\n');
  EXPECT_EQ(wait_exit(*first, milliseconds(20'000)), 0);
  EXPECT_EQ(wait_exit(*second, milliseconds(20'000)), 0);
  ASSERT_EQ(wait_exit(*writer, milliseconds(20'000)), 0);
  std::istringstream r1(read_file(dir / "r1")), r2(read_file(dir / "r2")), w(read_file(dir / "w"));
  std::string mode1, mode2, when, writer_mode;
  std::uint64_t token1 = 0, token2 = 0, writer_token = 0;
  r1 >> mode1 >> token1;
  r2 >> mode2 >> token2;
  w >> when >> writer_mode >> writer_token;
  EXPECT_EQ(mode1, "shared");
  EXPECT_EQ(mode2, "shared");
  EXPECT_NE(token1, token2);
  EXPECT_EQ(when, "after");
  EXPECT_EQ(writer_mode, "exclusive");
  EXPECT_GT(writer_token, std::max(token1, token2));
}

// Semaphores: two permits of 2 held through the library, a third `run --semaphore 2` stays
// out (75), `semaphore` shows the limit and holders, another limit is a conflict, and a freed
// permit lets the run in.
TEST_F(CliEndToEnd, SemaphoreAdmitsItsLimitAndNoMore) {
  client::Client client(client_options());
  // One session per permit: a session acquiring again replaces its grant (C3).
  client::Session first(client, {"first", milliseconds(10'000), {}});
  client::Session second(client, {"second", milliseconds(10'000), {}});
  client::AcquireOptions two;
  two.permits = 2;
  auto a = first.acquire("gpu-pool", two);
  auto b = second.acquire("gpu-pool", two);
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(a->mode(), HoldMode::kPermit);
  EXPECT_EQ(b->limit(), 2u);
  EXPECT_GT(b->token(), a->token());

  auto third = start_run("gpu-pool", {"--semaphore", "2", "--wait", "300ms"}, "touch \"$DIR/ran\"");
  EXPECT_EQ(wait_exit(*third, milliseconds(20'000)), 75);
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(dir_) / "ran"));

  const Outcome shown = dlock({"--json", "semaphore", "gpu-pool"});
  ASSERT_EQ(shown.status, 0) << shown.err;
  const auto info = boost::json::parse(shown.out);
  EXPECT_EQ(info.at("limit").to_number<int>(), 2);
  EXPECT_EQ(info.at("holders").as_array().size(), 2u) << shown.out;

  const Outcome opened = dlock({"--json", "session", "open", "--ttl", "10s"});
  ASSERT_EQ(opened.status, 0) << opened.err;
  const std::string session_id(boost::json::parse(opened.out).at("session_id").as_string().c_str());
  const Outcome other_limit =
      dlock({"acquire", "gpu-pool", "--session", session_id, "--semaphore", "3"});
  EXPECT_EQ(other_limit.status, 1) << other_limit.err;
  EXPECT_NE(other_limit.err.find("limit"), std::string::npos) << other_limit.err;

  a->release();
  auto fourth = start_run("gpu-pool", {"--semaphore", "2", "--wait", "10s"},
                          R"(echo "$DLOCK_LOCK_MODE $DLOCK_FENCING_TOKEN" > "$DIR/p")");
  ASSERT_EQ(wait_exit(*fourth, milliseconds(20'000)), 0);
  std::istringstream seen(read_file(std::filesystem::path(dir_) / "p"));
  std::string mode;
  std::uint64_t token = 0;
  seen >> mode >> token;
  EXPECT_EQ(mode, "permit");
  EXPECT_GT(token, b->token());
}

// Elections (C3 "Elections"): `dlock elect` runs CMD as leader with its token and value; a
// second one waits and leads after the first exits, with a greater token; `dlock leader
// --watch` prints each change and ends with 0 on SIGINT.
TEST_F(CliEndToEnd, ASecondElectWaitsAndLeadsAfterTheFirstWithAGreaterToken) {
  const std::filesystem::path dir(dir_);
  const auto elect = [&](const std::string& name, const std::string& script) {
    std::vector<std::string> argv = {
        DLOCK_BINARY, "--server", server_->url(), "elect", "db-primary", "--value", name,
        "--wait",     "20s",      "--",           "sh",    "-c",         script};
    sigset_t none;
    sigemptyset(&none);
    return std::make_unique<cli::ChildProcess>(argv, std::vector<std::string>{"DIR=" + dir_}, none);
  };
  auto first = elect("node-1", R"(echo "$DLOCK_FENCING_TOKEN $DLOCK_LEADER_VALUE" > "$DIR/1"
      i=0; while [ ! -e "$DIR/go" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done)");
  // An elect that failed exits at once: stop waiting then.
  testing::wait_for([&] { return !read_file(dir / "1").empty() || first->try_wait(); },
                    milliseconds(20'000));
  ASSERT_FALSE(read_file(dir / "1").empty())
      << "the first elect did not lead (exit " << first->status().value_or(-1) << ")";
  const Outcome leader = dlock({"--json", "leader", "db-primary"});
  ASSERT_EQ(leader.status, 0) << leader.err;
  EXPECT_EQ(boost::json::parse(leader.out).at("leader").at("value").as_string(), "node-1");
  auto second = elect("node-2", R"(echo "$DLOCK_FENCING_TOKEN $DLOCK_LEADER_VALUE" > "$DIR/2")");
  ASSERT_TRUE(testing::wait_for(
      [&] { return testing::waiting_acquires(server_->address()) == 1 || second->try_wait(); },
      milliseconds(20'000)))
      << "the second elect never campaigned";
  EXPECT_FALSE(std::filesystem::exists(dir / "2")) << "two leaders at once";
  std::ofstream(dir / "go").put('\n');
  EXPECT_EQ(wait_exit(*first, milliseconds(20'000)), 0);
  ASSERT_EQ(wait_exit(*second, milliseconds(20'000)), 0);
  std::istringstream one(read_file(dir / "1")), two(read_file(dir / "2"));
  FencingToken token1 = 0, token2 = 0;
  std::string value1, value2;
  one >> token1 >> value1;
  two >> token2 >> value2;
  EXPECT_EQ(value1, "node-1");
  EXPECT_EQ(value2, "node-2");
  EXPECT_GT(token1, 0u);
  EXPECT_GT(token2, token1);
  // Both resigned on exit: nobody leads.
  EXPECT_EQ(dlock({"leader", "db-primary"}).out, "db-primary: no leader\n");
}

TEST_F(CliEndToEnd, LeaderWatchPrintsEachChangeAndExitsZeroOnSigint) {
  const std::filesystem::path out = std::filesystem::path(dir_) / "watch";
  sigset_t none;
  sigemptyset(&none);
  cli::ChildProcess watch(
      {"sh", "-c", "exec \"$DLOCK\" --server \"$SERVER\" leader db --watch > \"$OUT\""},
      {"DLOCK=" DLOCK_BINARY, "SERVER=" + server_->url(), "OUT=" + out.string()}, none);
  const auto printed = [&](const std::string& text) {
    return testing::wait_for([&] { return read_file(out).find(text) != std::string::npos; },
                             milliseconds(20'000));
  };
  ASSERT_TRUE(printed("db: no leader\n"));
  client::Client client(client_options());
  client::Session session(client, {"watched", milliseconds(10'000), {}});
  auto leadership = session.campaign("db", "v1");
  ASSERT_TRUE(leadership.has_value());
  ASSERT_TRUE(printed("value v1  fencing token " + std::to_string(leadership->token())));
  leadership->proclaim("v2");
  ASSERT_TRUE(printed("value v2  fencing token " + std::to_string(leadership->token())));
  leadership->resign();
  auto next = session.campaign("db", "v3");
  ASSERT_TRUE(next.has_value());
  EXPECT_GT(next->token(), leadership->token());
  ASSERT_TRUE(printed("value v3  fencing token " + std::to_string(next->token())));
  watch.signal(SIGINT);
  EXPECT_EQ(wait_exit(watch, milliseconds(20'000)), 0);
}

}  // namespace
}  // namespace dlock
