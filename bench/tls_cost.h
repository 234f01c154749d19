#pragma once

// TLS cost (bench/README.md): uncontended pairs through a dlockd serving HTTPS
// (--tls-cert-file/--tls-key-file, contract C6) against the same through a dlockd serving plain
// HTTP, both on the same backend, measured alternately in one run so that the ratio is fair on
// a drifting machine.

#include <chrono>
#include <string>
#include <vector>

#include "bench.h"
#include "support/dlockd_process.h"

namespace dlock::bench {

// `plain` and `tls` start the two dlockd (for sqlite each on its own file); the TLS one gets the
// certificate flags added here. Certificates are made with openssl in `work_dir`. At each client
// count: plain, TLS, TLS, plain (after an unmeasured warm-up of each), the two runs of a mode
// merged (pairs/s over both runs, p50 the mean of the two). Appends measurements with path
// "tls-plain" and "tls", workload "pairs".
void tls_cost(testing::DlockdOptions plain, testing::DlockdOptions tls, const std::string& work_dir,
              const std::string& backend, const std::vector<int>& clients,
              std::chrono::milliseconds duration, std::vector<Measurement>& out);

}  // namespace dlock::bench
