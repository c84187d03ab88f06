#include "weir/ingest/view.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <tuple>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

#include "weir/check.h"
#include "weir/collections/collections.h"
#include "weir/escape.h"
#include "weir/ingest/sequence.h"
#include "weir/operators/concat.h"
#include "weir/operators/inspect.h"
#include "weir/persist/background_maintenance.h"
#include "weir/persist/client.h"
#include "weir/persist/fence.h"
#include "weir/sinks/persist_sink.h"
#include "weir/sources/persist_source.h"
#include "weir/status.h"
#include "weir/worker/execute.h"

namespace weir::ingest {
namespace {

using Time = uint64_t;
using Rows = collections::Collection<Time, std::string>;

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

// Takes `holds` over with one epoch above each one's: a compare-and-set per hold, so that of two
// runs that start together each ends with an epoch of its own (one that finds a hold moved on
// tries again above it). Returns the epoch. (A store failure retried inside
// compare_and_downgrade_since can leave two runs with one epoch: see since_handle.h. Then neither
// fences the other, and the output stays right: each append is a compare-and-set at the upper,
// and both runs would write the same rows.)
absl::StatusOr<uint64_t> take_over(std::vector<persist::SinceHandle>& holds) {
  constexpr int kAttempts = 100;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    uint64_t epoch = 0;
    for (const persist::SinceHandle& hold : holds) epoch = std::max(epoch, hold.epoch());
    ++epoch;
    bool taken = true;
    for (persist::SinceHandle& hold : holds) {
      // The since stays where it is (a smaller one leaves it); a mismatch updates hold.epoch().
      WEIR_ASSIGN_OR_RETURN(const persist::SinceResult moved,
                            hold.compare_and_downgrade_since(hold.epoch(), epoch, hold.since()));
      if (moved.mismatch) {
        taken = false;
        break;
      }
    }
    if (taken) return epoch;
  }
  return absl::AbortedError(absl::StrCat("the view's holds on its inputs moved on ", kAttempts,
                                         " times while this run took them over"));
}

}  // namespace

const std::vector<std::string>& known_views() {
  static const std::vector<std::string> views = {"bids-per-auction", "max-bid"};
  return views;
}

std::vector<std::string> view_inputs(std::string_view view) {
  if (view == "bids-per-auction") return {"auction.bids"};
  if (view == "max-bid") return {"auction.bids", "auction.users"};
  return {};
}

persist::CriticalReaderId view_hold_id(const std::string& output, const std::string& input) {
  const collections::StableHash<std::string> hash;
  const uint64_t hi = hash("weir view " + output + " <- " + input);
  const uint64_t lo = hash("weir view hold " + input + " -> " + output);
  char text[40];
  std::snprintf(text, sizeof(text), "c%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xFFFF), static_cast<unsigned>(hi & 0xFFFF),
                static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFULL));
  auto id = persist::CriticalReaderId::parse(text);
  WEIR_CHECK(id.ok()) << "a view hold id does not parse: " << id.status();
  return *std::move(id);
}

