#include "cli/completion.h"

#include <sstream>

#include "dlock/errors.h"

namespace dlock::cli {
namespace {

std::vector<const CLI::App*> subcommands_of(const CLI::App* app) {
  return app->get_subcommands([](const CLI::App*) { return true; });
}

// The long flags of `app` (not --help), each with whether it takes a value.
std::vector<std::pair<std::string, bool>> flags_of(const CLI::App* app) {
  std::vector<std::pair<std::string, bool>> flags;
  for (const CLI::Option* option : app->get_options()) {
    for (const std::string& name : option->get_lnames()) {
      if (name == "help") continue;
      flags.emplace_back("--" + name, option->get_items_expected_max() > 0);
    }
  }
  return flags;
}

std::string words(const std::vector<std::pair<std::string, bool>>& flags) {
  std::string out;
  for (const auto& [flag, value] : flags) out += (out.empty() ? "" : " ") + flag;
  return out;
}

std::string names(const std::vector<const CLI::App*>& apps) {
  std::string out;
  for (const CLI::App* app : apps) out += (out.empty() ? "" : " ") + app->get_name();
  return out;
}

// The first line of a subcommand's description, for fish.
std::string summary(const CLI::App* app) {
  const std::string description = app->get_description();
  return description.substr(0, description.find('\n'));
}

std::string fish_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

std::string bash(const CLI::App& app) {
  std::ostringstream out;
  std::string valued;  // every flag that takes a value, anywhere
  const auto note_valued = [&valued](const std::vector<std::pair<std::string, bool>>& flags) {
    for (const auto& [flag, value] : flags) {
      if (value && (" " + valued + " ").find(" " + flag + " ") == std::string::npos) {
        valued += (valued.empty() ? "" : " ") + flag;
      }
    }
  };
  const auto globals = flags_of(&app);
  note_valued(globals);
  out << "# dlock completion for bash: source <(dlock completion bash), or save it as\n"
         "# /etc/bash_completion.d/dlock. Made from dlock's own command line.\n"
         "_dlock() {\n"
         "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"\" cmd=\"\" sub=\"\" i word\n"
         "  (( COMP_CWORD > 0 )) && prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
         "  local globals=\""
      << words(globals) << "\"\n";
  std::ostringstream cases, nested;
  for (const CLI::App* sub : subcommands_of(&app)) {
    const auto flags = flags_of(sub);
    note_valued(flags);
    cases << "    " << sub->get_name() << ") flags=\"" << words(flags);
    std::string inner_flags;
    for (const CLI::App* inner : subcommands_of(sub)) {
      const auto more = flags_of(inner);
      note_valued(more);
      inner_flags += (inner_flags.empty() ? "" : " ") + words(more);
    }
    cases << (inner_flags.empty() ? "" : " " + inner_flags) << "\" ;;\n";
    if (!subcommands_of(sub).empty()) {
      nested << "    " << sub->get_name() << ") [[ -z $sub ]] && choices=\""
             << names(subcommands_of(sub)) << "\" ;;\n";
    }
  }
  out << "  local valued=\" " << valued
      << " \"\n"
         "  for (( i = 1; i < COMP_CWORD; i++ )); do\n"
         "    word=\"${COMP_WORDS[i]}\"\n"
         "    if [[ $word == -- ]]; then\n"
         "      # CMD of run and elect: a command, then its arguments.\n"
         "      if (( i == COMP_CWORD - 1 )); then COMPREPLY=( $(compgen -c -- \"$cur\" | sort -u) "
         "); "
         "else COMPREPLY=( $(compgen -f -- \"$cur\") ); fi\n"
         "      return\n"
         "    fi\n"
         "    if [[ $word == --*=* ]]; then continue; fi\n"
         "    if [[ $word == -* ]]; then\n"
         "      [[ $valued == *\" $word \"* ]] && (( i++ ))\n"
         "      continue\n"
         "    fi\n"
         "    if [[ -z $cmd ]]; then cmd=$word; elif [[ -z $sub ]]; then sub=$word; fi\n"
         "  done\n"
         "  if [[ $prev == -* && $valued == *\" $prev \"* ]]; then\n"
         "    case $prev in\n"
         "      *file|--cacert|--cert|--key|--config) COMPREPLY=( $(compgen -f -- \"$cur\") ) ;;\n"
         "      *) COMPREPLY=() ;;\n"
         "    esac\n"
         "    return\n"
         "  fi\n"
         "  local flags=\"\" choices=\"\"\n"
         "  case $cmd in\n"
      << cases.str()
      << "  esac\n"
         "  if [[ $cur == -* ]]; then\n"
         "    COMPREPLY=( $(compgen -W \"$flags $globals\" -- \"$cur\") )\n"
         "    return\n"
         "  fi\n"
         "  if [[ -z $cmd ]]; then\n"
         "    choices=\""
      << names(subcommands_of(&app))
      << "\"\n"
         "  else\n"
         "    case $cmd in\n"
      << nested.str()
      << "    completion) [[ -z $sub ]] && choices=\"bash zsh fish\" ;;\n"
         "    esac\n"
         "  fi\n"
         "  COMPREPLY=( $(compgen -W \"$choices\" -- \"$cur\") )\n"
         "}\n"
         "complete -F _dlock dlock\n";
  return out.str();
}

std::string fish(const CLI::App& app) {
  std::ostringstream out;
  out << "# dlock completion for fish: dlock completion fish > "
         "~/.config/fish/completions/dlock.fish\n"
         "complete -c dlock -f\n";
  const auto top = subcommands_of(&app);
  const std::string all = names(top);
  for (const auto& [flag, value] : flags_of(&app)) {
    out << "complete -c dlock -l " << flag.substr(2) << (value ? " -r" : "") << '\n';
  }
  for (const CLI::App* sub : top) {
    out << "complete -c dlock -n " << fish_quoted("not __fish_seen_subcommand_from " + all)
        << " -a " << sub->get_name() << " -d " << fish_quoted(summary(sub)) << '\n';
    const std::string seen = "__fish_seen_subcommand_from " + sub->get_name();
    for (const auto& [flag, value] : flags_of(sub)) {
      out << "complete -c dlock -n " << fish_quoted(seen) << " -l " << flag.substr(2)
          << (value ? " -r" : "") << '\n';
    }
    const auto inner = subcommands_of(sub);
    for (const CLI::App* nested : inner) {
      out << "complete -c dlock -n "
          << fish_quoted(seen + "; and not __fish_seen_subcommand_from " + names(inner)) << " -a "
          << nested->get_name() << " -d " << fish_quoted(summary(nested)) << '\n';
      for (const auto& [flag, value] : flags_of(nested)) {
        out << "complete -c dlock -n "
            << fish_quoted(seen + "; and __fish_seen_subcommand_from " + nested->get_name())
            << " -l " << flag.substr(2) << (value ? " -r" : "") << '\n';
      }
    }
  }
  out << "complete -c dlock -n " << fish_quoted("__fish_seen_subcommand_from completion")
      << " -a 'bash zsh fish'\n";
  return out.str();
}

}  // namespace

std::string completion_script(const CLI::App& app, const std::string& shell) {
  if (shell == "bash") return bash(app);
  if (shell == "zsh") {
    return "#compdef dlock\n# dlock completion for zsh: source <(dlock completion zsh), after "
           "compinit.\nautoload -U +X bashcompinit && bashcompinit\n" +
           bash(app);
  }
  if (shell == "fish") return fish(app);
  throw InvalidArgumentError("SHELL",
                             "completion: unknown shell '" + shell + "' (bash, zsh or fish)");
}

}  // namespace dlock::cli
