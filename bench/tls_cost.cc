#include "tls_cost.h"

#include <iostream>

#include "http_load.h"
#include "support/test_certs.h"

namespace dlock::bench {
namespace {

HttpTarget target_of(const testing::DlockdProcess& dlockd) {
  HttpTarget target;
  const std::string& address = dlockd.address();
  const auto colon = address.rfind(':');
  target.host = address.substr(0, colon);
  target.port = static_cast<unsigned short>(std::stoi(address.substr(colon + 1)));
  return target;
}

// Each run on stderr: the spread between a mode's two runs says how much the machine moved.
Measurement logged(Measurement m, const char* run) {
  std::cerr << "[dlock-bench] " << m.backend << " TLS cost " << run << " c=" << m.clients << ": "
            << static_cast<long long>(m.per_second()) << "/s p50=" << m.p50_ms << "ms" << std::endl;
  return m;
}

// Two runs of one mode as one point: pairs/s over both, p50s and p99s averaged.
Measurement merge(Measurement a, const Measurement& b, const std::string& path) {
  a.path = path;
  a.seconds += b.seconds;
  a.ops += b.ops;
  a.errors += b.errors;
  a.p50_ms = (a.p50_ms + b.p50_ms) / 2;
  a.p99_ms = (a.p99_ms + b.p99_ms) / 2;
  a.acquire_p50_ms = (a.acquire_p50_ms + b.acquire_p50_ms) / 2;
  return a;
}

}  // namespace

void tls_cost(testing::DlockdOptions plain, testing::DlockdOptions tls, const std::string& work_dir,
              const std::string& backend, const std::vector<int>& clients,
              std::chrono::milliseconds duration, std::vector<Measurement>& out) {
  const auto ca = testing::make_test_ca(work_dir, "bench-ca");
  const auto cert = testing::make_server_cert(ca, work_dir, "bench-dlockd");
  tls.extra_args.insert(tls.extra_args.end(),
                        {"--tls-cert-file", cert.cert_file, "--tls-key-file", cert.key_file});
  testing::DlockdProcess plain_dlockd(std::move(plain));
  testing::DlockdProcess tls_dlockd(std::move(tls));
  const HttpTarget plain_target = target_of(plain_dlockd);
  HttpTarget tls_target = target_of(tls_dlockd);
  tls_target.tls = tls_client_context(ca.cert_file);

  const auto warm_up = std::max(std::chrono::milliseconds(200), duration / 4);
  http_pairs(plain_target, backend, clients.back(), warm_up);
  http_pairs(tls_target, backend, clients.back(), warm_up);
  for (int c : clients) {
    auto plain_first = logged(http_pairs(plain_target, backend, c, duration), "plain 1");
    auto tls_first = logged(http_pairs(tls_target, backend, c, duration), "tls 1");
    const auto tls_second = logged(http_pairs(tls_target, backend, c, duration), "tls 2");
    const auto plain_second = logged(http_pairs(plain_target, backend, c, duration), "plain 2");
    out.push_back(merge(std::move(plain_first), plain_second, "tls-plain"));
    out.push_back(merge(std::move(tls_first), tls_second, "tls"));
  }
}

}  // namespace dlock::bench
