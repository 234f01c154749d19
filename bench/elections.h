#pragma once

// Election failover (C3 "Elections", ADR-0020): how long after a leader's session expires the
// next campaigner is granted, and an observer learns of it (bench/README.md).

#include <string>
#include <vector>

#include "bench.h"
#include "http_load.h"

namespace dlock::bench {

struct ElectionFailover {
  std::vector<Measurement> measurements;  // path "http", workloads failover-grant, -observe
  std::string note;                       // why nothing was measured, or "" when it was
  double ttl_ms = 0;                      // the leader's session TTL answered by dlockd
};

// `rounds` times: a leader L campaigns on a session of `ttl_ms` that it never renews; a second
// session W campaigns with a long wait_ms and an observer polls GET after_token/after_value
// (L's token and value). Samples: W's 200 received − L's expiry, and the observer's 200
// received − L's expiry, L's expiry being its session request's send time + the answered
// ttl_ms (the client's deadline, ADR-0011; steady clock). Then W resigns and closes its session.
// Each round starts after a pause of 0–499 ms (uniform, fixed seed), so that rounds do not fall
// in step with a periodic expiry check.
ElectionFailover http_election_failover(const HttpTarget& target, const std::string& backend,
                                        int rounds, int ttl_ms);

}  // namespace dlock::bench
