#include "weir/sources/persist_source.h"

#include <functional>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

#include "weir/operators/probe.h"
#include "weir/status.h"

namespace weir::sources {
namespace {

using persist::Frontier;
using persist::LeasedPart;
using persist::PartsBatch;
using persist::PartsLease;
using Time = uint64_t;

// The read holds of the leader: the leased reader's and the optional critical one, moved
// together.
class Holds {
 public:
  Holds(persist::ReadHandle reader, std::optional<persist::SinceHandle> critical, uint64_t epoch)
      : reader_(std::move(reader)), critical_(std::move(critical)), epoch_(epoch) {}

  persist::ReadHandle& reader() { return reader_; }

  // Moves both holds to `since` (never back).
  absl::Status downgrade(Time since) {
    WEIR_RETURN_IF_ERROR(reader_.downgrade_since(Frontier(since)));
    if (critical_) {
      WEIR_ASSIGN_OR_RETURN(persist::SinceResult moved, critical_->compare_and_downgrade_since(
                                                            epoch_, epoch_, Frontier(since)));
      if (moved.mismatch) return fenced(moved.mismatch->current);
    }
    return absl::OkStatus();
  }

  // Takes the critical hold over for `epoch_` unless a newer owner has it.
  absl::Status take_over() {
    if (!critical_) return absl::OkStatus();
    const uint64_t current = critical_->epoch();
    if (current > epoch_) return fenced(current);
    WEIR_ASSIGN_OR_RETURN(persist::SinceResult moved, critical_->compare_and_downgrade_since(
                                                          current, epoch_, critical_->since()));
    if (moved.mismatch) return fenced(moved.mismatch->current);
    return absl::OkStatus();
  }

  // Releases the leased reader (the critical hold stays: it is durable).
  void expire() { (void)reader_.expire(); }

 private:
  absl::Status fenced(uint64_t current) const {
    return absl::FailedPreconditionError(
        absl::StrCat("shard ", std::string(reader_.shard_id().str()), ": critical reader ",
                     std::string(critical_->reader_id().str()), " is at epoch ", current, ", not ",
                     epoch_, ": a newer incarnation holds it"));
  }

