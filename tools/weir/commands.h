// The subcommands of the `weir` tool. Each lives in its own file and registers itself on the
// CLI11 app; main.cc only calls these.
//
// A command reports failure by printing its error to stderr and throwing
// CLI::RuntimeError(exit_code), which main turns into the exit status. Its options' values are
// checked as they are parsed (checks.h), so that a mistyped one fails before any work; its help
// ends with an example (CLI11 footer()).

#pragma once

#include <CLI/CLI.hpp>

namespace weir::tools {

// `weir persist [--persist DIR | --blob URL --consensus URL] ls | describe SHARD | cat SHARD`.
void add_persist_command(CLI::App& app);

// `weir ingest --source loadgen:KIND --persist DIR [-w W] [--until OFFSET] ...`.
void add_ingest_command(CLI::App& app);

// `weir subscribe [--persist DIR | --blob URL --consensus URL] SHARD [--as-of T] ...`.
void add_subscribe_command(CLI::App& app);

// `weir view [--persist DIR | --blob URL --consensus URL] NAME [--until T] ...`.
void add_view_command(CLI::App& app);

// `weir replica --persist DIR`: follows the catalog and keeps its objects running.
void add_replica_command(CLI::App& app);

// `weir pubsub [--listen HOST:PORT]`: news of appends between processes.
void add_pubsub_command(CLI::App& app);

// `weir top --http ADDR`: a running `weir ingest --http ADDR`, in a terminal.
void add_top_command(CLI::App& app);

// `weir ctl [--persist DIR | --blob URL --consensus URL] create|drop|ls|status|history ...`: the
// catalog of what replicas run.
void add_ctl_command(CLI::App& app);

// The exit status of a parse error with CLI11's `code`: `weir ctl` exits 2 for a usage error, as
// for a change that does not validate (nothing committed); other commands keep CLI11's code.
int usage_exit_code(const CLI::App& app, int code);

// `weir completion bash`: a bash completion script generated from `app`'s commands and options.
// REQUIRES: called after every other command is added.
void add_completion_command(CLI::App& app);

}  // namespace weir::tools
