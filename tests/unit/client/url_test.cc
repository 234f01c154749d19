#include <gtest/gtest.h>

#include "client/url.h"
#include "dlock/errors.h"

namespace dlock::client::detail {
namespace {

TEST(PercentEncode, KeyBecomesOnePathSegment) {
  EXPECT_EQ(percent_encode("payouts/batch-17"), "payouts%2Fbatch-17");
  EXPECT_EQ(percent_encode("a b?c#d%e&f=g+h"), "a%20b%3Fc%23d%25e%26f%3Dg%2Bh");
  EXPECT_EQ(percent_encode("A-Z_a.z~09"), "A-Z_a.z~09");
  EXPECT_EQ(percent_encode("caf\xC3\xA9"), "caf%C3%A9");
  // Dot segments would be collapsed by URL normalisation on the way.
  EXPECT_EQ(percent_encode("."), "%2E");
  EXPECT_EQ(percent_encode(".."), "%2E%2E");
  EXPECT_EQ(percent_encode("..."), "...");
}

TEST(QueryString, SkipsEmptyValuesAndEncodesTheRest) {
  EXPECT_EQ(query_string({}), "");
  EXPECT_EQ(query_string({{"ns", ""}}), "");
  EXPECT_EQ(query_string({{"session_id", "s/1"}, {"ns", ""}, {"fencing_token", "7"}}),
            "?session_id=s%2F1&fencing_token=7");
}

TEST(ParseServerUrl, HostPortAndPrefix) {
  ServerAddress a = parse_server_url("http://127.0.0.1:7070");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, "7070");
  EXPECT_EQ(a.base_path, "");
  ServerAddress b = parse_server_url("http://locks.internal/dlock/");
  EXPECT_EQ(b.host, "locks.internal");
  EXPECT_EQ(b.port, "80");
  EXPECT_EQ(b.base_path, "/dlock");
  ServerAddress c = parse_server_url("http://[::1]:9000");
  EXPECT_EQ(c.host, "::1");
  EXPECT_EQ(c.port, "9000");
  EXPECT_FALSE(c.tls);
  ServerAddress d = parse_server_url("https://locks.internal");
  EXPECT_TRUE(d.tls);
  EXPECT_EQ(d.port, "443");
  EXPECT_EQ(parse_server_url("https://127.0.0.1:7443").port, "7443");
}

TEST(SplitServerList, CommasAndBlanks) {
  EXPECT_EQ(split_server_list("http://a:1"), std::vector<std::string>{"http://a:1"});
  EXPECT_EQ(split_server_list(" http://a:1 ,, https://b:2,"),
            (std::vector<std::string>{"http://a:1", "https://b:2"}));
  EXPECT_TRUE(split_server_list(" , ").empty());
}

TEST(ParseServerUrl, RejectsWhatItCannotServe) {
  for (const char* bad : {"127.0.0.1:7070", "ftp://h:1", "http://", "http://u:p@h:1",
                          "http://h:1/?x=1", "not a url"}) {
    try {
      parse_server_url(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const InvalidArgumentError& error) {
      EXPECT_EQ(error.field(), "server") << bad;
    }
  }
}

}  // namespace
}  // namespace dlock::client::detail
