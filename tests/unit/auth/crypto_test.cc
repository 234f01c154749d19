// The CSPRNG token generator, SHA-256 and hex helpers, and the session-ID generator of the
// embedded store (session IDs are credentials: contract C6).

#include "auth/crypto.h"

#include <gtest/gtest.h>

#include <set>

#include "util/ids.h"

namespace dlock::auth {
namespace {

TEST(RandomTokenTest, PrefixLengthAlphabetAndDistinctness) {
  std::set<std::string> seen;
  std::set<char> last_chars;
  for (int i = 0; i < 2000; ++i) {
    const std::string token = random_token();
    ASSERT_EQ(token.size(), kTokenPrefix.size() + kTokenRandomChars);
    ASSERT_EQ(token.substr(0, 4), "dlk_");
    for (const char c : token.substr(4)) {
      ASSERT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') << token;
    }
    last_chars.insert(token.back());
    seen.insert(token);
  }
  EXPECT_EQ(seen.size(), 2000u);
  // The 43rd character carries the last 4 bits: only 16 of the 64 symbols can appear there.
  EXPECT_LE(last_chars.size(), 16u);
  EXPECT_GE(last_chars.size(), 8u);
}

TEST(RandomTokenTest, EverySymbolAppears) {
  std::set<char> symbols;
  for (int i = 0; i < 200; ++i) {
    const std::string token = random_token();
    symbols.insert(token.begin() + 4, token.end() - 1);
  }
  EXPECT_EQ(symbols.size(), 64u);  // 200 * 42 draws from 64 symbols
}

TEST(Sha256Test, KnownVectorsAndHexRoundTrip) {
  EXPECT_EQ(to_hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(to_hex(sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const auto digest = sha256("dlock");
  EXPECT_EQ(digest_from_hex(to_hex(digest)), digest);
  EXPECT_FALSE(digest_from_hex("abc").has_value());
  EXPECT_FALSE(digest_from_hex(std::string(63, 'a') + "g").has_value());
  EXPECT_TRUE(constant_time_equal(digest, sha256("dlock")));
  EXPECT_FALSE(constant_time_equal(digest, sha256("dlocK")));
}

TEST(SessionIdTest, ThirtyTwoLowercaseHexDigitsAndDistinct) {
  std::set<std::string> seen;
  std::array<int, 16> digit_counts{};
  for (int i = 0; i < 5000; ++i) {
    const std::string id = util::random_id();
    ASSERT_EQ(id.size(), 32u);
    for (const char c : id) {
      ASSERT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << id;
      ++digit_counts[c <= '9' ? c - '0' : c - 'a' + 10];
    }
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 5000u);
  // 160000 digits, 10000 expected per value; a broken generator (a constant nibble) shows.
  for (const int count : digit_counts) {
    EXPECT_GT(count, 9000);
    EXPECT_LT(count, 11000);
  }
}

}  // namespace
}  // namespace dlock::auth
