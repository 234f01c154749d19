// Fuzz target (e): the client's reading of server answers (src/client/json_codec.h,
// src/client/error_mapping.h). The first byte picks the decoder and the HTTP status, the rest is
// the body. A body of the wrong shape must end as a dlock::Error (InternalError for a broken
// contract, the mapped error for an error body), never as a crash or another exception.

#include <boost/json/array.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "client/error_mapping.h"
#include "client/json_codec.h"
#include "dlock/errors.h"

namespace {

using namespace dlock::client::detail;

constexpr int kStatuses[] = {200, 201, 204, 400, 401, 403, 404, 405, 409, 413, 429, 500, 502, 503};

void decode(unsigned selector, std::string_view body) {
  switch (selector % 6) {
    case 0:
      (void)decode_session(parse_object(body, "open session"));
      break;
    case 1:
      (void)decode_lock_info(parse_object(body, "get"));
      break;
    case 2: {  // as ClientCore::list_page reads it
      const auto object = parse_object(body, "list");
      (void)string_member(object, "next", /*required=*/false);
      if (const auto* delays = object.if_contains("delays"); delays && delays->is_array()) {
        for (const auto& delay : delays->get_array()) {
          if (!delay.is_object()) continue;
          (void)string_member(delay.get_object(), "key", /*required=*/false);
          (void)time_member(delay.get_object(), "delayed_until");
        }
      }
      const auto* locks = object.if_contains("locks");
      if (locks == nullptr || !locks->is_array()) return;
      for (const auto& entry : locks->get_array()) {
        if (entry.is_object()) (void)decode_lock_info(entry.get_object());
      }
      break;
    }
    case 3:
      (void)decode_outcome(parse_object(body, "revoke"));
      break;
    case 4: {  // as ClientCore::acquire/extend read a grant
      const auto object = parse_object(body, "acquire");
      (void)uint_member(object, "fencing_token");
      (void)millis_member(object, "ttl_ms");
      (void)time_member(object, "expires_at");
      break;
    }
    default: {
      // A timestamp alone: what parses must format and parse back to the same instant.
      const auto time = parse_rfc3339(body);
      const auto again = parse_rfc3339(format_rfc3339(time));
      if (std::chrono::floor<std::chrono::milliseconds>(time) != again) __builtin_trap();
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const unsigned selector = data[0];
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    decode(selector, body);
  } catch (const dlock::Error&) {
  }
  HttpResponse response;
  response.status = kStatuses[(selector / 6) % std::size(kStatuses)];
  response.body = body;
  const ApiError error = parse_api_error(response);
  try {
    throw_api_error(error, "fuzz");
  } catch (const dlock::Error&) {
  }
  return 0;
}
