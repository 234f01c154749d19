#include "server/error_mapping.h"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include "dlock/errors.h"

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
                        const std::string& field) {
  boost::json::object error{{"code", code}, {"message", message}};
  if (!field.empty()) error["field"] = field;
  auto response =
      json_response(status, boost::json::serialize(boost::json::object{{"error", error}}));
  if (status == 503 || status == 429) response.set(http::field::retry_after, "1");
  return response;
}

Response error_response(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const InvalidArgumentError& failure) {
    return error_response(400, "invalid_argument", failure.what(), failure.field());
  } catch (const Error& failure) {
    switch (failure.code()) {
      case ErrorCode::kSessionNotFound:
        return error_response(404, "session_not_found", failure.what());
      case ErrorCode::kLockLost:
        return error_response(409, "lock_lost", failure.what());
      case ErrorCode::kResourceExhausted:
        return error_response(429, "too_many_requests", failure.what());
      case ErrorCode::kNotLeader:
        return error_response(503, "not_leader", failure.what());
      case ErrorCode::kUnavailable:
      case ErrorCode::kUnknownOutcome:
      case ErrorCode::kContention:
        // A transient backend failure is always 503, never "held".
        return error_response(503, "unavailable", failure.what());
      case ErrorCode::kInvalidArgument:
      case ErrorCode::kInternal:
        break;
    }
    return error_response(500, "internal", failure.what());
  } catch (const std::exception& failure) {
    return error_response(500, "internal", failure.what());
  } catch (...) {
    return error_response(500, "internal", "unknown error");
  }
}

}  // namespace dlock::server
