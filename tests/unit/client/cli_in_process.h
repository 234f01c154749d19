#pragma once

// Runs the dlock CLI in process (run_cli), exactly as main() would, and returns what it printed.

#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"

namespace dlock::client::testing {

struct CliResult {
  int status;
  std::string out;
  std::string err;
};

inline CliResult dlock(std::vector<std::string> args) {
  args.insert(args.begin(), "dlock");
  std::vector<const char*> argv;
  for (const auto& arg : args) argv.push_back(arg.c_str());
  std::ostringstream out, err;
  const int status = cli::run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  return {status, out.str(), err.str()};
}

}  // namespace dlock::client::testing
