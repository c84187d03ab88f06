// `weir view`: maintained views over the auction load generator's shards, exactly once.
//
//   weir view --persist DIR bids-per-auction|max-bid [--output SHARD] [-w W] [--until T]
//
// - bids-per-auction: "AUCTION,BIDS" per auction with at least one bid (count by key).
// - max-bid: "AUCTION,AMOUNT,BID,BUYER,REGION": each auction's highest bid (ties: the higher bid
//   id) with its bidder's region (a join of bids with users, then a reduce).
//
// The inputs are read with persist_source (weir/sources/persist_source.h), the view computed with
// weir::collections, the result written with the persist sink into --output (default
// view.NAME). A run resumes from the output's upper: the inputs are read as of upper - 1 (their
// snapshot rebuilds the operators' state) and the sink drops what the output already holds, so
// the output is the same whatever the crashes and restarts. Each input holds a critical since
// for the view (an id derived from the output and input names, taken over by every run with a
// higher epoch), so compaction never passes what a restart needs. Rows that do not parse, and the
// inputs' definite errors, go into the output as error rows ("!error: ...").

#include <array>
#include <atomic>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checks.h"
#include "commands.h"
#include "shard_text.h"
#include "stop_signals.h"
#include <signal.h>

#include "weir/collections/collections.h"
#include "weir/operators/concat.h"
#include "weir/operators/inspect.h"
#include "weir/persist/background_maintenance.h"
#include "weir/persist/client.h"
#include "weir/sinks/persist_sink.h"
#include "weir/sources/persist_source.h"
#include "weir/worker/execute.h"

