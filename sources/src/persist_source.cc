#include "weir/sources/persist_source.h"

#include <algorithm>
#include <array>
#include <deque>
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

// The read holds of the leader: the leased reader's and the optional critical one. The reader is
// expired when the last owner lets go of them, whichever thread that is (a reader opened for a
// body that was dropped meanwhile goes with the blocking call's result).
class Holds {
 public:
  Holds(persist::ReadHandle reader, std::optional<persist::SinceHandle> critical, uint64_t epoch)
      : reader_(std::move(reader)), critical_(std::move(critical)), epoch_(epoch) {}
  Holds(const Holds&) = delete;
  Holds& operator=(const Holds&) = delete;
  ~Holds() { expire(); }

  persist::ReadHandle& reader() { return reader_; }

  // Moves the leased hold to `since` and the critical one to `critical_since` (never back).
  absl::Status downgrade(Time since, Time critical_since) {
    WEIR_RETURN_IF_ERROR(reader_.downgrade_since(Frontier(since)));
    if (critical_ && critical_->since().less_than(critical_since)) {
      WEIR_ASSIGN_OR_RETURN(
          persist::SinceResult moved,
          critical_->compare_and_downgrade_since(epoch_, epoch_, Frontier(critical_since)));
      if (moved.mismatch) return fenced(moved.mismatch->current);
    }
    return absl::OkStatus();
  }

  // Takes the critical hold over for `epoch_` unless a newer owner has it: a change that loses a
  // race to an older owner tries again from the epoch it found.
  absl::Status take_over() {
    if (!critical_) return absl::OkStatus();
    uint64_t current = critical_->epoch();
    for (;;) {
      if (current > epoch_) return fenced(current);
      WEIR_ASSIGN_OR_RETURN(persist::SinceResult moved, critical_->compare_and_downgrade_since(
                                                            current, epoch_, critical_->since()));
      if (!moved.mismatch) return absl::OkStatus();
      current = moved.mismatch->current;
    }
  }

  // Releases the leased reader (the critical hold stays: it is durable). Idempotent.
  void expire() {
    if (!expired_.exchange(true)) (void)reader_.expire();
  }

 private:
  absl::Status fenced(uint64_t current) const {
    return absl::FailedPreconditionError(
        absl::StrCat("shard ", std::string(reader_.shard_id().str()), ": critical reader ",
                     std::string(critical_->reader_id().str()), " is at epoch ", current,
                     ", above this reader's ", epoch_, ": a newer incarnation holds it"));
  }

  persist::ReadHandle reader_;
  std::optional<persist::SinceHandle> critical_;
  const uint64_t epoch_;
  std::atomic<bool> expired_{false};
};

bool unavailable(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable;
}
template <class T>
bool unavailable(const absl::StatusOr<T>& result) {
  return unavailable(result.status());
}

