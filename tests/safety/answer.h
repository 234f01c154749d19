#pragma once

// What the safety checker takes from a dlockd answer, recorded the same way by every scenario:
// the granted token and the deadline the holder was told (its send time plus the answered
// ttl_ms; invariant I5). One place, so no scenario records grants without their promise.

#include <cstdint>

#include "safety/history.h"
#include "support/dlockd_process.h"

namespace dlock::safety {

inline void note_answer(Operation& op, const testing::HttpResult& result) {
  if (op.outcome != Outcome::kOk || !result.json.is_object()) return;
  const auto& body = result.json.as_object();
  if (body.contains("fencing_token")) {
    op.token = body.at("fencing_token").to_number<std::uint64_t>();
  }
  if (body.contains("ttl_ms")) {
    op.promised_until_ns = op.start_ns + body.at("ttl_ms").to_number<std::int64_t>() * 1000000;
  }
}

}  // namespace dlock::safety
