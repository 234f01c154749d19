// Permissions of the tokens file: parsing, patterns (namespace, prefix*, *) and the role
// implications of contract C6 (lock implies read; admin implies both).

#include "auth/permissions.h"

#include <gtest/gtest.h>

#include "auth/token_table.h"
#include "dlock/errors.h"

namespace dlock::auth {
namespace {

TEST(PatternTest, ExactPrefixAndStar) {
  EXPECT_TRUE(pattern_matches("payments", "payments"));
  EXPECT_FALSE(pattern_matches("payments", "payments2"));
  EXPECT_FALSE(pattern_matches("payments", "payment"));
  EXPECT_TRUE(pattern_matches("pay*", "payments"));
  EXPECT_TRUE(pattern_matches("pay*", "pay"));
  EXPECT_FALSE(pattern_matches("pay*", "pa"));
  EXPECT_FALSE(pattern_matches("pay*", "xpay"));
  EXPECT_TRUE(pattern_matches("*", "anything"));
  EXPECT_TRUE(pattern_matches("*", "default"));
}

TEST(PermissionTest, RolesImplyTheSmallerOnesOnTheSamePattern) {
  const Permission read{Role::kRead, "ns"};
  const Permission lock{Role::kLock, "ns"};
  const Permission admin{Role::kAdmin, "ns"};
  EXPECT_TRUE(read.allows(Role::kRead, "ns"));
  EXPECT_FALSE(read.allows(Role::kLock, "ns"));
  EXPECT_FALSE(read.allows(Role::kAdmin, "ns"));
  EXPECT_TRUE(lock.allows(Role::kRead, "ns"));
  EXPECT_TRUE(lock.allows(Role::kLock, "ns"));
  EXPECT_FALSE(lock.allows(Role::kAdmin, "ns"));
  EXPECT_TRUE(admin.allows(Role::kRead, "ns"));
  EXPECT_TRUE(admin.allows(Role::kLock, "ns"));
  EXPECT_TRUE(admin.allows(Role::kAdmin, "ns"));
  // Never across patterns.
  EXPECT_FALSE(admin.allows(Role::kRead, "other"));
}

TEST(PermissionTest, PrincipalCombinesItsPermissions) {
  Principal worker{"worker", std::nullopt, parse_permissions("lock:payments,read:*,admin:ops-*")};
  EXPECT_TRUE(worker.allows(Role::kLock, "payments"));
  EXPECT_TRUE(worker.allows(Role::kRead, "billing"));
  EXPECT_FALSE(worker.allows(Role::kLock, "billing"));
  EXPECT_TRUE(worker.allows(Role::kAdmin, "ops-eu"));
  EXPECT_FALSE(worker.allows(Role::kAdmin, "payments"));
  EXPECT_FALSE(Principal{}.allows(Role::kRead, "default"));
  EXPECT_TRUE(worker.has_role_somewhere(Role::kAdmin));
  const Principal reader{"reader", std::nullopt, parse_permissions("read:*")};
  EXPECT_TRUE(reader.has_role_somewhere(Role::kRead));
  EXPECT_FALSE(reader.has_role_somewhere(Role::kLock));
  EXPECT_FALSE(Principal{}.has_role_somewhere(Role::kRead));
}

TEST(ParsePermissionsTest, ParsesAndFormatsBack) {
  const auto parsed = parse_permissions("read:a,lock:b*,admin:*");
  ASSERT_EQ(parsed.size(), 3u);
  EXPECT_EQ(parsed[0], (Permission{Role::kRead, "a"}));
  EXPECT_EQ(parsed[1], (Permission{Role::kLock, "b*"}));
  EXPECT_EQ(parsed[2], (Permission{Role::kAdmin, "*"}));
  EXPECT_EQ(format_permissions(parsed), "read:a,lock:b*,admin:*");
}

void expect_rejected(const std::string& text, const std::string& says) {
  try {
    parse_permissions(text);
    ADD_FAILURE() << "accepted '" << text << "'";
  } catch (const InvalidArgumentError& error) {
    EXPECT_EQ(error.field(), "permissions");
    EXPECT_NE(std::string(error.what()).find(says), std::string::npos)
        << "'" << text << "': " << error.what();
  }
}

TEST(ParsePermissionsTest, RejectsEachMistakeSayingWhy) {
  expect_rejected("", "no permissions");
  expect_rejected("read", "is not <role>:<pattern>");
  expect_rejected("write:ns", "role 'write' is not read, lock or admin");
  expect_rejected("Read:ns", "role 'Read'");
  expect_rejected("read:", "empty namespace pattern");
  expect_rejected("read:a,", "empty permission");
  expect_rejected(",read:a", "empty permission");
  expect_rejected("read:a b", "a pattern is a namespace");
  expect_rejected("read:a*b", "a pattern is a namespace");
  expect_rejected("read:**", "a pattern is a namespace");
  expect_rejected("read:a/b", "a pattern is a namespace");
  expect_rejected("read:" + std::string(65, 'n'), "at most 64 bytes");
  EXPECT_NO_THROW(parse_permissions("read:" + std::string(64, 'n')));
  EXPECT_NO_THROW(parse_permissions("read:" + std::string(64, 'n') + "*"));
}

}  // namespace
}  // namespace dlock::auth
