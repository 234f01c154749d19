// util::parse_release_notice: the payload of PostgreSQL's release notifications (ADR-0036).

#include <gtest/gtest.h>

#include "util/release_hub.h"

namespace dlock::util {
namespace {

TEST(ReleaseNotice, AKeyAloneIsAPossibleRelease) {
  const auto notice = parse_release_notice("ns/key");
  EXPECT_EQ(notice.key, "ns/key");
  EXPECT_EQ(notice.granted, 0u);
}

TEST(ReleaseNotice, AKeyAndATokenIsAHandOver) {
  const auto notice = parse_release_notice("ns/key with spaces\t18446744073709551615");
  EXPECT_EQ(notice.key, "ns/key with spaces");
  EXPECT_EQ(notice.granted, 18446744073709551615u);
}

TEST(ReleaseNotice, AnythingButADecimalTokenReadsAsAPossibleRelease) {
  for (const char* payload : {"ns/key\t", "ns/key\t12x", "ns/key\t-1", "ns/key\t1\t2",
                              "ns/key\t18446744073709551616", "ns/key\t 7"}) {
    const auto notice = parse_release_notice(payload);
    EXPECT_EQ(notice.key, "ns/key") << payload;
    EXPECT_EQ(notice.granted, 0u) << payload;
  }
}

}  // namespace
}  // namespace dlock::util
