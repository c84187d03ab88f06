// weir: the command-line tool. Subcommands are added by the add_*_command functions of
// commands.h.

#include "commands.h"
#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  CLI::App app{"weir: tools for the weir dataflow runtime"};
  app.require_subcommand(1);
  // Inherited by every subcommand added below: an option of a parent command is taken after a
  // subcommand too (`weir persist cat SHARD --persist DIR`), where people type it.
  app.fallthrough();
  weir::tools::add_persist_command(app);
  weir::tools::add_ingest_command(app);
  weir::tools::add_subscribe_command(app);
  weir::tools::add_view_command(app);
  weir::tools::add_top_command(app);
  weir::tools::add_completion_command(app);
  app.footer(
      "Example:\n"
      "  weir ingest --source loadgen:auction --persist DIR\n"
      "  weir persist ls --persist DIR\n"
      "Shell completion: source <(weir completion bash)");
  CLI11_PARSE(app, argc, argv);
  return 0;
}
