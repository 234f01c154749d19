#pragma once

// The admin token of contract C5 (`admin.token`) as a principal of contract C6 (ADR-0016):
// a principal named `admin` with `admin:*`, so the revoke route is authorized like any other.

#include <string>
#include <string_view>

#include "auth/token_table.h"

namespace dlock::auth {

inline constexpr std::string_view kAdminPrincipalName = "admin";
// Shortest admin token accepted: 32 characters (a 32-hex-digit token carries 128 bits).
inline constexpr std::size_t kMinAdminTokenChars = 32;
// Fewest distinct characters: rejects "aaaa..." and "abab..." that pass the length check. A
// random 32-character hex token has about 14; fewer than 8 happens with probability < 1e-6.
inline constexpr std::size_t kMinAdminTokenDistinctChars = 8;

// Throws InvalidArgumentError (field "admin.token") when `token` is shorter than
// kMinAdminTokenChars, has fewer than kMinAdminTokenDistinctChars distinct characters, or
// holds a character outside printable ASCII / a space (it travels in an HTTP header). The
// message says what to do (`dlock token new`) and never contains the token.
void check_admin_token(std::string_view token);

// The principal `admin` (admin:*) authenticated by `token`; checks it first.
Principal admin_principal(std::string_view token);

// Reads the admin token from `path` (`--admin-token-file`): the first line, surrounding spaces
// and the line break dropped. Refuses (InvalidArgumentError, field "admin.token.file") a file
// that group or others may read or write (chmod 600, as ssh does for private keys), a file
// that cannot be read, and an empty one.
std::string read_admin_token_file(const std::string& path);

}  // namespace dlock::auth
