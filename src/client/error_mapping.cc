#include "client/error_mapping.h"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "dlock/client.h"
#include "dlock/errors.h"

namespace dlock::client::detail {
namespace {

std::string string_member(const boost::json::object& object, const char* name) {
  const auto* value = object.if_contains(name);
  if (value == nullptr || !value->is_string()) return {};
  return std::string(value->get_string());
}

}  // namespace

ApiError parse_api_error(const HttpResponse& response) {
  ApiError error;
  error.status = response.status;
  boost::system::error_code ec;
  const boost::json::value body = boost::json::parse(response.body, ec);
  if (!ec && body.is_object()) {
    if (const auto* inner = body.get_object().if_contains("error");
        inner != nullptr && inner->is_object()) {
      error.code = string_member(inner->get_object(), "code");
      error.message = string_member(inner->get_object(), "message");
      error.field = string_member(inner->get_object(), "field");
    }
  }
  if (error.message.empty()) {
    // Keep a hint of what answered (a proxy, a wrong port) without flooding the message.
    error.message = "HTTP " + std::to_string(response.status);
    if (!response.body.empty()) error.message += ": " + response.body.substr(0, 200);
  }
  return error;
}

bool is_transient_status(int status) {
  return status == 429 || status == 502 || status == 503 || status == 504;
}

// The wire codes are the server's own names of dlock/errors.h (to_string(ErrorCode), C3); the
// few spelled out below are codes with no ErrorCode: "held" (a decision), "lock_not_found",
// "payload_too_large", and C3's older names of the C6 codes.
void throw_api_error(const ApiError& error, const std::string& what) {
  const std::string message = what + ": " + error.message;
  const std::string& code = error.code;
  if (code == to_string(ErrorCode::kInvalidArgument) || (code.empty() && error.status == 400)) {
    throw InvalidArgumentError(error.field.empty() ? "request" : error.field, message);
  }
  if (code == "payload_too_large" || (code.empty() && error.status == 413)) {
    throw InvalidArgumentError(error.field.empty() ? "body" : error.field, message);
  }
  // Contract C6 spells them unauthenticated / permission_denied; C3 unauthorized / forbidden.
  if (code == to_string(ErrorCode::kUnauthenticated) || code == "unauthorized" ||
      (code.empty() && error.status == 401)) {
    throw UnauthenticatedError(message +
                               " (a bearer token is missing or unknown: see DLOCK_TOKEN)");
  }
  if (code == to_string(ErrorCode::kPermissionDenied) || code == "forbidden" ||
      (code.empty() && error.status == 403)) {
    throw PermissionDeniedError(message);
  }
  if (code == to_string(ErrorCode::kSessionNotFound)) throw SessionNotFoundError(message);
  if (code == to_string(ErrorCode::kConflict)) {
    throw ConflictError(error.field.empty() ? "request" : error.field, message);
  }
  // For extend and release both mean "this grant is gone": the outcome the caller must act on.
  if (code == to_string(ErrorCode::kLockLost) || code == "lock_not_found")
    throw LockLostError(message);
  if (code == to_string(ErrorCode::kNotLeader)) throw NotLeaderError(message);
  // A server limit (waiters, sessions): the server is up, just full.
  if (code == to_string(ErrorCode::kResourceExhausted) || (code.empty() && error.status == 429)) {
    throw ResourceExhaustedError(message);
  }
  if (code == to_string(ErrorCode::kUnavailable) || is_transient_status(error.status)) {
    throw UnavailableError(message);
  }
  if (error.status >= 400 && error.status < 500 && code != "held") {
    throw InvalidArgumentError(error.field.empty() ? "request" : error.field, message);
  }
  throw InternalError(message + " (HTTP " + std::to_string(error.status) +
                      (code.empty() ? "" : ", code " + code) + ")");
}

}  // namespace dlock::client::detail
