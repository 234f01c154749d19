// Server-supplied text on a terminal (docs/cli.md, "Output"): every human-readable output of the
// CLI shows control characters as escapes, so a key, owner, session id, election value or error
// message cannot clear the screen (ESC[2J), overwrite a line (\r) or retitle the window, and
// valid UTF-8 text is kept; --json stays exact. printable() itself, then the CLI in process
// against a fake dlockd that answers with such text.

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <string>

#include "cli/output.h"
#include "cli/terminal_text.h"
#include "cli_in_process.h"
#include "fake_server.h"

namespace dlock::client {
namespace {

using cli::printable;
using testing::dlock;
using testing::FakeRequest;
using testing::FakeResponse;
using testing::FakeServer;

// What a terminal would act on: C0 controls but the line's own newline and the tables' tabs,
// DEL, C1 controls in UTF-8. The CLI's own text has none of them.
void expect_inert(const std::string& text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const bool c0 = byte < 0x20 && byte != '\n' && byte != '\t';
    const bool c1 = byte == 0xc2 && i + 1 < text.size() &&
                    static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(text[i + 1]) <= 0x9f;
    EXPECT_FALSE(c0 || byte == 0x7f || c1)
        << "byte " << static_cast<int>(byte) << " at " << i << " of: " << text;
  }
}

TEST(Printable, ControlsBecomeEscapesAndUtf8TextStays) {
  EXPECT_EQ(printable("plain key-1/a.b"), "plain key-1/a.b");
  EXPECT_EQ(printable("\x1b[2J"), "\\x1b[2J");
  EXPECT_EQ(printable("a\rb\nc\td"), "a\\x0db\\x0ac\\x09d");
  EXPECT_EQ(printable(std::string("nul\0del\x7f", 8)), "nul\\x00del\\x7f");
  EXPECT_EQ(printable("back\\slash"), "back\\\\slash");
  // UTF-8 text as it is: Latin, CJK, an emoji (4 bytes).
  EXPECT_EQ(printable("Zoë 東京 \xf0\x9f\x94\x92"), "Zoë 東京 \xf0\x9f\x94\x92");
  // C1 controls: CSI as UTF-8 (U+009B) and as a lone byte (CSI to an 8-bit terminal).
  EXPECT_EQ(printable("\xc2\x9b"
                      "2J"),
            "\\u009b2J");
  EXPECT_EQ(printable("\x9b"
                      "2J"),
            "\\x9b2J");
  // Bidirectional overrides and line separators: text that displays as other text.
  EXPECT_EQ(printable("a\xe2\x80\xae"
                      "b\xe2\x80\xa8"),
            "a\\u202eb\\u2028");
  // Not UTF-8: an overlong ESC, a surrogate, a truncated sequence, past U+10FFFF.
  EXPECT_EQ(printable("\xc0\x9b"), "\\xc0\\x9b");
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(printable("\xe6\x9d"), "\\xe6\\x9d");
  EXPECT_EQ(printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
}

// JSON strings as a hostile server would send them.
constexpr const char* kEvilOwner = R"(mallory\u001b[2J\r)";
constexpr const char* kEvilValue = R"(10.0.0.7\u001b]0;pwned\u0007\u009b31m)";
constexpr const char* kEvilSession = R"(s\r\u007f)";
constexpr const char* kEvilKey = R"(k\u001b[2J)";

std::string lock_json(const std::string& key) {
  return R"({"key":")" + key + R"(","fencing_token":5,"owner":")" + kEvilOwner +
         R"(","session_id":")" + kEvilSession +
         R"(","acquired_at":"2030-01-01T00:00:00Z","expires_at":"2030-01-01T00:00:30Z",)"
         R"("lease":"ttl","mode":"exclusive"})";
}

TEST(CliTerminalText, LeaderOwnerAndValueAreEscapedAndJsonIsExact) {
  FakeServer server([](const FakeRequest&) {
    return FakeResponse{200, std::string(R"({"name":"db","leader":{"owner":")") + kEvilOwner +
                                 R"(","value":")" + kEvilValue +
                                 R"("},"fencing_token":9,"acquired_at":"2030-01-01T00:00:00Z",)"
                                 R"("expires_at":"2030-01-01T00:00:30Z"})"};
  });
  auto result = dlock({"--server", server.url(), "leader", "db"});
  ASSERT_EQ(result.status, 0) << result.err;
  expect_inert(result.out);
  EXPECT_NE(
      result.out.find("leader mallory\\x1b[2J\\x0d  value 10.0.0.7\\x1b]0;pwned\\x07\\u009b31m"),
      std::string::npos)
      << result.out;

  result = dlock({"--server", server.url(), "leader", "db", "--json"});
  ASSERT_EQ(result.status, 0) << result.err;
  const auto json = boost::json::parse(result.out);
  EXPECT_EQ(json.at("leader").at("owner").as_string(), "mallory\x1b[2J\r");
  EXPECT_EQ(json.at("leader").at("value").as_string(),
            "10.0.0.7\x1b]0;pwned\x07\xc2\x9b"
            "31m");
}