// Runs `fn` off the worker; while it fails with Unavailable, again after a backoff, until
// `limit` has passed (a consensus restarting, a blob store briefly away). Every call made this
// way is idempotent.
template <class F>
auto run_retrying(AsyncContext& ctx, std::chrono::milliseconds limit, const F& fn) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::chrono::milliseconds backoff(20);
  for (;;) {
    auto result = ctx.run_blocking_owned(F(fn));
    if (!unavailable(result) || std::chrono::steady_clock::now() + backoff > deadline) {
      return result;
    }
    ctx.sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
  }
}

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
    const auto limit = config.outage_limit;
    auto client = config.client;
    auto opened =
        run_retrying(ctx, limit, [client, config]() -> absl::StatusOr<std::shared_ptr<Holds>> {
          WEIR_ASSIGN_OR_RETURN(persist::ReadHandle reader,
                                client->open_reader(config.shard, config.purpose));
          std::optional<persist::SinceHandle> critical;
          if (config.critical_reader) {
            absl::StatusOr<persist::SinceHandle> opened_critical =
                client->open_critical_since(config.shard, *config.critical_reader, config.purpose);
            if (!opened_critical.ok()) {
              (void)reader.expire();  // Not yet in `holds`, which would expire it.
              return opened_critical.status();
            }
            critical = *std::move(opened_critical);
          }
          auto holds =
              std::make_shared<Holds>(std::move(reader), std::move(critical), config.hold_epoch);
          WEIR_RETURN_IF_ERROR(holds->take_over());
          return holds;
        });
    if (!opened.ok()) return opened.status();
    std::shared_ptr<Holds> holds = *std::move(opened);
    // Wakes the body when the shard's upper moves past what it read; else it looks every poll.
    persist::UpperWatch watch(client->relay(), holds->reader().shard_id(),
                              [activator = ctx.sync_activator()] { activator.activate(); });
    const auto wait_for_news = [&](uint64_t seen, const Frontier& known) {
      watch.set_known(known);
      const auto deadline =
          std::chrono::steady_clock::now() + watch.poll_interval(config.poll, config.relay_poll);
      ctx.wait_until([&] { return watch.news() != seen; }, deadline);
    };

    // as_of: given, or chosen now that the reader holds the shard's since where it is.
    const Frontier since = holds->reader().since();
    const Time since_time = since.is_empty() ? UINT64_MAX : since.time();
    Time as_of = since_time;
    if (config.as_of) {
      as_of = *config.as_of;
    } else if (config.start == PersistSourceConfig::Start::kLatest) {
      auto upper =
          run_retrying(ctx, limit, [holds] { return holds->reader().fetch_recent_upper(); });
      if (!upper.ok()) return upper.status();
      const Time latest = upper->is_empty() ? UINT64_MAX : std::max<Time>(upper->time(), 1) - 1;
      as_of = std::max(since_time, latest);
    }
    if (!since.less_equal(as_of)) {
      return absl::FailedPreconditionError(
          absl::StrCat("shard \"", config.shard, "\": cannot read as of ", as_of,
                       ": the shard's since is ", since.to_string(), " (compacted past it)"));
    }
    if (config.until && *config.until <= as_of) {
      caps[0].clear();
      holds->expire();
      return absl::OkStatus();
    }
    caps[0].downgrade(Antichain<Time>{as_of});
    if (config.chosen_as_of) config.chosen_as_of->store(as_of, std::memory_order_release);

    // Leases of parts handed out, by the frontier the fetches must pass before they go.
    std::multimap<Time, PartsLease> leases;
    Time held = since_time == UINT64_MAX ? 0 : since_time;  // Where the leased hold is.
    auto last_moved = std::chrono::steady_clock::now();
    // Releases the leases the fetches are done with and moves the holds behind them (at most
    // every hold_interval); renews the reader's lease when due.
    auto follow_fetches = [&]() -> absl::Status {
      while (!leases.empty() && !fetched.less_than(leases.begin()->first)) {
        leases.erase(leases.begin());
      }
      const std::vector<Time> frontier = fetched.frontier();
      const auto clock = std::chrono::steady_clock::now();
      const Time target = frontier.empty() ? held : std::max<Time>(frontier.front(), 1) - 1;
      if (target <= held || clock - last_moved < config.hold_interval) {
        return run_retrying(ctx, limit, [holds] { return holds->reader().heartbeat_if_due(); });
      }
      Time critical_target = target;
      if (config.resume_frontier) {
        critical_target = std::min(
            critical_target,
            std::max<Time>(config.resume_frontier->load(std::memory_order_acquire), 1) - 1);
      }
      WEIR_RETURN_IF_ERROR(run_retrying(ctx, limit, [holds, target, critical_target] {
        return holds->downgrade(target, critical_target);
      }));
      held = target;
      last_moved = clock;
      return absl::OkStatus();
    };
    // Gives the parts of `batch` at `time` and keeps its lease until the fetches pass its progress.
    auto give = [&](PartsBatch batch, Time time) {
      const Time progress = batch.progress.is_empty() ? UINT64_MAX : batch.progress.time();
      // A listen behind by many batches lists some that start at or after `until`: nothing of
      // theirs is read.
      if (config.until) {
        std::erase_if(batch.parts, [until = *config.until](const LeasedPart& part) {
          return !part.as_of && part.lower >= until;
        });
      }
      if (!batch.parts.empty()) {
        const Capability<Time> cap = caps[0].delayed(time);
        for (const LeasedPart& part : batch.parts) output.give(cap, part.encode());
        leases.emplace(progress, std::move(batch.lease));
      }
    };

    // The snapshot, once the shard's upper has passed as_of (renewing the lease meanwhile).
    for (;;) {
      const uint64_t seen = watch.news();
      auto upper =
          run_retrying(ctx, limit, [holds] { return holds->reader().fetch_recent_upper(); });
      if (!upper.ok()) return upper.status();
      if (!upper->less_equal(as_of)) break;
      WEIR_RETURN_IF_ERROR(
          run_retrying(ctx, limit, [holds] { return holds->reader().heartbeat_if_due(); }));
      wait_for_news(seen, *upper);
    }
    auto snapshot =
        run_retrying(ctx, limit, [holds, as_of] { return holds->reader().snapshot_parts(as_of); });
    if (!snapshot.ok()) return snapshot.status();
    if (config.snapshot) give(*std::move(snapshot), as_of);
    auto listen =
        run_retrying(ctx, limit, [holds, as_of] { return holds->reader().listen(as_of); });
    if (!listen.ok()) return listen.status();
    auto listening = std::make_shared<persist::Listen>(*std::move(listen));

    // Then every batch, until the listen passes `until` or the shard is sealed.
    Frontier frontier = listening->frontier();
    while (!frontier.is_empty() && (!config.until || frontier.time() < *config.until)) {
      caps[0].downgrade(Antichain<Time>{frontier.time()});
      WEIR_RETURN_IF_ERROR(follow_fetches());
      const uint64_t seen = watch.news();
      auto next = run_retrying(ctx, limit, [listening] { return listening->next_parts(); });
      if (!next.ok()) return next.status();
      if (!next->has_value()) {
        wait_for_news(seen, frontier);
        continue;
      }
      give(**std::move(next), frontier.time());
      frontier = listening->frontier();
    }
    caps[0].clear();
    // The fetches still need the leases (and the reader that keeps them) until they are done.
    // (Nothing wakes the body when they progress: it looks often, whatever the poll.)
    while (!fetched.done()) {
      WEIR_RETURN_IF_ERROR(follow_fetches());
      ctx.sleep_for(std::min(config.poll, std::chrono::milliseconds(10)));
    }
    // Expired here, off the worker, so that a run that ends normally has let go of its hold when
    // its dataflow completes; a body unwound or failed leaves it to the last owner of `holds`.
    (void)ctx.run_blocking_owned([holds] {
      holds->expire();
      return absl::OkStatus();
    });
    return absl::OkStatus();
  });
  failures.errors.push_back(built.errors);
  failures.buttons.push_back(built.button);
  return parts;
}

