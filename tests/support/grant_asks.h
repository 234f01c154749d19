#pragma once

// Test shorthand for the kind of a GrantRequest without its lease: helpers that add the lease
// take an Ask (shared_ask(), permit_ask(3), ...) and call it with the lease they choose.

#include <cstdint>
#include <functional>

#include "dlock/types.h"

namespace dlock::testing {

using Ask = std::function<GrantRequest(LockLease lease)>;

inline Ask exclusive_ask() {
  return [](LockLease lease) { return GrantRequest::exclusive(lease); };
}
inline Ask shared_ask() {
  return [](LockLease lease) { return GrantRequest::shared(lease); };
}
inline Ask permit_ask(std::uint32_t limit) {
  return [limit](LockLease lease) { return GrantRequest::permit(limit, lease); };
}

}  // namespace dlock::testing
