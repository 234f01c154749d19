#pragma once

// `dlock token new PRINCIPAL PERMISSIONS` (contract C6): a fresh bearer token and the tokens
// file line that grants it. Works offline; never talks to a server.

#include <iosfwd>
#include <string>

namespace dlock::cli {

// Prints the token (secret) and the line (not secret) to `out`, as text or one JSON document
// {"principal", "permissions", "token", "sha256", "tokens_file_line"}. Throws
// InvalidArgumentError for a bad principal name or PERMISSIONS (the same parser dlockd uses
// for the tokens file).
void print_new_token(const std::string& principal, const std::string& permissions, bool json,
                     std::ostream& out);

}  // namespace dlock::cli
