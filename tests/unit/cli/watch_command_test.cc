// `dlock watch` (cli/watch_command.h) against a fake dlockd: each poll carries the last answer's
// `next`, so after an outage the watch resumes exactly where it was (every event printed once),
// says so on stderr, and reports a reset; --json prints the server's objects.

#include "cli/watch_command.h"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <mutex>
#include <sstream>
#include <stop_token>
#include <vector>

#include "cli/server_retry.h"
#include "fake_server.h"
#include "test_options.h"

namespace dlock::client {
namespace {

using std::chrono::milliseconds;
using testing::FakeRequest;
using testing::FakeResponse;
using testing::FakeServer;

std::string event(int seq, const std::string& kind, const std::string& key) {
  return R"({"position":"e.)" + std::to_string(seq) + R"(","kind":")" + kind +
         R"(","ns":"default","key":")" + key +
         R"(","at":"2030-01-01T00:00:00.000Z","fencing_token":)" + std::to_string(100 + seq) +
         R"(,"owner":"alice","mode":"exclusive"})";
}

std::string page(const std::vector<std::string>& events, int next) {
  std::string body = R"({"events":[)";
  for (std::size_t i = 0; i < events.size(); ++i) body += (i ? "," : "") + events[i];
  return body + R"(],"next":"e.)" + std::to_string(next) + R"("})";
}

// Where the position is in a target: the `after` query value ("" when absent).
std::string after_of(const std::string& target) {
  const auto at = target.find("after=");
  if (at == std::string::npos) return "";
  return target.substr(at + 6, target.find('&', at) - at - 6);
}

class DlockWatchTest : public ::testing::Test {
 protected:
  // Answers the script's pages in turn (an empty body: 503), recording each `after`; stops the
  // watch once the script is done.
  void run(const std::vector<std::string>& script, bool json) {
    std::size_t calls = 0;
    FakeServer server([&](const FakeRequest& request) {
      std::lock_guard lock(mutex_);
      afters_.push_back(after_of(request.target));
      if (calls == script.size()) {
        stop_.request_stop();
        return FakeResponse{200, page({}, 99)};
      }
      const auto& body = script[calls++];
      if (body.empty()) return FakeResponse{503, testing::error_body("unavailable", "down")};
      return FakeResponse{200, body};
    });
    // As `dlock watch` does: one attempt per call, so that an outage reaches the loop.
    Client client(cli::one_attempt(testing::fast_options(server.url())));
    cli::WatchOptions watch{.target = "jobs/", .prefix = true, .ns = "", .json = json};
    cli::follow_watch(client, watch, out_, err_, stop_.get_token(),
                      [this](milliseconds delay) { delays_.push_back(delay); });
  }

  std::mutex mutex_;
  std::vector<std::string> afters_;
  std::vector<milliseconds> delays_;
  std::ostringstream out_, err_;
  std::stop_source stop_;
};

TEST_F(DlockWatchTest, ResumesFromTheLastPositionAfterAnOutagePrintingEachEventOnce) {
  run({page({}, 0), page({event(1, "grant", "jobs/a")}, 1), "", "",
       page({event(2, "release", "jobs/a"), event(3, "grant", "jobs/b")}, 3)},
      false);
  // The first call learns the position; every later one resumes from the previous `next`, the
  // outage's retries included.
  EXPECT_EQ(afters_, (std::vector<std::string>{"", "e.0", "e.1", "e.1", "e.1", "e.3"}));
  const auto text = out_.str();
  EXPECT_EQ(text.rfind("TIME", 0), 0u) << text;
  for (const auto* expected : {"grant          jobs/a", "release        jobs/a",
                               "grant          jobs/b", "token 101  exclusive"}) {
    const auto first = text.find(expected);
    EXPECT_NE(first, std::string::npos) << expected << "\n" << text;
    EXPECT_EQ(text.find(expected, first + 1), std::string::npos) << "twice: " << expected;
  }
  EXPECT_LT(text.find("grant          jobs/a"), text.find("release        jobs/a"));
  const auto notices = err_.str();
  EXPECT_NE(notices.find("connection lost"), std::string::npos) << notices;
  EXPECT_NE(notices.find("resuming after e.1"), std::string::npos) << notices;
  EXPECT_NE(notices.find("resumed after e.1"), std::string::npos) << notices;
  EXPECT_EQ(delays_, (std::vector<milliseconds>{milliseconds(500), milliseconds(1000)}));
}

TEST_F(DlockWatchTest, AResetIsPrintedAndReportedAndJsonPrintsTheServersObjects) {
  run({page({}, 0), page({R"({"position":"f.0","kind":"reset","reason":"another dlockd process"})",
                          event(1, "grant", "jobs/a")},
                         1)},
      true);
  std::istringstream lines(out_.str());
  std::vector<std::string> kinds;
  for (std::string line; std::getline(lines, line);) {
    kinds.emplace_back(boost::json::parse(line).at("kind").as_string());
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"reset", "grant"}));
  EXPECT_NE(err_.str().find("could not resume after e.0 (another dlockd process): events may be "
                            "missing"),
            std::string::npos)
      << err_.str();
}

}  // namespace
}  // namespace dlock::client