namespace weir::tools {
namespace {

using Time = uint64_t;
using Rows = collections::Collection<Time, std::string>;

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

template <class T>
T value_or_fail(absl::StatusOr<T> result) {
  if (!result.ok()) fail(result.status());
  return *std::move(result);
}

// The comma-separated fields of `row`.
std::vector<std::string_view> fields_of(std::string_view row) {
  std::vector<std::string_view> fields;
  for (size_t start = 0;;) {
    const size_t comma = row.find(',', start);
    fields.push_back(row.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

// The comma-separated unsigned fields of `row` at `indices`, or nullopt if one is missing or not
// a number.
template <size_t N>
std::optional<std::array<uint64_t, N>> numbers(std::string_view row,
                                               const std::array<size_t, N>& indices) {
  const std::vector<std::string_view> fields = fields_of(row);
  std::array<uint64_t, N> out{};
  for (size_t i = 0; i < N; ++i) {
    if (indices[i] >= fields.size()) return std::nullopt;
    const std::string_view f = fields[indices[i]];
    auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), out[i]);
    if (ec != std::errc() || end != f.data() + f.size()) return std::nullopt;
  }
  return out;
}

// A row of `shard` that does not parse, as an error row of the view.
std::string parse_error(const std::string& view, const std::string& shard, std::string_view row) {
  return sources::definite_error(
      absl::StrCat("view ", view, ": a row of ", shard, " does not parse: \"", escape(row), "\""));
}

// The view's output from its inputs (each a collection of the shard's rows); error rows for
// rows that do not parse.
Rows render_view(const std::string& view, const std::vector<Rows>& inputs) {
  const Rows& bids = inputs[0];
  // Error rows of the inputs that do not parse.
  std::vector<Rows> errors;
  if (view == "bids-per-auction") {
    // bids: id,buyer,auction,amount.
    auto auctions = collections::flat_map(bids, [view](const std::string& row) {
      std::vector<std::pair<uint64_t, std::string>> out;
      if (auto f = numbers<1>(row, {2})) {
        out.emplace_back((*f)[0], "");
      } else {
        out.emplace_back(UINT64_MAX, parse_error(view, "auction.bids", row));
      }
      return out;
    });
    auto valid = collections::filter(
        auctions, [](const std::pair<uint64_t, std::string>& a) { return a.second.empty(); });
    errors.push_back(collections::map(
        collections::filter(
            auctions, [](const std::pair<uint64_t, std::string>& a) { return !a.second.empty(); }),
        [](const std::pair<uint64_t, std::string>& a) { return a.second; }));
    auto counts = collections::count(
        collections::map(valid, [](const std::pair<uint64_t, std::string>& a) { return a.first; }));
    Rows out = collections::map(counts, [](const std::pair<uint64_t, int64_t>& c) {
      return absl::StrCat(c.first, ",", c.second);
    });
    for (const Rows& e : errors) out = collections::concat(out, e);
    return out;
  }
  // max-bid. bids: id,buyer,auction,amount; users: id,name,region.
  using Bid = std::tuple<uint64_t, uint64_t, uint64_t>;  // auction, amount, bid id
  const Rows& users = inputs[1];
  auto by_buyer = collections::flat_map(bids, [](const std::string& row) {
    std::vector<std::pair<uint64_t, Bid>> out;
    if (auto f = numbers<4>(row, {1, 2, 3, 0}))
      out.emplace_back((*f)[0], Bid{(*f)[1], (*f)[2], (*f)[3]});
    return out;
  });
  errors.push_back(collections::flat_map(bids, [view](const std::string& row) {
    std::vector<std::string> out;
    if (!numbers<4>(row, {1, 2, 3, 0})) out.push_back(parse_error(view, "auction.bids", row));
    return out;
  }));
  auto regions = collections::flat_map(users, [](const std::string& row) {
    std::vector<std::pair<uint64_t, std::string>> out;
    const std::vector<std::string_view> fields = fields_of(row);
    if (auto id = numbers<1>(row, {0}); id && fields.size() == 3) {
      out.emplace_back((*id)[0], std::string(fields[2]));
    }
    return out;
  });
  errors.push_back(collections::flat_map(users, [view](const std::string& row) {
    std::vector<std::string> out;
    const std::vector<std::string_view> fields = fields_of(row);
    if (fields.size() != 3 || !numbers<1>(row, {0})) {
      out.push_back(parse_error(view, "auction.users", row));
    }
    return out;
  }));
  using Best = std::tuple<uint64_t, uint64_t, uint64_t, std::string>;  // amount, bid, buyer, region
  auto joined = collections::join(by_buyer, regions);
  auto by_auction =
      collections::map(joined, [](const std::pair<uint64_t, std::pair<Bid, std::string>>& j) {
        const auto& [auction, amount, bid] = j.second.first;
        return std::pair<uint64_t, Best>(auction, Best{amount, bid, j.first, j.second.second});
      });
  auto best = collections::reduce(
      by_auction, [](const uint64_t&, const std::vector<std::pair<Best, int64_t>>& values) {
        // Values come in ascending order: the last is the highest (amount, then bid id).
        return std::vector<std::pair<Best, int64_t>>{{values.back().first, 1}};
      });
  Rows out = collections::map(best, [](const std::pair<uint64_t, Best>& b) {
    const auto& [amount, bid, buyer, region] = b.second;
    return absl::StrCat(b.first, ",", amount, ",", bid, ",", buyer, ",", region);
  });
  for (const Rows& e : errors) out = collections::concat(out, e);
  return out;
}

// A critical reader id for the view's hold on `input`, the same in every run: derived from the
// output and input names.
persist::CriticalReaderId hold_id(const std::string& output, const std::string& input) {
  const collections::StableHash<std::string> hash;
  const uint64_t hi = hash("weir view " + output + " <- " + input);
  const uint64_t lo = hash("weir view hold " + input + " -> " + output);
  char text[40];
  std::snprintf(text, sizeof(text), "c%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xFFFF), static_cast<unsigned>(hi & 0xFFFF),
                static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFULL));
  return value_or_fail(persist::CriticalReaderId::parse(text));
}

void run_view(const ViewFlags& flags) {
  std::vector<std::string> inputs;
  if (flags.name == "bids-per-auction") {
    inputs = {"auction.bids"};
  } else if (flags.name == "max-bid") {
    inputs = {"auction.bids", "auction.users"};
  } else {
    fail(absl::InvalidArgumentError("no view named \"" + flags.name +
                                    "\" (there are: bids-per-auction, max-bid)"));
  }
  const std::string output = flags.output.empty() ? "view." + flags.name : flags.output;
  std::shared_ptr<persist::PersistClient> client =
      value_or_fail(persist::PersistClient::open(value_or_fail(store_location(flags.store))));
  for (const std::string& input : inputs) {
    if (!value_or_fail(client->find_shard(input)).has_value()) {
      fail(absl::NotFoundError("no shard named \"" + input + "\" (run weir ingest first)"));
    }
  }
  auto writer = std::make_shared<persist::WriteHandle>(
      value_or_fail(client->open_writer(output, "weir view " + flags.name)));
  const persist::Frontier upper = value_or_fail(writer->fetch_recent_upper());
  if (upper.is_empty()) return;  // Sealed: nothing more to write.
  const Time resume = upper.time();
  if (flags.until && *flags.until <= resume) return;

  // Every run takes the holds over with an epoch above theirs, and reads as of the output's
  // upper - 1 (or, for a new view, the inputs' latest since).
  struct Input {
    std::string shard;
    persist::CriticalReaderId id;
    uint64_t epoch = 0;
  };
  std::vector<Input> held;
  Time as_of = resume == 0 ? 0 : resume - 1;
  for (const std::string& input : inputs) {
    const persist::CriticalReaderId id = hold_id(output, input);
    persist::SinceHandle hold =
        value_or_fail(client->open_critical_since(input, id, "weir view " + output));
    held.push_back({input, id, hold.epoch() + 1});
    if (resume == 0 && !hold.since().is_empty()) as_of = std::max(as_of, hold.since().time());
  }

  auto stop = std::make_shared<std::atomic<bool>>(false);
  const StopOnSignals signals(stop);

  auto maintenance =
      std::make_shared<persist::BackgroundMaintenance>(client, [](const absl::Status& error) {
        std::cerr << "weir view: persist maintenance: " << error.message() << "\n";
      });
  // The output's upper as the sink moves it: the inputs' critical holds stay behind it, so that a
  // restart can read as of upper - 1.
  auto stats = std::make_shared<sinks::SinkStats>();
  stats->persisted_upper.store(resume);
  const std::shared_ptr<const std::atomic<uint64_t>> durable(stats, &stats->persisted_upper);
  Config config;
  config.workers = flags.workers;
  absl::Status executed = execute(config, [&](Worker& worker) {
    const size_t index = worker.next_dataflow_index();
    worker.dataflow<Time>([&](Scope<Time>& scope) {
      std::vector<Rows> collections;
      std::vector<Stream<Time, AsyncError>> failures;
      std::vector<Rows> input_errors;
      for (const Input& input : held) {
        sources::PersistSourceConfig source;
        source.shard = input.shard;
        source.client = client;
        source.as_of = as_of;
        source.until = flags.until;
        source.critical_reader = input.id;
        source.hold_epoch = input.epoch;
        source.resume_frontier = durable;
        source.purpose = "weir view " + output;
        auto read = sources::persist_source(scope, source);
        collections.emplace_back(read.updates);
        input_errors.emplace_back(read.errors);
        for (auto& f : read.failures) failures.push_back(f);
      }
      Rows view = render_view(flags.name, collections);
      for (const Rows& e : input_errors) view = collections::concat(view, e);
      sinks::PersistSinkConfig sink;
      sink.name = output;
      sink.writer = writer;
      sink.shard_upper = resume;
      sink.final_upper = flags.until;
      sink.maintenance = maintenance;
      sink.stats = stats;
      auto rendered = sinks::render_persist_sink(view.stream(), sink);
      for (auto& f : rendered.errors) failures.push_back(f);
      for (auto& f : failures) {
        f | inspect([&worker](const AsyncError& error) {
          worker.fail(absl::Status(error.status.code(), absl::StrCat(error.operator_name, ": ",
                                                                     error.status.message())));
        });
      }
    });
    auto installed = [&] {
      auto all = worker.installed_dataflows();
      return std::find(all.begin(), all.end(), index) != all.end();
    };
    while (installed() && !stop->load()) worker.step_or_park(std::chrono::milliseconds(10));
    if (installed()) worker.drop_dataflow(index);
  });
  maintenance->finish();
  if (!executed.ok()) fail(executed);
  (void)writer->expire();
}

}  // namespace

void add_view_command(CLI::App& app) {
  auto flags = std::make_shared<ViewFlags>();
  CLI::App* cmd = app.add_subcommand(
      "view",
      "Maintain a view of the auction shards in a shard of its own, exactly once: "
      "bids-per-auction (AUCTION,BIDS) or max-bid (AUCTION,AMOUNT,BID,BUYER,REGION)");
  add_store_flags(*cmd, flags->store);
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
