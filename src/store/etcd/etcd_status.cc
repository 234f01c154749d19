#include "store/etcd/etcd_status.h"

#include <string>

#include "dlock/errors.h"

namespace dlock::store::etcd {
namespace {

bool contains(const grpc::Status& status, std::string_view text) {
  return status.error_message().find(text) != std::string::npos;
}

}  // namespace

void throw_for_status(const grpc::Status& status, std::string_view what, CallKind kind) {
  const std::string message = "etcd " + std::string(what) + ": " + status.error_message() +
                              " (grpc code " +
                              std::to_string(static_cast<int>(status.error_code())) + ")";
  if (contains(status, "no leader") || contains(status, "not leader") ||
      contains(status, "leader changed")) {
    throw NotLeaderError(message);
  }
  if (contains(status, "lease not found")) throw SessionNotFoundError(message);
  if (contains(status, "too many requests")) throw ContentionError(message);
  // etcd answers its own request context's end as code UNKNOWN with Go's text, e.g. a member
  // cut off from the majority while it waits for a read index or a proposal: as transient as
  // our own deadline, never an internal error.
  const bool context_ended =
      status.error_code() == grpc::StatusCode::UNKNOWN &&
      (contains(status, "context deadline exceeded") || contains(status, "context canceled"));
  switch (context_ended ? grpc::StatusCode::DEADLINE_EXCEEDED : status.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      // The request may have been applied after we stopped waiting for the answer.
      if (kind == CallKind::kWrite) throw UnknownOutcomeError(message);
      throw UnavailableError(message);
    case grpc::StatusCode::UNAVAILABLE:
      // etcd's own "request timed out" means the proposal was sent and may still commit.
      if (kind == CallKind::kWrite && contains(status, "timed out")) {
        throw UnknownOutcomeError(message);
      }
      throw UnavailableError(message);
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      throw UnavailableError(message);
    default:
      throw InternalError(message);
  }
}

}  // namespace dlock::store::etcd
