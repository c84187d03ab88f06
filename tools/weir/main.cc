// weir: the command-line tool. Subcommands are added by the add_*_command functions of
// commands.h.

#include <iostream>
#include <optional>
#include <string>

#include "commands.h"
#include <CLI/CLI.hpp>

#include "weir/observe/log.h"

int main(int argc, char** argv) {
  CLI::App app{"weir: tools for the weir dataflow runtime"};
  app.require_subcommand(1);
  // Inherited by every subcommand added below: an option of a parent command is taken after a
  // subcommand too (`weir persist cat SHARD --persist DIR`), where people type it.
  app.fallthrough();
  // Logs (weir/observe/log.h): --log-level, else WEIR_LOG_LEVEL, else info. A bad
  // WEIR_LOG_LEVEL is an error before any work, like a bad flag.
  if (absl::Status s = weir::observe::init_logging(std::nullopt); !s.ok()) {
    std::cerr << "weir: " << s.message() << "\n";
    return 1;
  }
  app.add_option_function<std::string>(
         "--log-level",
         [](const std::string& level) {
           if (absl::Status s = weir::observe::init_logging(level); !s.ok()) {
             throw CLI::ValidationError(std::string(s.message()));
           }
         },
         "log lines at this level and above: trace, debug, info, warn, error or off (default: "
         "WEIR_LOG_LEVEL, else info)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "warning", "error", "off"}));
  weir::tools::add_persist_command(app);
  weir::tools::add_ingest_command(app);
  weir::tools::add_subscribe_command(app);
  weir::tools::add_view_command(app);
  weir::tools::add_replica_command(app);
  weir::tools::add_pubsub_command(app);
  weir::tools::add_top_command(app);
  weir::tools::add_ctl_command(app);
  weir::tools::add_completion_command(app);
  app.footer(
      "Example:\n"
      "  weir ingest --source loadgen:auction --persist DIR\n"
      "  weir persist ls --persist DIR\n"
      "Shell completion: source <(weir completion bash)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return weir::tools::usage_exit_code(app, app.exit(e));
  }
  return 0;
}
