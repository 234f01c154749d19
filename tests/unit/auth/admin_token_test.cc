// admin.token as the principal `admin` (admin:*), its strength check and the token file that
// must not be readable by group or others.

#include "auth/admin_token.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "auth/crypto.h"
#include "dlock/errors.h"

namespace dlock::auth {
namespace {

const std::string kGood = "dlk_admin-token-for-tests-only-0123456789ab";

std::string message_of(std::string_view token) {
  try {
    check_admin_token(token);
  } catch (const InvalidArgumentError& error) {
    EXPECT_EQ(error.field(), "admin.token");
    return error.what();
  }
  return "";
}

TEST(AdminTokenTest, BuildsTheAdminPrincipal) {
  const Principal admin = admin_principal(kGood);
  EXPECT_EQ(admin.name, "admin");
  ASSERT_TRUE(admin.token_hash.has_value());
  EXPECT_TRUE(constant_time_equal(*admin.token_hash, sha256(kGood)));
  EXPECT_TRUE(admin.allows(Role::kAdmin, "any-namespace"));
  EXPECT_TRUE(admin.allows(Role::kLock, "default"));
  EXPECT_EQ(TokenTable({admin}).find_by_token(kGood)->name, "admin");
}

TEST(AdminTokenTest, RejectsWeakTokensWithoutEchoingThem) {
  EXPECT_EQ(message_of(kGood), "");
  EXPECT_EQ(message_of(random_token()), "");
  EXPECT_EQ(message_of("0123456789abcdef0123456789abcdef"), "");  // 128 bits as hex
  const std::string short_token = "s3cret-but-short";
  const std::string too_short = message_of(short_token);
  EXPECT_NE(too_short.find("too short (16 characters, at least 32 needed)"), std::string::npos)
      << too_short;
  EXPECT_NE(too_short.find("dlock token new"), std::string::npos);
  EXPECT_EQ(too_short.find(short_token), std::string::npos);
  const std::string repetitive = std::string(16, 'a') + std::string(24, 'b');
  const std::string predictable = message_of(repetitive);
  EXPECT_NE(predictable.find("too predictable"), std::string::npos) << predictable;
  EXPECT_EQ(predictable.find(repetitive), std::string::npos);
  EXPECT_NE(message_of(kGood + " x").find("printable ASCII"), std::string::npos);
  EXPECT_NE(message_of(kGood + "\n").find("printable ASCII"), std::string::npos);
  EXPECT_THROW(admin_principal("short"), InvalidArgumentError);
}

class AdminTokenFileTest : public ::testing::Test {
 protected:
  AdminTokenFileTest() {
    char pattern[] = "/tmp/dlock-admin-token-test-XXXXXX";
    dir_ = ::mkdtemp(pattern);
  }
  ~AdminTokenFileTest() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& text, mode_t mode) {
    const auto path = (dir_ / "admin-token").string();
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(AdminTokenFileTest, ReadsTheFirstLineOfAPrivateFile) {
  EXPECT_EQ(read_admin_token_file(write(kGood + "\n", 0600)), kGood);
  EXPECT_EQ(read_admin_token_file(write("  " + kGood + " \r\nignored\n", 0400)), kGood);
}

TEST_F(AdminTokenFileTest, RefusesAFileOthersMayRead) {
  for (const mode_t mode : {0640, 0604, 0660, 0644, 0602}) {
    const std::string path = write(kGood, mode);
    try {
      read_admin_token_file(path);
      ADD_FAILURE() << std::oct << mode << " accepted";
    } catch (const InvalidArgumentError& error) {
      EXPECT_EQ(error.field(), "admin.token.file");
      EXPECT_NE(std::string(error.what()).find("chmod 600"), std::string::npos) << error.what();
      EXPECT_EQ(std::string(error.what()).find(kGood), std::string::npos);
    }
  }
}

TEST_F(AdminTokenFileTest, RefusesMissingEmptyAndNonRegularFiles) {
  EXPECT_THROW(read_admin_token_file((dir_ / "missing").string()), InvalidArgumentError);
  EXPECT_THROW(read_admin_token_file(write("", 0600)), InvalidArgumentError);
  EXPECT_THROW(read_admin_token_file(write("   \n" + kGood, 0600)), InvalidArgumentError);
  ::chmod(dir_.c_str(), 0700);
  EXPECT_THROW(read_admin_token_file(dir_.string()), InvalidArgumentError);
}

}  // namespace
}  // namespace dlock::auth
