// `weir subscribe`: prints a shard's contents at a time, then every change as it becomes final.
//
//   weir subscribe --persist DIR SHARD [--as-of T] [--no-snapshot] [--progress] [--until T]
//                  [--reader-lease SECONDS]
//
// Lines: TIME<tab>DIFF<tab>COLUMNS... (typed rows as COPY prints them, other data escaped), each
// time's changes consolidated and sorted, times in order, flushed as each time completes. With
// --progress, TIME<tab>progress whenever the shard's upper moves: every change before TIME has
// been printed. The read goes through persist_source (weir/sources/persist_source.h) and holds the
// shard's since at what it has printed; SIGINT or SIGTERM ends it cleanly, its hold released. A
// subscriber killed outright holds it until its lease (--reader-lease, 60 s) runs out.

#include <atomic>
#include <csignal>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "checks.h"
#include "commands.h"
#include "shard_text.h"
#include "stop_signals.h"
#include <unistd.h>

#include "weir/operators/concat.h"
#include "weir/operators/generic.h"
#include "weir/persist/client.h"
#include "weir/sources/persist_source.h"
#include "weir/worker/execute.h"

namespace weir::tools {
namespace {

using Time = uint64_t;

struct SubscribeFlags {
  StoreFlags store;
  std::string shard;
  std::optional<uint64_t> as_of;
  std::optional<uint64_t> until;
  bool no_snapshot = false;
  bool progress = false;
  size_t workers = 1;
};

[[noreturn]] void fail(const absl::Status& status) {
  std::cerr << "weir subscribe: " << status << "\n";
  throw CLI::RuntimeError(1);
}

// Prints, on the worker that gets every update, each time's changes once it is complete.
class Printer {
 public:
  // `as_of`: the read's as_of once chosen (UINT64_MAX before); `until`: where an empty frontier
  // is reported as progress.
  Printer(std::optional<sources::postgres::RelationDesc> relation, std::string shard,
          std::shared_ptr<const std::atomic<uint64_t>> as_of, bool progress,
          std::optional<Time> until)
      : relation_(std::move(relation)),
        shard_(std::move(shard)),
        as_of_(std::move(as_of)),
        progress_(progress),
        until_(until) {}

  void add(Time time, const std::string& data, int64_t diff) {
    auto& sums = pending_[time];
    int64_t& sum = sums[data];
    sum += diff;
    if (sum == 0) sums.erase(data);
  }

  // Prints every time before `frontier` (empty: every time); an error if a row does not decode.
  absl::Status complete(std::optional<Time> frontier) {
    bool printed = false;
    while (!pending_.empty() && (!frontier || pending_.begin()->first < *frontier)) {
      const auto& [time, sums] = *pending_.begin();
      for (const auto& [data, diff] : sums) {
        line_ = absl::StrCat(time, "\t", diff, "\t");
        if (absl::Status s = append_row(relation_, shard_, data, line_); !s.ok()) return s;
        line_ += '\n';
        std::cout << line_;
        printed = true;
      }
      pending_.erase(pending_.begin());
    }
    // Progress from the snapshot's completion on.
    const std::optional<Time> upper = frontier ? frontier : until_;
    const Time as_of = as_of_->load(std::memory_order_acquire);
    if (progress_ && upper && as_of != UINT64_MAX && *upper > as_of &&
        (!reported_ || *reported_ < *upper)) {
      std::cout << *upper << "\tprogress\n";
      reported_ = upper;
      printed = true;
    }
    if (printed) std::cout.flush();
    if (!std::cout) return absl::CancelledError("standard output was closed");
    return absl::OkStatus();
  }