absl::Status run_view(const ViewOptions& options) {
  const std::vector<std::string> inputs = view_inputs(options.view);
  if (inputs.empty()) {
    return absl::InvalidArgumentError("no view named \"" + options.view +
                                      "\" (there are: bids-per-auction, max-bid)");
  }
  const std::string output = options.output.empty() ? "view." + options.view : options.output;
  const auto log = [&options](LogSeverity severity, const std::string& line) {
    if (options.log_event) options.log_event(severity, line);
  };
  std::shared_ptr<persist::PersistClient> client;
  if (options.blob || options.consensus) {
    if (!options.blob || !options.consensus) {
      return absl::InvalidArgumentError("ViewOptions: give both blob and consensus, or neither");
    }
    client = persist::PersistClient::create(options.blob, options.consensus, options.persist);
  } else {
    WEIR_ASSIGN_OR_RETURN(client, persist::PersistClient::open(options.location, options.persist));
  }
  for (const std::string& input : inputs) {
    WEIR_ASSIGN_OR_RETURN(const auto found, client->find_shard(input));
    if (!found.has_value()) {
      return absl::NotFoundError("no shard named \"" + input + "\" (run weir ingest first)");
    }
  }
  // Nothing to do (and no epoch taken) if the output is sealed or complete before `until`.
  const auto done = [&options](const persist::Frontier& upper) {
    return upper.is_empty() || (options.until && *options.until <= upper.time());
  };
  if (absl::StatusOr<persist::ShardDescription> described = client->describe(output);
      described.ok()) {
    if (done(described->upper)) return absl::OkStatus();
    // An output another view (or an ingestion) wrote: resuming from its upper would add this
    // view's changes on top of rows it never wrote (a dropped max-bid's output reused by
    // bids-per-auction, negative counts for good).
    const std::string ours = absl::StrCat("weir view ", options.view, " -> ", output, " ");
    if (!described->fence_owner.empty() && !described->fence_owner.starts_with(ours)) {
      return absl::FailedPreconditionError(
          absl::StrCat("view ", options.view, ": its output ", output, " was written by ",
                       escape(described->fence_owner), ": give the view another output"));
    }
  } else if (!absl::IsNotFound(described.status())) {
    return described.status();
  }

  // The holds, taken over with an epoch of this run's own. The same epoch fences the output as
  // the writer opens: from then on no earlier run appends to it.
  std::vector<persist::SinceHandle> holds;
  for (const std::string& input : inputs) {
    WEIR_ASSIGN_OR_RETURN(
        persist::SinceHandle hold,
        client->open_critical_since(input, view_hold_id(output, input), "weir view " + output));
    holds.push_back(std::move(hold));
  }
  WEIR_ASSIGN_OR_RETURN(const uint64_t epoch, take_over(holds));
  if (options.check_before_fencing) WEIR_RETURN_IF_ERROR(options.check_before_fencing());
  const persist::Fence fence{epoch, absl::StrCat("weir view ", options.view, " -> ", output,
                                                 " epoch ", epoch, " (", process_name(), ")")};
  WEIR_ASSIGN_OR_RETURN(persist::WriteHandle opened,
                        client->open_writer(output, "weir view " + options.view, fence));
  auto writer = std::make_shared<persist::WriteHandle>(std::move(opened));
  // Every return from here on lets the writer go (refused, and harmless, once fenced out).
  absl::Cleanup expire_writer = [writer] { (void)writer->expire(); };
  WEIR_ASSIGN_OR_RETURN(const persist::Frontier upper, writer->fetch_recent_upper());
  if (done(upper)) return absl::OkStatus();  // An earlier run completed it meanwhile.
  const Time resume = upper.time();

  // Read as of the output's upper - 1 (or, for a new view, the inputs' latest since).
  struct Input {
    std::string shard;
    persist::CriticalReaderId id;
  };
  std::vector<Input> held;
  Time as_of = resume == 0 ? 0 : resume - 1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    held.push_back({inputs[i], holds[i].reader_id()});
    if (resume == 0 && !holds[i].since().is_empty()) {
      as_of = std::max(as_of, holds[i].since().time());
    }
  }

  const std::shared_ptr<std::atomic<bool>> stop =
      options.stop ? options.stop : std::make_shared<std::atomic<bool>>(false);
  auto maintenance = std::make_shared<persist::BackgroundMaintenance>(
      client,
      [log](const absl::Status& error) {
        log(LogSeverity::kWarning, absl::StrCat("persist maintenance: ", error.message()));
      },
      fence);
  // The output's upper as the sink moves it: the inputs' critical holds stay behind it, so that a
  // restart can read as of upper - 1.
  auto stats = std::make_shared<sinks::SinkStats>();
  stats->persisted_upper.store(resume);
  const std::shared_ptr<const std::atomic<uint64_t>> durable(stats, &stats->persisted_upper);
  Config config;
  config.workers = options.workers;
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
        source.until = options.until;
        source.critical_reader = input.id;
        source.hold_epoch = epoch;
        // No fence: the inputs are ingest's, fenced by its incarnations, whose next one would
        // remove a reader of this run's epoch.
        source.resume_frontier = durable;
        source.purpose = "weir view " + output;
        auto read = sources::persist_source(scope, source);
        collections.emplace_back(read.updates);
        input_errors.emplace_back(read.errors);
        for (auto& f : read.failures) failures.push_back(f);
      }
      Rows view = render_view(options.view, collections);
      for (const Rows& e : input_errors) view = collections::concat(view, e);
      sinks::PersistSinkConfig sink;
      sink.name = output;
      sink.writer = writer;
      sink.shard_upper = resume;
      sink.final_upper = options.until;
      sink.maintenance = maintenance;
      sink.stats = stats;
      auto rendered = sinks::render_persist_sink(view.stream(), sink);
      for (auto& f : rendered.errors) failures.push_back(f);
      for (auto& f : failures) {
        f | inspect([&worker](const AsyncError& error) {
          absl::Status failed(error.status.code(),
                              absl::StrCat(error.operator_name, ": ", error.status.message()));
          // Payloads say what kind of error it is (persist::is_fenced).
          error.status.ForEachPayload([&failed](absl::string_view url, const absl::Cord& payload) {
            failed.SetPayload(url, payload);
          });
          worker.fail(std::move(failed));
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
  // Bounded: a backlog can take minutes to settle (a killed run's reader lease holds GC back for
  // its whole lease); what is left, the next writer's maintenance takes up.
  constexpr auto kMaintenanceFinishLimit = std::chrono::seconds(60);
  // A stop asked for (a drop, a replica stopping) does not wait for it.
  if (!stop->load() && !maintenance->finish_within(kMaintenanceFinishLimit)) {
    log(LogSeverity::kWarning,
        absl::StrCat("persist maintenance had not settled within ", kMaintenanceFinishLimit.count(),
                     " s of the run's end; stopping it (what the output holds is durable; the "
                     "next writer's maintenance goes on)"));
  }
  if (!executed.ok() && !persist::is_fenced(executed)) {
    // A later run takes the inputs' holds over, then fences the output: this run may meet the
    // holds first. The output's refusal names that run.
    if (absl::Status alive = writer->heartbeat(); persist::is_fenced(alive)) {
      log(LogSeverity::kWarning,
          absl::StrCat("fenced out; the run had ended with: ", executed.message()));
      return alive;
    }
  }
  return executed;
}

}  // namespace weir::ingest
