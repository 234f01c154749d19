#pragma once

// dlock's exit statuses (sysexits.h numbering, contract C3). `dlock run` otherwise exits with
// CMD's own status, 128 + signal number when CMD was killed by a signal.

namespace dlock::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;           // any other error (internal, session not found)
inline constexpr int kExitUsage = 64;            // EX_USAGE: bad flags or arguments
inline constexpr int kExitUnauthenticated = 67;  // EX_NOUSER: no or unknown bearer token (401)
inline constexpr int kExitUnavailable = 69;      // EX_UNAVAILABLE: server or backend unavailable
inline constexpr int kExitNotAcquired = 75;      // EX_TEMPFAIL: lock held after --wait
inline constexpr int kExitLockLost = 76;         // EX_PROTOCOL: lock lost (CMD was terminated)
inline constexpr int kExitPermission = 77;       // EX_NOPERM: token not allowed this (403)
inline constexpr int kExitTls = 78;              // EX_CONFIG: TLS handshake or certificate failed
inline constexpr int kExitThrottled = 79;       // dlock's own: 429 after retrying (limit, throttle)
inline constexpr int kExitCannotExecute = 126;  // CMD exists but could not be executed
inline constexpr int kExitCommandNotFound = 127;

}  // namespace dlock::cli