 private:
  const std::optional<sources::postgres::RelationDesc> relation_;
  const std::string shard_;
  const std::shared_ptr<const std::atomic<uint64_t>> as_of_;
  const bool progress_;
  const std::optional<Time> until_;
  std::map<Time, std::map<std::string, int64_t>> pending_;
  std::optional<Time> reported_;
  std::string line_;
};

void subscribe(const SubscribeFlags& flags) {
  auto location = store_location(flags.store);
  if (!location.ok()) fail(location.status());
  auto opened = persist::PersistClient::open(*location, store_config(flags.store));
  if (!opened.ok()) fail(opened.status());
  std::shared_ptr<persist::PersistClient> client = *std::move(opened);
  auto id = client->find_shard(flags.shard);
  if (!id.ok()) fail(id.status());
  if (!id->has_value()) fail(absl::NotFoundError("no shard named \"" + flags.shard + "\""));
  auto relation = relation_of(*client, flags.shard);
  if (!relation.ok()) fail(relation.status());

  auto stop = std::make_shared<std::atomic<bool>>(false);
  const StopOnSignals signals(stop);
  // A reader of a pipe that goes away ends the subscription like SIGINT (stdout fails).
  signal(SIGPIPE, SIG_IGN);

  absl::Status printing;  // Written by worker 0 only.
  Config config;
  config.workers = flags.workers;
  absl::Status executed = execute(config, [&](Worker& worker) {
    // Every update goes to worker 0, which prints.
    auto as_of = std::make_shared<std::atomic<uint64_t>>(UINT64_MAX);
    std::shared_ptr<Printer> printer;
    if (worker.index() == 0) {
      printer =
          std::make_shared<Printer>(*relation, flags.shard, as_of, flags.progress, flags.until);
    }
    const size_t index = worker.next_dataflow_index();
    worker.dataflow<Time>([&](Scope<Time>& scope) {
      sources::PersistSourceConfig source;
      source.shard = flags.shard;
      source.client = client;
      source.as_of = flags.as_of;
      source.start = sources::PersistSourceConfig::Start::kLatest;
      source.snapshot = !flags.no_snapshot;
      source.chosen_as_of = as_of;
      source.until = flags.until;
      source.purpose = "weir subscribe";
      auto read = sources::persist_source(scope, source);
      auto all = concat(read.updates, read.errors);
      sink(all, Exchange([](const sources::Update&) { return uint64_t{0}; }), "Print",
           [printer, &printing, stop, &worker](auto& input) {
             input.for_each([&](const auto& cap, std::vector<sources::Update>& batch) {
               for (const auto& [data, diff] : batch) printer->add(cap.time(), data, diff);
             });
             if (printer == nullptr || !printing.ok()) return;
             const auto frontier = input.frontier().frontier();
             printing = printer->complete(frontier.empty() ? std::nullopt
                                                           : std::optional<Time>(frontier[0]));
             // Every worker stops (a closed stdout ends the run as SIGINT does).
             if (printing.code() == absl::StatusCode::kCancelled) {
               stop->store(true);
             } else if (!printing.ok()) {
               worker.fail(printing);
             }
           });
    });
    auto installed = [&] {
      auto all = worker.installed_dataflows();
      return std::find(all.begin(), all.end(), index) != all.end();
    };
    while (installed() && !stop->load()) {
      worker.step_or_park(std::chrono::milliseconds(10));
    }
    // Dropping the dataflow unwinds persist_source, which expires its reader (the hold).
    if (installed()) worker.drop_dataflow(index);
  });
  std::cout.flush();
  if (!executed.ok()) fail(executed);
}

}  // namespace

void add_subscribe_command(CLI::App& app) {
  auto flags = std::make_shared<SubscribeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "subscribe",
      "Print a shard's contents, then every change as it becomes final: TIME<tab>DIFF<tab>ROW "
      "lines, one time after another");
  add_store_flags(*cmd, flags->store);
  add_reader_lease_flag(*cmd, flags->store);
  add_pubsub_flag(*cmd, flags->store.pubsub);
  cmd->add_option("SHARD", flags->shard, "Shard name")->required()->check(non_empty());
  cmd->add_option("--as-of", flags->as_of,
                  "Start at this time (default: the latest readable time, upper - 1)")
      ->check(unsigned_in());
  cmd->add_flag("--no-snapshot", flags->no_snapshot,
                "Print only the changes after --as-of, not the contents at it");
  cmd->add_flag("--progress", flags->progress,
                "Also print TIME<tab>progress whenever the shard's upper moves");
  cmd->add_option("--until", flags->until, "End before this time (default: follow forever)")
      ->check(unsigned_in());
  cmd->add_option("-w,--workers", flags->workers, "Worker threads that fetch parts")
      ->check(worker_count());
  cmd->footer(
      "Examples:\n"
      "  weir subscribe --persist DIR auction.bids --progress\n"
      "  weir subscribe --persist DIR auction.bids --as-of 100 --no-snapshot --until 200");
  cmd->final_callback([flags] { subscribe(*flags); });
}

}  // namespace weir::tools
