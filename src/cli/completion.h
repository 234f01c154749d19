#pragma once

// `dlock completion bash|zsh|fish`: a completion script made from the command line's own
// definition (subcommands, their flags and the global flags), so it never lags behind it.

#include <CLI/CLI.hpp>
#include <string>

namespace dlock::cli {

// The script for `shell` ("bash", "zsh" or "fish"). bash: defines _dlock and registers it
// (`source <(dlock completion bash)`); zsh: the bash one through bashcompinit; fish: `complete`
// lines. Throws InvalidArgumentError for another shell.
std::string completion_script(const CLI::App& app, const std::string& shell);

}  // namespace dlock::cli
