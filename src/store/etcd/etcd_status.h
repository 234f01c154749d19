#pragma once

// gRPC failures turned into dlock errors (ADR-0003), in exactly one place. Its own header so the
// client (etcd_client.h) and its keep-alive stream (etcd_keep_alive.h) both use it without
// including each other.

#include <grpcpp/grpcpp.h>

#include <string_view>

namespace dlock::store::etcd {

// Whether a call may have changed etcd: decides between UnavailableError and
// UnknownOutcomeError when the answer is lost.
enum class CallKind { kRead, kWrite };

// Throws the dlock error for a failed gRPC status: no leader / leader changed -> NotLeaderError;
// a lost answer to a write -> UnknownOutcomeError; unreachable, timed out -> UnavailableError;
// a missing lease -> SessionNotFoundError; "too many requests" -> ContentionError; etcd's own
// context ending (code UNKNOWN, "context deadline exceeded" / "context canceled") as a timeout;
// anything else -> InternalError. Never returns.
[[noreturn]] void throw_for_status(const grpc::Status& status, std::string_view what,
                                   CallKind kind);

}  // namespace dlock::store::etcd
