#pragma once

#include <string>
#include <string_view>

#include "dlock/errors.h"
#include "dlock/types.h"

namespace dlock::util {

// The LockLostError every store throws when a grant reference (key, token) names no live grant of
// its owner and session: released, expired, revoked, taken over, or not the kind the operation
// acts on (lock_store.h).
inline LockLostError lock_lost(std::string_view key, FencingToken token) {
  return LockLostError("lock " + std::string(key) + " token " + std::to_string(token) +
                       " is no longer held");
}

}  // namespace dlock::util
