// The tokens file parser of contract C6: every error names the file, the line and what is
// wrong, and never echoes a hash; lookups by token (constant-time compare) and by name.

#include "auth/tokens_file.h"

#include <gtest/gtest.h>

#include <string>

#include "auth/crypto.h"
#include "dlock/errors.h"

namespace dlock::auth {
namespace {

const std::string kAliceToken = "dlk_alice-token-for-tests-only-0123456789abc";
const std::string kBobToken = "dlk_bob-token-for-tests-only-0123456789abcdef";

std::string hash_of(const std::string& token) { return to_hex(sha256(token)); }

TEST(TokensFileTest, ParsesPrincipalsCommentsAndBlankLines) {
  const std::string text = "# dlockd tokens\n\n   \nalice " + hash_of(kAliceToken) +
                           " lock:payments,read:*\n\t# indented comment\nbob\t" +
                           hash_of(kBobToken) + "\tread:pay*\r\ngate - admin:*\n";
  const TokenTable table = parse_tokens(text, "tokens");
  ASSERT_EQ(table.size(), 3u);
  const Principal* alice = table.find_by_token(kAliceToken);
  ASSERT_NE(alice, nullptr);
  EXPECT_EQ(alice->name, "alice");
  EXPECT_TRUE(alice->allows(Role::kLock, "payments"));
  EXPECT_TRUE(alice->allows(Role::kRead, "other"));
  EXPECT_FALSE(alice->allows(Role::kLock, "other"));
  const Principal* bob = table.find_by_token(kBobToken);
  ASSERT_NE(bob, nullptr);
  EXPECT_EQ(bob->name, "bob");
  EXPECT_TRUE(bob->allows(Role::kRead, "payments"));
  // `-`: certificate only; found by name, never by a token.
  const Principal* gate = table.find_by_name("gate");
  ASSERT_NE(gate, nullptr);
  EXPECT_FALSE(gate->token_hash.has_value());
  EXPECT_TRUE(gate->allows(Role::kAdmin, "x"));
  EXPECT_EQ(table.find_by_token("-"), nullptr);
  EXPECT_EQ(table.find_by_token(""), nullptr);
  EXPECT_EQ(table.find_by_token(kAliceToken + "x"), nullptr);
  EXPECT_EQ(table.find_by_token(kAliceToken.substr(1)), nullptr);
  EXPECT_EQ(table.find_by_name("carol"), nullptr);
}

TEST(TokensFileTest, UpperCaseHashIsTheSameHash) {
  std::string upper = hash_of(kAliceToken);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const TokenTable table = parse_tokens("alice " + upper + " read:*", "tokens");
  EXPECT_NE(table.find_by_token(kAliceToken), nullptr);
}

TEST(TokensFileTest, AnEmptyFileIsAnEmptyTable) {
  EXPECT_EQ(parse_tokens("", "tokens").size(), 0u);
  EXPECT_EQ(parse_tokens("# nobody yet\n", "tokens").size(), 0u);
}

// Parses `text` expecting an error at `line` whose message contains `says`; checks that the
// message names the file and never contains a hash.
void expect_error(const std::string& text, std::size_t line, const std::string& says) {
  try {
    parse_tokens(text, "/etc/dlock/tokens");
    ADD_FAILURE() << "accepted:\n" << text;
  } catch (const TokensFileError& error) {
    const std::string what = error.what();
    EXPECT_EQ(error.line(), line) << what;
    EXPECT_EQ(error.path(), "/etc/dlock/tokens");
    EXPECT_EQ(what.rfind("/etc/dlock/tokens:" + std::to_string(line) + ": ", 0), 0u) << what;
    EXPECT_NE(what.find(says), std::string::npos) << what;
    EXPECT_EQ(what.find(hash_of(kAliceToken)), std::string::npos) << what;
    EXPECT_EQ(what.find(hash_of(kBobToken)), std::string::npos) << what;
    EXPECT_EQ(what.find("deadbeef"), std::string::npos) << what;
  }
}

TEST(TokensFileTest, EveryErrorNamesItsLine) {
  const std::string alice = "alice " + hash_of(kAliceToken) + " read:*\n";
  const std::string bob = "bob " + hash_of(kBobToken) + " read:*\n";
  expect_error("# header\n\nalice " + hash_of(kAliceToken) + "\n", 3, "found 2 fields");
  expect_error("alice\n", 1, "found 1 field");
  expect_error(alice + "bob " + hash_of(kBobToken) + " read:* extra\n", 2, "found 4 fields");
  expect_error("alice deadbeef read:*\n", 1, "not 64 hex digits");
  expect_error("alice " + hash_of(kAliceToken).substr(1) + "g read:*\n", 1, "not 64 hex digits");
  expect_error(alice + "bob " + hash_of(kBobToken) + " write:*\n", 2, "role 'write'");
  expect_error(alice + "bob " + hash_of(kBobToken) + " read\n", 2, "principal 'bob'");
  expect_error(alice + "bob " + hash_of(kBobToken) + " read:a*b\n", 2, "pattern");
  expect_error(alice + "bob " + hash_of(kBobToken) + " read:*,\n", 2, "empty permission");
  expect_error(alice + "\n" + alice, 3, "principal 'alice' already defined on line 1");
  expect_error(alice + "bob " + hash_of(kAliceToken) + " read:*\n", 2,
               "same token hash as 'alice' on line 1");
  expect_error(alice + bob + "al\x01ice - read:*\n", 3, "printable ASCII");
  expect_error(alice + bob + "caf\xc3\xa9 - read:*\n", 3, "printable ASCII");
  expect_error(std::string(129, 'p') + " - read:*\n", 1, "at most 128 bytes");
}

TEST(TokensFileTest, CertificateOnlyPrincipalsMayShareTheDash) {
  EXPECT_EQ(parse_tokens("gate - read:*\nproxy - lock:*\n", "tokens").size(), 2u);
}

TEST(TokensFileTest, LoadNamesAMissingFile) {
  try {
    load_tokens_file("/nonexistent/tokens");
    FAIL();
  } catch (const TokensFileError& error) {
    EXPECT_EQ(error.line(), 0u);
    EXPECT_EQ(std::string(error.what()), "/nonexistent/tokens: cannot open the tokens file");
  }
  // A configuration error of ADR-0003: caught as an InvalidArgumentError naming its setting.
  try {
    load_tokens_file("/nonexistent/tokens");
    FAIL();
  } catch (const InvalidArgumentError& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(error.field(), "auth.tokens.file");
  }
}

TEST(TokensFileTest, LineForATokenParsesBackToIt) {
  const auto permissions = parse_permissions("lock:payments");
  const std::string line = tokens_file_line("alice", kAliceToken, permissions);
  EXPECT_EQ(line, "alice " + hash_of(kAliceToken) + " lock:payments");
  const TokenTable table = parse_tokens(line, "tokens");
  ASSERT_NE(table.find_by_token(kAliceToken), nullptr);
  EXPECT_THROW(tokens_file_line("al ice", kAliceToken, permissions), InvalidArgumentError);
}

TEST(TokenTableTest, ConstructorRejectsClashes) {
  Principal alice{"alice", sha256(kAliceToken), parse_permissions("read:*")};
  Principal other{"other", sha256(kAliceToken), parse_permissions("read:*")};
  EXPECT_THROW(TokenTable({alice, alice}), InvalidArgumentError);
  EXPECT_THROW(TokenTable({alice, other}), InvalidArgumentError);
  EXPECT_THROW(TokenTable({Principal{"", std::nullopt, {}}}), InvalidArgumentError);
  EXPECT_THROW(TokenTable({Principal{"#x", std::nullopt, {}}}), InvalidArgumentError);
  const TokenTable one({alice});
  EXPECT_THROW(one.with(alice), InvalidArgumentError);
  EXPECT_EQ(one.with(Principal{"bob", sha256(kBobToken), {}}).size(), 2u);
  EXPECT_EQ(one.size(), 1u);  // with() copies
}

TEST(TokenTableTest, FindsTheMatchingEntryAmongMany) {
  // The scan compares every entry; the match is found wherever it is.
  std::vector<Principal> principals;
  for (int i = 0; i < 200; ++i) {
    principals.push_back(
        Principal{"p" + std::to_string(i), sha256("token-" + std::to_string(i)), {}});
  }
  const TokenTable table(std::move(principals));
  for (int i : {0, 1, 99, 199}) {
    const Principal* found = table.find_by_token("token-" + std::to_string(i));
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found->name, "p" + std::to_string(i));
  }
  EXPECT_EQ(table.find_by_token("token-200"), nullptr);
}

}  // namespace
}  // namespace dlock::auth