  persist::ReadHandle reader_;
  std::optional<persist::SinceHandle> critical_;
  uint64_t epoch_;
};

struct Failures {
  std::vector<Stream<Time, AsyncError>> errors;
  std::vector<ShutdownButton> buttons;
};

// The worker of the fetch operator that reads `part` (by its key).
uint64_t part_route(const std::string& encoded) { return std::hash<std::string>{}(encoded); }

// list: on the leader, the parts of the snapshot and of every batch after it, each at the first
// time it can hold, with the capability following the shard's upper (see the header).
Stream<Time, std::string> render_list(Scope<Time>& scope, const PersistSourceConfig& config,
                                      const ProbeHandle<Time>& fetched, Failures& failures) {
  AsyncOperatorBuilder<Time> builder("PersistSourceList(" + config.shard + ")", scope);
  auto [output, parts] = builder.add_output<std::string>();
  builder.set_on_error(config.on_error);
  const bool leader = scope.index() == config.leader % scope.peers();
  auto built = builder.build([=, output = output](
                                 AsyncContext& ctx,
                                 std::span<CapabilitySet<Time>> caps) mutable -> absl::Status {
    if (!leader) {
      caps[0].clear();
      return absl::OkStatus();
    }
    auto client = config.client;
    auto opened =
        ctx.run_blocking_owned([client, config]() -> absl::StatusOr<std::shared_ptr<Holds>> {
          WEIR_ASSIGN_OR_RETURN(persist::ReadHandle reader,
                                client->open_reader(config.shard, config.purpose));
          std::optional<persist::SinceHandle> critical;
          if (config.critical_reader) {
            WEIR_ASSIGN_OR_RETURN(
                critical,
                client->open_critical_since(config.shard, *config.critical_reader, config.purpose));
          }
          auto holds =
              std::make_shared<Holds>(std::move(reader), std::move(critical), config.hold_epoch);
          WEIR_RETURN_IF_ERROR(holds->take_over());
          return holds;
        });
    if (!opened.ok()) return opened.status();
    std::shared_ptr<Holds> holds = *std::move(opened);
    // The leased reader goes with the body, however it ends.
    struct Expire {
      std::shared_ptr<Holds> holds;
      ~Expire() { holds->expire(); }
    } expire{holds};

    const Frontier since = holds->reader().since();
    const Time as_of = config.as_of.value_or(since.is_empty() ? 0 : since.time());
    if (!since.less_equal(as_of)) {
      return absl::FailedPreconditionError(
          absl::StrCat("shard \"", config.shard, "\": cannot read as of ", as_of,
                       ": the shard's since is ", since.to_string(), " (compacted past it)"));
    }
    const Time until = config.until.value_or(UINT64_MAX);
    if (until <= as_of) {
      caps[0].clear();
      return absl::OkStatus();
    }
    caps[0].downgrade(Antichain<Time>{as_of});

    // Leases of parts handed out, by the frontier the fetches must pass before they go.
    std::multimap<Time, PartsLease> leases;
    Time held = since.is_empty() ? 0 : since.time();  // Where the holds are.
    auto last_moved = std::chrono::steady_clock::now();
    // Releases the leases the fetches are done with and moves the holds behind them (at most
    // every hold_interval, or `now`).
    auto follow_fetches = [&](bool now) -> absl::Status {
      while (!leases.empty() && !fetched.less_than(leases.begin()->first)) {
        leases.erase(leases.begin());
      }
      const std::vector<Time> frontier = fetched.frontier();
      if (frontier.empty()) return absl::OkStatus();
      const Time target = frontier.front() == 0 ? 0 : frontier.front() - 1;
      const auto clock = std::chrono::steady_clock::now();
      if (target <= held || (!now && clock - last_moved < config.hold_interval)) {
        return absl::OkStatus();
      }
      WEIR_RETURN_IF_ERROR(
          ctx.run_blocking_owned([holds, target] { return holds->downgrade(target); }));
      held = target;
      last_moved = clock;
      return absl::OkStatus();
    };
    // Gives the parts of `batch` at `time` and keeps its lease until the fetches pass `progress`.
    auto give = [&](PartsBatch batch, Time time) {
      const Time progress = batch.progress.is_empty() ? UINT64_MAX : batch.progress.time();
      if (!batch.parts.empty()) {
        const Capability<Time> cap = caps[0].delayed(time);
        for (const LeasedPart& part : batch.parts) output.give(cap, part.encode());
        leases.emplace(progress, std::move(batch.lease));
      }
    };

    // The snapshot, once the shard's upper has passed as_of.
    for (;;) {
      auto upper = ctx.run_blocking_owned([holds] { return holds->reader().fetch_recent_upper(); });
      if (!upper.ok()) return upper.status();
      if (!upper->less_equal(as_of)) break;
      ctx.sleep_for(config.poll);
    }
    auto snapshot =
        ctx.run_blocking_owned([holds, as_of] { return holds->reader().snapshot_parts(as_of); });
    if (!snapshot.ok()) return snapshot.status();
    give(*std::move(snapshot), as_of);
    auto listen = ctx.run_blocking_owned([holds, as_of] { return holds->reader().listen(as_of); });
    if (!listen.ok()) return listen.status();
    auto listening = std::make_shared<persist::Listen>(*std::move(listen));

    // Then every batch, until the listen passes `until` or the shard is sealed.
    Frontier frontier = listening->frontier();
    while (!frontier.is_empty() && frontier.time() < until) {
      caps[0].downgrade(Antichain<Time>{frontier.time()});
      WEIR_RETURN_IF_ERROR(follow_fetches(false));
      auto next = ctx.run_blocking_owned([listening] { return listening->next_parts(); });
      if (!next.ok()) return next.status();
      if (!next->has_value()) {
        ctx.sleep_for(config.poll);
        continue;
      }
      give(**std::move(next), frontier.time());
      frontier = listening->frontier();
    }
    caps[0].clear();
    // The fetches still need the leases (and the reader that keeps them) until they are done.
    while (!fetched.done()) {
      WEIR_RETURN_IF_ERROR(follow_fetches(false));
      WEIR_RETURN_IF_ERROR(ctx.run_blocking_owned([holds] { return holds->reader().heartbeat(); }));
      ctx.sleep_for(config.poll);
    }
    // Released here rather than by `expire` (which also covers a body unwound or failed), so that
    // a run that ends normally has let go of its hold when its dataflow completes.
    // A failure to expire leaves a lease that GC expires later: not the reader's error.
    (void)ctx.run_blocking_owned([holds] { return holds->reader().expire(); });
    return absl::OkStatus();
  });
  failures.errors.push_back(built.errors);
  failures.buttons.push_back(built.button);
  return parts;
}

// fetch: on every worker, the parts it is sent. Returns the updates and the errors.
std::pair<Stream<Time, Update>, Stream<Time, Update>> render_fetch(
    const Stream<Time, std::string>& parts, const PersistSourceConfig& config, Failures& failures) {
  AsyncOperatorBuilder<Time> builder("PersistSourceFetch(" + config.shard + ")", parts.scope());
  auto input = builder.add_input(parts, Exchange(part_route));
  auto [updates_out, updates] = builder.add_output<Update>();
  auto [errors_out, errors] = builder.add_output<Update>();
  builder.set_on_error(config.on_error);
  auto built = builder.build([=, updates_out = updates_out, errors_out = errors_out](
                                 AsyncContext& ctx,
                                 std::span<CapabilitySet<Time>> caps) mutable -> absl::Status {
    for (auto& set : caps) set.clear();
    auto client = config.client;
    for (;;) {
      auto event = input.next();
      if (event.is_end()) return absl::OkStatus();
      auto* data = event.data();
      if (data == nullptr) continue;
      for (const std::string& encoded : data->batch) {
        absl::StatusOr<LeasedPart> part = LeasedPart::decode(encoded);
        if (!part.ok()) {
          errors_out.give(data->capability.retain_for_output(1),
                          Update{absl::StrCat(config.error_prefix, "persist_source of shard \"",
                                              config.shard, "\": ", part.status().message()),
                                 1});
          continue;
        }
        // Fetched off the worker; the updates come back sorted by time for the capabilities.
        using Fetched = std::vector<std::pair<Time, Update>>;
        auto fetched = ctx.run_blocking_owned([client, part = *part]() -> absl::StatusOr<Fetched> {
          Fetched out;
          out.reserve(part.part.num_updates);
          WEIR_RETURN_IF_ERROR(
              client->fetch_part(part, [&](std::string_view data, uint64_t time, int64_t diff) {
                out.emplace_back(time, Update{std::string(data), diff});
              }));
          std::stable_sort(out.begin(), out.end(),
                           [](const auto& a, const auto& b) { return a.first < b.first; });
          return out;
        });
        if (!fetched.ok()) {
          const absl::StatusCode code = fetched.status().code();
          if (code != absl::StatusCode::kNotFound && code != absl::StatusCode::kDataLoss &&
              code != absl::StatusCode::kInvalidArgument) {
            return fetched.status();  // The store failing: transient.
          }
          errors_out.give(data->capability.retain_for_output(1),
                          Update{absl::StrCat(config.error_prefix, "persist_source: part \"",
                                              part->part.key, "\" of shard \"", config.shard,
                                              "\" cannot be read: ", fetched.status().message()),
                                 1});
          continue;
        }
        std::optional<Capability<Time>> at[2];
        for (auto& [time, update] : *fetched) {
          if (config.until && time >= *config.until) continue;
          const size_t port = update.first.starts_with(config.error_prefix) ? 1 : 0;
          if (!at[port] || at[port]->time() != time) {
            at[port] = data->capability.delayed_for_output(time, port);
          }
          (port == 0 ? updates_out : errors_out).give(*at[port], std::move(update));
        }
      }
    }
  });
  failures.errors.push_back(built.errors);
  failures.buttons.push_back(built.button);
  return {updates, errors};
}

}  // namespace

PersistSourceStreams persist_source(Scope<uint64_t>& scope, PersistSourceConfig config) {
  Failures failures;
  ProbeHandle<Time> fetched;
  Stream<Time, std::string> parts = render_list(scope, config, fetched, failures);
  auto [updates, errors] = render_fetch(parts, config, failures);
  probe_with(updates, fetched);
  probe_with(errors, fetched);
  return {updates, errors, std::move(failures.errors), std::move(failures.buttons)};
}

}  // namespace weir::sources
