// `weir completion bash`: prints a bash completion script for the tool.
//
//   source <(weir completion bash)    # in ~/.bashrc
//
// The script is generated from the commands and options as CLI11 holds them when it runs, so it
// offers what the tool takes and nothing else: subcommands, each command's options with those of
// the commands it falls through to (main.cc), the names of a one_of check (checks.h) for its
// option or positional, and directories for an option of type DIR. Other values complete as file
// names (bash's default).

#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "checks.h"
#include "commands.h"

namespace weir::tools {
namespace {

// The script's functions; the generated _weir_command and _weir_choices come before them.
constexpr const char* kFunctions = R"(
_weir() {
  # Bash splits "loadgen:auction" at the colon ("loadgen" ":" "auction"): join it again.
  local cur words=() cword=0 k
  for ((k = 0; k < ${#COMP_WORDS[@]}; k++)); do
    if ((k > 1)) && [[ ${COMP_WORDS[k]} == : || ${COMP_WORDS[k - 1]} == : ]]; then
      words[-1]+=${COMP_WORDS[k]}
    else
      words+=("${COMP_WORDS[k]}")
    fi
    ((k == COMP_CWORD)) && cword=$((${#words[@]} - 1))
  done
  cur=${words[cword]}
  local path="" value_of="" word i
  _weir_command ""
  # The subcommands typed so far make the path; an option that takes a value takes the next word.
  for ((i = 1; i < cword; i++)); do
    word=${words[i]}
    if [[ -n $value_of ]]; then
      value_of=""
    elif [[ $word == -* ]]; then
      [[ $word != *=* && " $_weir_valued " == *" $word "* ]] && value_of=$word
    elif [[ " $_weir_subcommands " == *" $word "* ]]; then
      path=${path:+$path }$word
      _weir_command "$path"
    fi
  done
  COMPREPLY=()
  if [[ -n $value_of ]]; then
    if [[ " $_weir_dirs " == *" $value_of "* ]]; then
      COMPREPLY=($(compgen -d -- "$cur"))
    else
      _weir_choices "$path" "$value_of"
      [[ -n $_weir_words ]] && COMPREPLY=($(compgen -W "$_weir_words" -- "$cur"))
    fi
  elif [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$_weir_options" -- "$cur"))
  else
    _weir_choices "$path" ""
    COMPREPLY=($(compgen -W "$_weir_subcommands $_weir_words" -- "$cur"))
  fi
  # What bash replaces is only the text after the last colon.
  if [[ $cur == *:* && $COMP_WORDBREAKS == *:* ]]; then
    local colon_word=${cur%"${cur##*:}"}
    for ((k = 0; k < ${#COMPREPLY[@]}; k++)); do
      COMPREPLY[k]=${COMPREPLY[k]#"$colon_word"}
    done
  fi
  return 0
}

complete -o default -F _weir weir
)";

// The words of a one_of check in a type name ("TEXT:{a,b}"); none without one.
std::vector<std::string> choices(const CLI::Option& option) {
  const std::string type = option.get_type_name();
  const size_t open = type.find(":{");
  const size_t close = type.find('}', open);
  if (open == std::string::npos || close == std::string::npos) return {};
  return absl::StrSplit(type.substr(open + 2, close - open - 2), ',', absl::SkipEmpty());
}

// Single-quoted for bash.
std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<const CLI::App*> subcommands_of(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* sub) { return !sub->get_name().empty(); });
}

struct Script {
  std::string commands;  // The cases of _weir_command.
  std::string choices;   // The cases of _weir_choices.
};

void describe(const CLI::App& app, const std::string& path, Script& script) {
  std::vector<std::string> subcommands, options, valued, dirs;
  for (const CLI::App* sub : subcommands_of(app)) {
    subcommands.push_back(sub->get_name());
    for (const std::string& alias : sub->get_aliases()) subcommands.push_back(alias);
  }
  // The command's own options, then those of each command it falls through to.
  std::set<std::string> seen;
  for (const CLI::App* owner = &app; owner != nullptr;
       owner = owner->get_fallthrough() ? owner->get_parent() : nullptr) {
    for (const CLI::Option* option : owner->get_options()) {
      const std::vector<std::string> words = choices(*option);
      if (!option->nonpositional()) {
        if (owner == &app && !words.empty()) {
          absl::StrAppend(&script.choices, "    ", shell_quoted(path + "|"),
                          ") _weir_words=", shell_quoted(absl::StrJoin(words, " ")), ";;\n");
        }
        continue;
      }
      std::vector<std::string> names;
      for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
      for (const std::string& name : option->get_snames()) names.push_back("-" + name);
      for (const std::string& name : names) {
        if (!seen.insert(name).second) continue;
        options.push_back(name);
        if (option->get_expected_max() == 0) continue;  // A flag.
        valued.push_back(name);
        if (option->get_type_name().rfind("DIR", 0) == 0) dirs.push_back(name);
        if (!words.empty()) {
          absl::StrAppend(&script.choices, "    ", shell_quoted(absl::StrCat(path, "|", name)),
                          ") _weir_words=", shell_quoted(absl::StrJoin(words, " ")), ";;\n");
        }
      }
    }
  }
  absl::StrAppend(&script.commands, "    ", shell_quoted(path),
                  ")\n      _weir_subcommands=", shell_quoted(absl::StrJoin(subcommands, " ")),
                  "\n      _weir_options=", shell_quoted(absl::StrJoin(options, " ")),
                  "\n      _weir_valued=", shell_quoted(absl::StrJoin(valued, " ")),
                  "\n      _weir_dirs=", shell_quoted(absl::StrJoin(dirs, " ")), "\n      ;;\n");
  for (const CLI::App* sub : subcommands_of(app)) {
    describe(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), script);
  }
}

std::string bash_script(const CLI::App& root) {
  Script script;
  describe(root, "", script);
  return absl::StrCat(
      "# bash completion for weir, generated by `weir completion bash` from the tool's own\n"
      "# commands and options. Enable it with\n"
      "#   source <(weir completion bash)\n"
      "# in ~/.bashrc, or save it as ~/.local/share/bash-completion/completions/weir.\n\n"
      "# Sets what the command with subcommand path $1 takes.\n"
      "_weir_command() {\n"
      "  case \"$1\" in\n",
      script.commands,
      "    *) _weir_subcommands='' _weir_options='' _weir_valued='' _weir_dirs='' ;;\n"
      "  esac\n"
      "}\n\n"
      "# Sets _weir_words to the values option $2 of command $1 takes (\"\": its positional).\n"
      "_weir_choices() {\n"
      "  case \"$1|$2\" in\n",
      script.choices,
      "    *) _weir_words='' ;;\n"
      "  esac\n"
      "}\n",
      kFunctions);
}

}  // namespace

void add_completion_command(CLI::App& app) {
  auto shell = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("completion", "Print a shell completion script");
  cmd->add_option("SHELL", *shell, "The shell: bash")->required()->check(one_of({"bash"}));
  cmd->footer(
      "Example:\n"
      "  weir completion bash > ~/.local/share/bash-completion/completions/weir\n"
      "  source <(weir completion bash)    # or this, in ~/.bashrc");
  // The whole tree is there once the command line is parsed.
  const CLI::App* root = &app;
  // `shell` is captured so that the option's target lives as long as the app.
  cmd->final_callback([root, shell] { std::cout << bash_script(*root); });
}

}  // namespace weir::tools
