// `weir view`: maintained views over the auction load generator's shards, exactly once.
//
//   weir view --persist DIR bids-per-auction|max-bid [--output SHARD] [-w W] [--until T]
//
// The flags, the signals (the first SIGINT or SIGTERM stops the run cleanly) and the errors; the
// view itself is weir::ingest::run_view (weir/ingest/view.h): what each view computes, how a run
// resumes from its output's upper, how the inputs' holds keep what a restart needs, and how a
// later run fences an earlier one out (which then exits 1 with the error naming it).

#include <atomic>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "checks.h"
#include "commands.h"
#include "shard_text.h"
#include "stop_signals.h"

#include "weir/ingest/view.h"

namespace weir::tools {
namespace {

struct ViewFlags {
  StoreFlags store;
  std::string name;
  std::string output;
  std::optional<uint64_t> until;
  size_t workers = 1;
};

[[noreturn]] void fail(const absl::Status& status) {
  std::cerr << "weir view: " << status << "\n";
  throw CLI::RuntimeError(1);
}

void run_view(const ViewFlags& flags) {
  ingest::ViewOptions options;
  options.view = flags.name;
  options.output = flags.output;
  options.until = flags.until;
  options.workers = flags.workers;
  options.persist.relay = relay_for(flags.store.pubsub);
  absl::StatusOr<persist::PersistLocation> location = store_location(flags.store);
  if (!location.ok()) fail(location.status());
  options.location = *std::move(location);
  options.stop = std::make_shared<std::atomic<bool>>(false);
  options.log_event = [](ingest::LogSeverity, const std::string& line) {
    std::cerr << "weir view: " << line << "\n";
  };
  const StopOnSignals signals(options.stop);
  if (absl::Status status = ingest::run_view(options); !status.ok()) fail(status);
}

}  // namespace

void add_view_command(CLI::App& app) {
  auto flags = std::make_shared<ViewFlags>();
  CLI::App* cmd = app.add_subcommand(
      "view",
      "Maintain a view of the auction shards in a shard of its own, exactly once: "
      "bids-per-auction (AUCTION,BIDS) or max-bid (AUCTION,AMOUNT,BID,BUYER,REGION)");
  add_store_flags(*cmd, flags->store);
  add_pubsub_flag(*cmd, flags->store.pubsub);
  cmd->add_option("NAME", flags->name, "bids-per-auction or max-bid")
      ->required()
      ->check(one_of({"bids-per-auction", "max-bid"}));
  cmd->add_option("--output", flags->output, "Output shard (default: view.NAME)")
      ->check(non_empty())
      ->check(CLI::Validator(
          [](std::string& output) -> std::string {
            return output.rfind("auction.", 0) == 0
                       ? "\"" + output +
                             "\" is the load generator's (auction.*), whose shards the view reads"
                       : "";
          },
          ""));
  cmd->add_option("--until", flags->until,
                  "End once the output is complete before this time (default: follow forever)")
      ->check(unsigned_in());
  cmd->add_option("-w,--workers", flags->workers, "Worker threads")->check(worker_count());
  cmd->footer(
      "Examples:\n"
      "  weir view --persist DIR max-bid\n"
      "  weir view --persist DIR bids-per-auction --output view.bids --until 1000");
  cmd->final_callback([flags] { run_view(*flags); });
}

}  // namespace weir::tools
