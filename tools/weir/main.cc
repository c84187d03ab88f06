// weir: the command-line tool. Subcommands are added by the add_*_command functions of
// commands.h.

#include "commands.h"
#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  CLI::App app{"weir: tools for the weir dataflow runtime"};
  app.require_subcommand(1);
  weir::tools::add_persist_command(app);
  weir::tools::add_ingest_command(app);
  weir::tools::add_subscribe_command(app);
  weir::tools::add_view_command(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