TEST(CliTerminalText, GetAndListEscapeKeysOwnersAndSessions) {
  FakeServer server([](const FakeRequest& request) {
    if (request.target.rfind("/v1/locks?", 0) == 0 || request.target == "/v1/locks") {
      return FakeResponse{200, R"({"locks":[)" + lock_json(kEvilKey) + "]}"};
    }
    return FakeResponse{200, lock_json(kEvilKey)};
  });
  auto result = dlock({"--server", server.url(), "get", "k"});
  ASSERT_EQ(result.status, 0) << result.err;
  expect_inert(result.out);
  EXPECT_NE(result.out.find("key            k\\x1b[2J\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("owner          mallory\\x1b[2J\\x0d\n"), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("session        s\\x0d\\x7f\n"), std::string::npos) << result.out;

  result = dlock({"--server", server.url(), "list"});
  ASSERT_EQ(result.status, 0) << result.err;
  expect_inert(result.out);
  EXPECT_NE(
      result.out.find("k\\x1b[2J  exclusive  5              mallory\\x1b[2J\\x0d  s\\x0d\\x7f  "),
      std::string::npos)
      << result.out;

  result = dlock({"--server", server.url(), "list", "--json"});
  ASSERT_EQ(result.status, 0) << result.err;
  const auto lock = boost::json::parse(result.out).at("locks").at(0);
  EXPECT_EQ(lock.at("key").as_string(), "k\x1b[2J");
  EXPECT_EQ(lock.at("session_id").as_string(), "s\r\x7f");
}

TEST(CliTerminalText, ServerErrorMessagesAreEscaped) {
  FakeServer server([](const FakeRequest&) {
    return FakeResponse{
        404, R"({"error":{"code":"session_not_found","message":"gone\u001b[2J\rOK all fine"}})"};
  });
  auto result = dlock({"--server", server.url(), "session", "keepalive", "s1"});
  EXPECT_NE(result.status, 0);
  expect_inert(result.err);
  EXPECT_NE(result.err.find("gone\\x1b[2J\\x0dOK all fine"), std::string::npos) << result.err;
  // With --json too: errors go to stderr as text.
  result = dlock({"--server", server.url(), "--json", "session", "keepalive", "s1"});
  expect_inert(result.err);
  EXPECT_NE(result.err.find("gone\\x1b[2J\\x0dOK all fine"), std::string::npos) << result.err;
}

// `dlock list`'s AGE column, and its columns aligned by characters, not bytes, with an escaped
// owner as wide as its escape.
TEST(ListOutput, AgeIsShortAndColumnsAlignOnCharacters) {
  using std::chrono::milliseconds;
  EXPECT_EQ(cli::format_age(milliseconds(42'900)), "42s");
  EXPECT_EQ(cli::format_age(milliseconds(307'000)), "5m07s");
  EXPECT_EQ(cli::format_age(milliseconds(11'520'000)), "3h12m");
  EXPECT_EQ(cli::format_age(milliseconds(187'200'000)), "2d04h");
  EXPECT_EQ(cli::format_age(milliseconds(-5)), "0s");  // a server clock ahead of ours

  const WallClock::time_point now = WallClock::now();
  LockInfo a;
  a.key = "caf\u00e9";  // 5 bytes, 4 characters
  a.owner_id = "x\x1b";
  a.fencing_token = 7;
  a.acquired_at = now - std::chrono::seconds(65);
  LockInfo b = a;
  b.key = "b";
  b.mode = HoldMode::kShared;
  std::ostringstream out;
  client::LockPage listed;
  listed.locks = {a, b};
  listed.waiting = {3, 0};
  cli::Printer(out, false).locks(listed, /*every_namespace=*/false, cli::ListCut{2, false}, now);
  std::istringstream lines(out.str());
  std::string header, first, second, note;
  std::getline(lines, header);
  std::getline(lines, first);
  std::getline(lines, second);
  std::getline(lines, note);
  EXPECT_EQ(
      header.rfind("KEY   MODE       FENCING_TOKEN  OWNER  SESSION  WAITERS  AGE    EXPIRES_AT", 0),
      0U)
      << header;
  EXPECT_EQ(
      first.rfind("caf\u00e9  exclusive  7              x\\x1b  -        3        1m05s  -", 0), 0U)
      << first;
  EXPECT_EQ(second.rfind("b     shared     7", 0), 0U) << second;
  EXPECT_EQ(note, "showing the first 2; there may be more: use --all, --limit N or --prefix");

  // Every namespace (dlock list -A): a NAMESPACE column first.
  listed.namespaces = {"payments", "default"};
  std::ostringstream every;
  cli::Printer(every, false).locks(listed, /*every_namespace=*/true, std::nullopt, now);
  EXPECT_EQ(every.str().rfind("NAMESPACE  KEY   MODE", 0), 0U) << every.str();
  EXPECT_NE(every.str().find("\npayments   caf\u00e9  exclusive"), std::string::npos)
      << every.str();
}

}  // namespace
}  // namespace dlock::client
