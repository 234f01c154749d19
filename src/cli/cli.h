#pragma once

// The dlock command-line tool. Kept out of main() so tests can drive it in-process.

#include <iosfwd>

namespace dlock::cli {

// Parses argv, runs the subcommand and returns the process exit status (exit_codes.h).
int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace dlock::cli
