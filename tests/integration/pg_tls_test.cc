// dlockd to PostgreSQL over TLS (C6: libpq's sslmode=verify-full and sslrootcert in the pg URL),
// against a PostgreSQL started with ssl=on and a certificate from a CA made at test time
// (tests/support/postgres_server.*, tests/support/test_certs.*). With the right CA dlockd serves
// locks; with another CA it refuses to start and says why.

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "support/dlockd_process.h"
#include "support/postgres_server.h"
#include "support/subprocess.h"
#include "support/test_certs.h"

namespace dlock::testing {
namespace {

namespace json = boost::json;

PostgresServer& tls_postgres() {
  static PostgresServer server(PostgresOptions{.tls = true});
  static const bool created = [] {
    server.ensure_database("dlock_tls");
    return true;
  }();
  (void)created;
  return server;
}

std::string verify_full_url(const std::string& ca_file) {
  return tls_postgres().url("dlock_tls") + "?sslmode=verify-full&sslrootcert=" + ca_file;
}

DlockdOptions pg_dlockd(const std::string& url) {
  DlockdOptions options;
  options.backend = "pg";
  options.pg_url = url;
  return options;
}

TEST(PgTls, DlockdServesLocksOverVerifiedTls) {
  DlockdProcess dlockd(pg_dlockd(verify_full_url(tls_postgres().ca_file())));
  EXPECT_EQ(http_call(dlockd.address(), "GET", "/readyz").status, 200);
  const auto session =
      http_call(dlockd.address(), "POST", "/v1/sessions",
                json::serialize(json::object{{"owner", "tls"}, {"ttl_ms", 30000}}));
  ASSERT_EQ(session.status, 201) << session.body;
  const std::string session_id(session.json.at("session_id").as_string());
  const auto grant =
      http_call(dlockd.address(), "POST", "/v1/locks/tls-key/acquire",
                json::serialize(json::object{{"session_id", session_id}, {"ttl_ms", 30000}}));
  ASSERT_EQ(grant.status, 200) << grant.body;
  EXPECT_GT(grant.json.at("fencing_token").to_number<std::uint64_t>(), 0u);
}

// Negative control of the test above: the same server, verified against a CA that did not sign
// its certificate. dlockd must not fall back to an unverified connection.
TEST(PgTls, DlockdRefusesAServerItsCaDidNotSign) {
  const std::string dir = make_temp_dir("dlock-pg-tls-other-ca");
  const auto other = make_test_ca(dir, "other-ca");
  std::string failure;
  try {
    DlockdProcess dlockd(pg_dlockd(verify_full_url(other.cert_file)));
    // Started after all: it must not be ready, and must not serve.
    failure = "dlockd started; /readyz answered " +
              std::to_string(http_call(dlockd.address(), "GET", "/readyz").status);
  } catch (const std::runtime_error& error) {
    failure = error.what();
  }
  std::filesystem::remove_all(dir);
  EXPECT_NE(failure.find("dlockd did not start"), std::string::npos) << failure;
  EXPECT_NE(failure.find("certificate verify failed"), std::string::npos) << failure;
}

}  // namespace
}  // namespace dlock::testing
