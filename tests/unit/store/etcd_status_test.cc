// gRPC failures turned into dlock errors (store/etcd/etcd_status.h): a transient failure is never
// an internal error, and a lost answer to a write is an unknown outcome, never "unavailable".

#include "store/etcd/etcd_status.h"

#include <gtest/gtest.h>

#include "dlock/errors.h"

namespace dlock::store::etcd {
namespace {

using grpc::Status;
using grpc::StatusCode;

template <typename Error>
bool throws(const Status& status, CallKind kind) {
  try {
    throw_for_status(status, "call", kind);
  } catch (const Error&) {
    return true;
  } catch (...) {
    return false;
  }
}

TEST(EtcdStatus, OurDeadlineIsUnknownForAWriteAndUnavailableForARead) {
  const Status deadline(StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded");
  EXPECT_TRUE(throws<UnknownOutcomeError>(deadline, CallKind::kWrite));
  EXPECT_TRUE(throws<UnavailableError>(deadline, CallKind::kRead));
}

// A member cut off from the majority ends the request's context itself and answers code UNKNOWN
// with Go's text: transient, as our own deadline is.
TEST(EtcdStatus, EtcdsOwnContextEndingIsATimeoutNotAnInternalError) {
  for (const char* text : {"context deadline exceeded", "context canceled"}) {
    const Status ended(StatusCode::UNKNOWN, text);
    EXPECT_TRUE(throws<UnknownOutcomeError>(ended, CallKind::kWrite)) << text;
    EXPECT_TRUE(throws<UnavailableError>(ended, CallKind::kRead)) << text;
  }
  // Any other UNKNOWN stays an internal error: nothing says it was transient.
  EXPECT_TRUE(
      throws<InternalError>(Status(StatusCode::UNKNOWN, "something else"), CallKind::kRead));
}

TEST(EtcdStatus, LeadershipLeasesAndOverloadKeepTheirErrors) {
  EXPECT_TRUE(throws<NotLeaderError>(Status(StatusCode::UNAVAILABLE, "etcdserver: no leader"),
                                     CallKind::kWrite));
  EXPECT_TRUE(throws<SessionNotFoundError>(
      Status(StatusCode::NOT_FOUND, "etcdserver: requested lease not found"), CallKind::kWrite));
  EXPECT_TRUE(throws<UnknownOutcomeError>(
      Status(StatusCode::UNAVAILABLE, "etcdserver: request timed out"), CallKind::kWrite));
  EXPECT_TRUE(throws<UnavailableError>(Status(StatusCode::UNAVAILABLE, "connection refused"),
                                       CallKind::kWrite));
}

}  // namespace
}  // namespace dlock::store::etcd
