#include "dlock/errors.h"

namespace dlock {

const char* to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kSessionNotFound:
      return "session_not_found";
    case ErrorCode::kLockLost:
      return "lock_lost";
    case ErrorCode::kContention:
      return "contention";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kNotLeader:
      return "not_leader";
    case ErrorCode::kUnknownOutcome:
      return "unknown_outcome";
    case ErrorCode::kResourceExhausted:
      return "too_many_requests";  // the wire code of C3, and the label of C4
    case ErrorCode::kInternal:
      return "internal";
    case ErrorCode::kUnauthenticated:
      return "unauthenticated";  // the wire codes of C6
    case ErrorCode::kPermissionDenied:
      return "permission_denied";
    case ErrorCode::kConflict:
      return "conflict";
  }
  return "internal";
}

}  // namespace dlock
