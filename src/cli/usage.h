#pragma once

// How dlock talks about its command line: usage errors with the `dlock:` prefix and a
// suggestion for a mistyped subcommand or flag, and subcommand help that also lists the global
// flags (which may come before or after the subcommand).

#include <CLI/CLI.hpp>
#include <string>

namespace dlock::cli {

// Help for a subcommand ends its option list with the top-level app's flags, under "Global
// options"; the top-level help is CLI11's.
class GlobalFlagsFormatter : public CLI::Formatter {
 public:
  std::string make_subcommands(const CLI::App* app, CLI::AppFormatMode mode) const override;
};

// The message for a failed parse of `app`'s command line, one or two lines, each starting with
// "dlock: " (no trailing newline on the last): an unknown subcommand or flag named with the
// nearest known one ("dlock: unknown command 'lst'; did you mean 'list'?"), else CLI11's
// message; then where to find help.
std::string usage_error(const CLI::App& app, const CLI::ParseError& error);

}  // namespace dlock::cli