// Parts a fetch operator has in flight on the blocking pool at once (decoded ones wait in memory).
constexpr size_t kPrefetch = 3;

// A part's updates grouped by port (updates, errors) and time, ascending: each group is given
// whole (one give_vec).
using Fetched = std::array<std::map<Time, std::vector<Update>>, 2>;

absl::StatusOr<Fetched> fetch_grouped(persist::PersistClient& client, const LeasedPart& part,
                                      std::optional<Time> until, const std::string& error_prefix) {
  Fetched out;
  std::vector<Update>* last[2] = {nullptr, nullptr};
  Time last_time[2] = {0, 0};
  WEIR_RETURN_IF_ERROR(
      client.fetch_part(part, [&](std::string_view row, uint64_t time, int64_t diff) {
        if (until && time >= *until) return;
        const size_t port = row.starts_with(error_prefix) ? 1 : 0;
        if (last[port] == nullptr || last_time[port] != time) {
          auto [it, added] = out[port].try_emplace(time);
          // A snapshot's part is all at as_of: one group of (nearly) every update. num_updates
          // comes from a peer: trusted only as far as a sane part holds.
          if (added && port == 0 && part.as_of) {
            it->second.reserve(std::min<uint64_t>(part.part.num_updates, uint64_t{1} << 20));
          }
          last[port] = &it->second;
          last_time[port] = time;
        }
        last[port]->emplace_back(std::string(row), diff);
      }));
  return out;
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
    std::optional<persist::ShardId> shard_id;  // Looked up with the first part.
    auto error_row = [&](const InputCapability<Time>& cap, const std::string& message) {
      errors_out.give(cap.retain_for_output(1),
                      Update{absl::StrCat(config.error_prefix, "persist_source of shard \"",
                                          config.shard, "\": ", message),
                             1});
    };
    for (;;) {
      auto event = input.next();
      if (event.is_end()) return absl::OkStatus();
      auto* data = event.data();
      if (data == nullptr) continue;
      const Time at_least = data->time();
      std::vector<LeasedPart> valid;  // The descriptions to fetch, in the order they came.
      for (const std::string& encoded : data->batch) {
        absl::StatusOr<LeasedPart> part = LeasedPart::decode(encoded);
        if (!shard_id && part.ok()) {
          auto id = run_retrying(ctx, config.outage_limit, [client, name = config.shard] {
            return client->find_shard(name);
          });
          if (!id.ok()) return id.status();
          if (!id->has_value()) {
            return absl::NotFoundError(absl::StrCat("no shard named \"", config.shard, "\""));
          }
          shard_id = **id;
        }
        // A description from a peer that names another shard, or times before the capability it
        // came with, is not fetched.
        if (part.ok() && (part->shard_id != *shard_id ||
                          (part->as_of ? *part->as_of : part->lower) < at_least)) {
          part = absl::InvalidArgumentError(absl::StrCat(
              "a part description names shard ", part->shard_id.str(), " and times from ",
              part->as_of ? *part->as_of : part->lower, ", not this shard from ", at_least));
        }
        if (!part.ok()) {
          error_row(data->capability, std::string(part.status().message()));
          continue;
        }
        valid.push_back(*std::move(part));
      }
      // Fetched off the worker, kPrefetch at a time, and given in order: the worker gives one
      // part's updates while the pool decodes the next ones.
      auto fetch = [client, until = config.until, prefix = config.error_prefix](LeasedPart part) {
        return [client, until, prefix, part = std::move(part)] {
          return fetch_grouped(*client, part, until, prefix);
        };
      };
      std::deque<BlockingFuture<decltype(fetch(LeasedPart{}))>> in_flight;
      size_t started = 0;
      for (const LeasedPart& part : valid) {
        while (started < valid.size() && in_flight.size() < kPrefetch) {
          in_flight.push_back(ctx.start_blocking_owned(fetch(valid[started++])));
        }
        absl::StatusOr<Fetched> fetched = in_flight.front().get(ctx);
        in_flight.pop_front();
        if (unavailable(fetched)) {
          fetched = run_retrying(ctx, config.outage_limit, fetch(part));
        }
        if (!fetched.ok()) {
          const absl::StatusCode code = fetched.status().code();
          // A part that does not decode is an error of the shard's; anything else (a part gone
          // from the blob store: its lease was lost) fails the read, which must not skip it.
          if (code != absl::StatusCode::kDataLoss && code != absl::StatusCode::kInvalidArgument) {
            return fetched.status();
          }
          error_row(data->capability, absl::StrCat("part \"", part.part.key, "\" cannot be read: ",
                                                   fetched.status().message()));
          continue;
        }
        for (size_t port = 0; port < 2; ++port) {
          for (auto& [time, batch] : (*fetched)[port]) {
            const Capability<Time> cap = data->capability.delayed_for_output(time, port);
            (port == 0 ? updates_out : errors_out).give_vec(cap, batch);
          }
        }
      }
    }
  });
  failures.errors.push_back(built.errors);
  failures.buttons.push_back(built.button);
  return {updates, errors};
}

}  // namespace

PersistSourceStreams persist_source(Scope<uint64_t>& scope, const PersistSourceConfig& config) {
  Failures failures;
  ProbeHandle<Time> fetched;
  Stream<Time, std::string> parts = render_list(scope, config, fetched, failures);
  auto [updates, errors] = render_fetch(parts, config, failures);
  probe_with(updates, fetched);
  probe_with(errors, fetched);
  return {updates, errors, std::move(failures.errors), std::move(failures.buttons)};
}

}  // namespace weir::sources
