#include "server/error_mapping.h"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include "dlock/errors.h"
#include "server/input_checks.h"

namespace dlock::server {

namespace http = boost::beast::http;

Response json_response(unsigned status, std::string body) {
  Response response{static_cast<http::status>(status), 11};
  response.set(http::field::content_type, "application/json");
  response.set(http::field::server, "dlockd");
  response.body() = std::move(body);
  response.prepare_payload();
  return response;
}

Response error_response(unsigned status, const std::string& code, const std::string& message,
                        const std::string& field, const boost::json::object& extra) {
  // The message and field may echo request bytes (a path, a header): keep the body valid JSON.
  boost::json::object error{{"code", code}, {"message", to_utf8(message)}};
  if (!field.empty()) error["field"] = to_utf8(field);
  for (const auto& member : extra) error[member.key()] = member.value();
  auto response =
      json_response(status, boost::json::serialize(boost::json::object{{"error", error}}));
  if (status == 503 || status == 429) response.set(http::field::retry_after, "1");
  return response;
}

namespace {

// How each ErrorCode goes on the wire (contract C3, "Error codes"): its status, and the code
// whose name (dlock::to_string, the one table of names) the body carries.
struct WireError {
  ErrorCode code;
  unsigned status;
  ErrorCode shown_as;
};

constexpr WireError kWireErrors[] = {
    {ErrorCode::kInvalidArgument, 400, ErrorCode::kInvalidArgument},
    {ErrorCode::kSessionNotFound, 404, ErrorCode::kSessionNotFound},
    {ErrorCode::kLockLost, 409, ErrorCode::kLockLost},
    {ErrorCode::kResourceExhausted, 429, ErrorCode::kResourceExhausted},
    {ErrorCode::kNotLeader, 503, ErrorCode::kNotLeader},
    // A transient backend failure is always 503 "unavailable", never "held".
    {ErrorCode::kUnavailable, 503, ErrorCode::kUnavailable},
    {ErrorCode::kUnknownOutcome, 503, ErrorCode::kUnavailable},
    {ErrorCode::kContention, 503, ErrorCode::kUnavailable},
    {ErrorCode::kInternal, 500, ErrorCode::kInternal},
    {ErrorCode::kUnauthenticated, 401, ErrorCode::kUnauthenticated},
    {ErrorCode::kPermissionDenied, 403, ErrorCode::kPermissionDenied},
    {ErrorCode::kConflict, 409, ErrorCode::kConflict},
};

// The input an error names, when it names one.
std::string field_of(const Error& failure) {
  if (const auto* invalid = dynamic_cast<const InvalidArgumentError*>(&failure)) {
    return invalid->field();
  }
  if (const auto* conflict = dynamic_cast<const ConflictError*>(&failure)) return conflict->field();
  return "";
}

Response error_response_for(const Error& failure) {
  for (const auto& wire : kWireErrors) {
    if (wire.code != failure.code()) continue;
    auto response =
        error_response(wire.status, to_string(wire.shown_as), failure.what(), field_of(failure));
    // Every 401 names its scheme (C6), also one that ends a wait (a principal removed at reload).
    if (wire.status == 401) response.set(http::field::www_authenticate, "Bearer");
    return response;
  }
  return error_response(500, to_string(ErrorCode::kInternal), failure.what());
}

}  // namespace

Response error_response(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& failure) {
    return error_response_for(failure);
  } catch (const std::exception& failure) {
    return error_response(500, to_string(ErrorCode::kInternal), failure.what());
  } catch (...) {
    return error_response(500, to_string(ErrorCode::kInternal), "unknown error");
  }
}

}  // namespace dlock::server
