#pragma once

// C3's error bodies ({"error": {"code", "message", "field"?}}) to the exceptions of
// dlock/errors.h, in one place. "held" never becomes an exception here: the acquire path
// turns it into an empty optional before anything is mapped.

#include <string>

#include "client/transport.h"

namespace dlock::client::detail {

struct ApiError {
  int status = 0;
  std::string code;  // "" when the body was not a C3 error (e.g. a proxy's HTML page)
  std::string message;
  std::string field;
};

// Never throws: a body that is not a C3 error yields an ApiError with an empty code.
ApiError parse_api_error(const HttpResponse& response);

// Statuses worth retrying after a delay: 429, 502, 503, 504.
bool is_transient_status(int status);

// Throws the exception for `error`: invalid_argument/payload_too_large -> InvalidArgumentError
// (with the field), unauthenticated/unauthorized -> UnauthenticatedError,
// permission_denied/forbidden -> PermissionDeniedError, session_not_found ->
// SessionNotFoundError, lock_lost/lock_not_found -> LockLostError, not_leader ->
// NotLeaderError, too_many_requests -> ResourceExhaustedError, unavailable/502/504 ->
// UnavailableError, the rest -> InternalError. `what` names the call for the message, e.g. "acquire
// payouts/batch-17".
[[noreturn]] void throw_api_error(const ApiError& error, const std::string& what);

}  // namespace dlock::client::detail
