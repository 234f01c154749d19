#pragma once

// The project-wide error style (ADR-0003): exceptions derived from dlock::Error, thrown at
// the backend boundary and mapped to HTTP in exactly one place (src/server/error_mapping.cc).
//
// Decisions are values, not errors: "the key is held by someone else" is an empty
// std::optional from LockStore::try_grant. An error means the store could not decide.

#include <stdexcept>
#include <string>
#include <utility>

namespace dlock {

enum class ErrorCode {
  kInvalidArgument,    // the caller's input is wrong; retrying the same call cannot help
  kSessionNotFound,    // the session does not exist or has expired
  kLockLost,           // the named grant is no longer the current grant of the key
  kContention,         // a retryable conflict inside the backend (serialization, deadlock)
  kUnavailable,        // the backend could not answer (down, unreachable, timed out)
  kNotLeader,          // the backend has no leader right now; a kind of unavailable
  kUnknownOutcome,     // the request may or may not have been applied (connection lost)
  kResourceExhausted,  // a server limit (waiters, sessions) is reached; retry later
  kInternal,           // a bug or an impossible backend answer
  kUnauthenticated,    // no credential, or one the server does not know (C6: 401)
  kPermissionDenied,   // a known credential without the right on this namespace (C6: 403)
  kConflict,  // the request disagrees with the name's live state (a semaphore's limit): 409
};

// The one name of each code: the error code on the wire (C3; a transient code is shown as
// "unavailable", src/server/error_mapping.cc), the `code` label of the metrics and logs (C4).
const char* to_string(ErrorCode code) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }
  // Whether repeating the same call later may succeed.
  bool retryable() const noexcept {
    return code_ == ErrorCode::kContention || code_ == ErrorCode::kUnavailable ||
           code_ == ErrorCode::kNotLeader || code_ == ErrorCode::kUnknownOutcome ||
           code_ == ErrorCode::kResourceExhausted;
  }

 private:
  ErrorCode code_;
};

class InvalidArgumentError : public Error {
 public:
  InvalidArgumentError(std::string field, const std::string& message)
      : Error(ErrorCode::kInvalidArgument, message), field_(std::move(field)) {}
  // The name of the offending input, e.g. "ttl_ms".
  const std::string& field() const noexcept { return field_; }

 private:
  std::string field_;
};

class SessionNotFoundError : public Error {
 public:
  explicit SessionNotFoundError(const std::string& message)
      : Error(ErrorCode::kSessionNotFound, message) {}
};

class LockLostError : public Error {
 public:
  explicit LockLostError(const std::string& message) : Error(ErrorCode::kLockLost, message) {}
};

class ContentionError : public Error {
 public:
  explicit ContentionError(const std::string& message) : Error(ErrorCode::kContention, message) {}
};

// The backend cannot answer. Never to be reported as "held".
class UnavailableError : public Error {
 public:
  explicit UnavailableError(const std::string& message) : Error(ErrorCode::kUnavailable, message) {}

 protected:
  UnavailableError(ErrorCode code, const std::string& message) : Error(code, message) {}
};

class NotLeaderError : public UnavailableError {
 public:
  explicit NotLeaderError(const std::string& message)
      : UnavailableError(ErrorCode::kNotLeader, message) {}
};

// The connection was lost after the request was sent: it may have been applied. For acquire
// this is safe to retry (a re-entrant acquire mints a fresh, greater token).
class UnknownOutcomeError : public UnavailableError {
 public:
  explicit UnknownOutcomeError(const std::string& message)
      : UnavailableError(ErrorCode::kUnknownOutcome, message) {}
};

class ResourceExhaustedError : public Error {
 public:
  explicit ResourceExhaustedError(const std::string& message)
      : Error(ErrorCode::kResourceExhausted, message) {}
};

// The server does not know the caller: no bearer token, a malformed one or an unknown one
// (contract C6, 401 `unauthenticated`). Retrying with the same credential cannot help.
class UnauthenticatedError : public Error {
 public:
  explicit UnauthenticatedError(const std::string& message)
      : Error(ErrorCode::kUnauthenticated, message) {}
};

// The caller is known but not allowed this call on this namespace (contract C6, 403
// `permission_denied`). Retrying with the same credential cannot help.
class PermissionDeniedError : public Error {
 public:
  explicit PermissionDeniedError(const std::string& message)
      : Error(ErrorCode::kPermissionDenied, message) {}
};

// The request contradicts what the name's live holders agreed on (a semaphore acquire whose
// `limit` differs from the live holders' limit, ADR-0020): 409 `conflict`, naming the field.
// Retrying the same call cannot help while those holders live.
class ConflictError : public Error {
 public:
  ConflictError(std::string field, const std::string& message)
      : Error(ErrorCode::kConflict, message), field_(std::move(field)) {}
  const std::string& field() const noexcept { return field_; }

 private:
  std::string field_;
};

class InternalError : public Error {
 public:
  explicit InternalError(const std::string& message) : Error(ErrorCode::kInternal, message) {}
};

}  // namespace dlock
