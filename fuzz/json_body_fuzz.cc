// Fuzz target (b): the JSON body reader of the API handlers (src/server/json_util.h) and the
// checks of the fields read from it (src/server/input_checks.h: lease, mode, limit, an election's
// value, a session's lock-delay). Any body is read, or rejected with InvalidArgumentError (a 400
// naming the field); nothing else escapes.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "dlock/errors.h"
#include "dlock/lock_store.h"
#include "server/input_checks.h"
#include "server/json_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  try {
    // The widest field set a handler allows (extend's plus acquire's wait_ms, lease and mode,
    // a semaphore's limit, a campaign's value, and open's owner and lock_delay_ms).
    const dlock::server::BodyReader reader(
        body, {"session_id", "fencing_token", "ttl_ms", "wait_ms", "ns", "owner", "lease", "mode",
               "limit", "value", "lock_delay_ms"});
    try {
      (void)dlock::server::checked_lock_delay(reader.integer("lock_delay_ms"), dlock::TtlLimits{});
    } catch (const dlock::InvalidArgumentError&) {
    }
    try {
      (void)dlock::server::checked_leader_value(reader.string("value"));
    } catch (const dlock::InvalidArgumentError&) {
    }
    try {
      (void)dlock::server::checked_lock_mode(reader.string("mode"));
    } catch (const dlock::InvalidArgumentError&) {
    }
    try {
      (void)dlock::server::checked_permits(reader.integer("limit"));
    } catch (const dlock::InvalidArgumentError&) {
    }
    try {
      (void)dlock::server::checked_lease(reader.string("lease"), reader.integer("ttl_ms"),
                                         std::chrono::seconds(30), dlock::TtlLimits{});
    } catch (const dlock::InvalidArgumentError&) {
    }
    for (const auto* field : {"session_id", "ns", "owner"}) {
      try {
        (void)reader.string(field);
      } catch (const dlock::InvalidArgumentError&) {
      }
    }
    for (const auto* field : {"ttl_ms", "wait_ms"}) {
      try {
        (void)reader.integer(field);
      } catch (const dlock::InvalidArgumentError&) {
      }
    }
    try {
      (void)reader.unsigned_integer("fencing_token");
    } catch (const dlock::InvalidArgumentError&) {
    }
  } catch (const dlock::InvalidArgumentError&) {
  }
  return 0;
}
