#include "cli/usage.h"

#include "cli/suggest.h"

namespace dlock::cli {
namespace {

// The deepest subcommand the parse selected ("dlock session": the session app).
const CLI::App* selected(const CLI::App& app) {
  const CLI::App* level = &app;
  while (!level->get_subcommands().empty()) level = level->get_subcommands().front();
  return level;
}

// "dlock session": the words that name `level` on the command line.
std::string command_path(const CLI::App* level) {
  std::string path = level->get_name();
  for (const CLI::App* parent = level->get_parent(); parent != nullptr;
       parent = parent->get_parent()) {
    path = parent->get_name() + " " + path;
  }
  return path;
}

std::vector<std::string> subcommand_names(const CLI::App* level) {
  std::vector<std::string> names;
  for (const CLI::App* sub : level->get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  return names;
}

// Every long flag `level` accepts: its own and, since they fall through, its parents'.
std::vector<std::string> flag_names(const CLI::App* level) {
  std::vector<std::string> names;
  for (const CLI::App* app = level; app != nullptr; app = app->get_parent()) {
    for (const CLI::Option* option : app->get_options()) {
      for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
    }
  }
  return names;
}

std::string unknown(const std::string& what, const std::string& word, const std::string& prefix,
                    const std::vector<std::string>& candidates) {
  std::string message = "unknown " + what + " '" + prefix + word + "'";
  if (const auto guess = nearest(word, candidates)) {
    message += "; did you mean '" + prefix + *guess + "'?";
  }
  return message;
}

}  // namespace

std::string GlobalFlagsFormatter::make_subcommands(const CLI::App* app,
                                                   CLI::AppFormatMode mode) const {
  std::string out = CLI::Formatter::make_subcommands(app, mode);
  const CLI::App* top = app->get_parent();
  if (top == nullptr) return out;
  while (top->get_parent() != nullptr) top = top->get_parent();
  std::vector<const CLI::Option*> globals;
  for (const CLI::Option* option : top->get_options()) {
    const std::vector<std::string>& names = option->get_lnames();
    if (names != std::vector<std::string>{"help"} && names != std::vector<std::string>{"version"}) {
      globals.push_back(option);
    }
  }
  return out + make_group("Global options (before or after the subcommand)", false, globals);
}

std::string usage_error(const CLI::App& app, const CLI::ParseError& error) {
  const CLI::App* level = selected(app);
  // Only when the parse stopped at words it did not know (not, e.g., flags that exclude each
  // other, where the words after `--` are left over too).
  const bool stopped = dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr ||
                       dynamic_cast<const CLI::RequiredError*>(&error) != nullptr;
  const std::vector<std::string> extras =
      stopped ? app.remaining(true) : std::vector<std::string>{};
  const std::vector<std::string> commands = subcommand_names(level);
  std::string message;
  // A word where a subcommand was due, or one more word than the subcommand takes.
  if (!extras.empty() && extras.front().rfind('-', 0) != 0 && !commands.empty() &&
      level->get_subcommands().empty()) {
    const std::string prefix = level->get_parent() == nullptr ? "" : level->get_name() + " ";
    message = unknown("command", extras.front(), prefix, commands);
  } else if (!extras.empty() && extras.front().rfind("--", 0) == 0 && extras.front() != "--") {
    const std::string flag = extras.front().substr(0, extras.front().find('='));
    std::vector<std::string> names = flag_names(level);
    for (std::string& name : names) name.erase(0, 2);
    message = unknown("flag", flag.substr(2), "--", names);
  } else {
    message = error.what();
    // CLI11 prefixes some messages with the app's name already.
    const std::string own = app.get_name() + ": ";
    if (message.rfind(own, 0) == 0) message.erase(0, own.size());
  }
  return "dlock: " + message + "\ndlock: see '" + command_path(level) + " --help'";
}

}  // namespace dlock::cli
