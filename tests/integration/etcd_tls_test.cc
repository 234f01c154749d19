// dlockd on an etcd that requires TLS with client certificates (docs/adr/0006-etcd-store.md,
// C5 etcd.cacert / etcd.cert / etcd.key): it serves through a server that verifies, and never
// grants anything through one that does not.

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "support/dlockd_process.h"
#include "support/etcd_server.h"

namespace dlock {
namespace {

testing::DlockdOptions tls_options(const testing::EtcdCluster& etcd, const std::string& cacert) {
  testing::DlockdOptions options;
  options.backend = "etcd";
  options.etcd_endpoints = etcd.endpoints();
  options.extra_args = {"--etcd-cacert",        cacert,       "--etcd-cert",
                        etcd.tls().client_cert, "--etcd-key", etcd.tls().client_key};
  return options;
}

TEST(EtcdTlsDlockd, ServesOverTlsAndRefusesAServerThatDoesNotVerify) {
  testing::EtcdCluster etcd(1, /*tls=*/true);
  const std::string session_body = R"({"owner":"alice","ttl_ms":15000})";
  {
    testing::DlockdProcess dlockd(tls_options(etcd, etcd.tls().ca));
    const auto created = testing::http_call(dlockd.address(), "POST", "/v1/sessions", session_body);
    ASSERT_EQ(created.status, 201) << created.body;
    const std::string sid(created.json.at("session_id").as_string());
    const auto acquired = testing::http_call(dlockd.address(), "POST", "/v1/locks/tls-key/acquire",
                                             R"({"session_id":")" + sid + R"(","ttl_ms":10000})");
    EXPECT_EQ(acquired.status, 200) << acquired.body;
  }
  try {
    testing::DlockdProcess dlockd(tls_options(etcd, etcd.tls().other_ca));
    const auto refused = testing::http_call(dlockd.address(), "POST", "/v1/sessions", session_body);
    EXPECT_EQ(refused.status, 503) << refused.body;
    EXPECT_EQ(refused.error_code(), "unavailable");
  } catch (const std::runtime_error& refused_to_start) {
    SUCCEED() << "dlockd did not start: " << refused_to_start.what();
  }
}

}  // namespace
}  // namespace dlock
