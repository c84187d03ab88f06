// The runners a replica gives each kind of catalog object.

#include <chrono>
#include <thread>
#include <type_traits>
#include <variant>

#include "absl/strings/str_cat.h"

#include "weir/control/replica.h"
#include "weir/control/validate.h"
#include "weir/ingest/ingest.h"
#include "weir/ingest/source_spec.h"
#include "weir/ingest/view.h"
#include "weir/status.h"

namespace weir::control {
namespace {

absl::StatusOr<std::shared_ptr<persist::PersistClient>> open_client(const RunContext& ctx) {
  if (ctx.blob) return persist::PersistClient::create(ctx.blob, ctx.consensus, ctx.persist);
  WEIR_ASSIGN_OR_RETURN(std::unique_ptr<persist::PersistClient> client,
                        persist::PersistClient::open(ctx.location, ctx.persist));
  return std::shared_ptr<persist::PersistClient>(std::move(client));
}

// A declared hold: a critical since handle on the shard, registered at its since when the hold is
// created, moved forward to spec.since once advanced, kept through any silence (it has no lease),
// expired when the object is dropped. Its id
// is the object's ("o<uuid>" -> "c<uuid>"), so a hold recreated under the same name is a new one.
Runner hold_runner(const CatalogObject& object, const HoldSpec& spec) {
  return [object, spec](const RunContext& ctx) -> absl::Status {
    WEIR_ASSIGN_OR_RETURN(std::shared_ptr<persist::PersistClient> client, open_client(ctx));
    WEIR_ASSIGN_OR_RETURN(const std::optional<persist::ShardId> shard,
                          client->find_shard(spec.shard));
    if (!shard) {
      // Never created here: a hold on a shard nobody writes would only hide the mistake.
      return absl::FailedPreconditionError(
          absl::StrCat("waiting for shard \"", spec.shard, "\" (it does not exist)"));
    }
    WEIR_ASSIGN_OR_RETURN(const persist::CriticalReaderId id,
                          persist::CriticalReaderId::parse("c" + object.object_id.substr(1)));
    WEIR_ASSIGN_OR_RETURN(
        persist::SinceHandle hold,
        client->open_critical_since(spec.shard, id, absl::StrCat(kHoldPurpose, spec.reader)));
    if (spec.since > 0) {
      // Advanced (weir ctl hold advance): forward only; a since already past it stays.
      WEIR_ASSIGN_OR_RETURN(const auto moved,
                            hold.compare_and_downgrade_since(hold.epoch(), hold.epoch(),
                                                             persist::Frontier(spec.since)));
      if (moved.mismatch) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the hold ", id.str(), " on ", spec.shard, " was moved by someone else (epoch ",
            moved.mismatch->current, "): not advanced to ", spec.since));
      }
    }
    ctx.running();
    while (!ctx.stop->load()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!ctx.dropped->load()) return absl::OkStatus();  // Kept: the replica stops, not the hold.
    WEIR_ASSIGN_OR_RETURN(auto mismatch, hold.expire(hold.epoch()));
    if (mismatch) {
      return absl::FailedPreconditionError(absl::StrCat("the hold ", id.str(), " on ", spec.shard,
                                                        " was moved by someone else (epoch ",
                                                        mismatch->current, "): not released"));
    }
    return absl::OkStatus();
  };
}

// The location as `weir ingest` would name it, for the defaults tied to a location (a
// PostgreSQL slot's name, a MariaDB server id): the same objects get the same ones.
std::string location_key(const RunContext& ctx) {
  const persist::PersistLocation& l = ctx.location;
  const std::string prefix = "file://";
  if (l.blob_url.starts_with(prefix) && l.blob_url.ends_with("/blob")) {
    return l.blob_url.substr(prefix.size(), l.blob_url.size() - prefix.size() - 5);
  }
  return l.blob_url + " " + l.consensus_url;
}

// What ingestions and views take from the replica alike (IngestOptions and ViewOptions name
// these fields the same): the stores, the stop, the log and the check before fencing.
template <class Options>
void take_run_context(const RunContext& ctx, Options& options) {
  options.persist = ctx.persist;
  options.blob = ctx.blob;
  options.consensus = ctx.consensus;
  options.stop = ctx.stop;
  options.log_event = ctx.log;
  options.check_before_fencing = ctx.check_current;
}

// A source: its ingestion (run_ingest), which resumes from its shards' uppers, fences them with
// an incarnation of its own, and writes `<kind>.status`.
Runner source_runner(const SourceSpec& spec) {
  const ingest::SourceSpec source = to_ingest_spec(spec);
  return [source](const RunContext& ctx) -> absl::Status {
    WEIR_ASSIGN_OR_RETURN(
        ingest::IngestOptions options,
        ingest::to_ingest_options(source, {ctx.location, location_key(ctx), ctx.workers}));
    take_run_context(ctx, options);
    options.on_worker = [running = ctx.running](Worker&) { running(); };
    // Health while run_ingest retries by itself: stalled while it backs off, running once it
    // progresses again.
    options.on_backoff = [stalled = ctx.stalled](const std::string& reason) {
      stalled(absl::UnavailableError(reason));
    };
    options.on_progress = ctx.running;
    return ingest::run_ingest(options).status();
  };
}

// Lets go of a dropped view's holds on its inputs (critical: no lease would ever end them). A
// hold moved meanwhile by a newer run of the same output is that run's: left alone.
absl::Status release_view_holds(const RunContext& ctx, const std::string& view,
                                const std::string& output) {
  std::shared_ptr<persist::PersistClient> client;
  if (ctx.blob) {
    client = persist::PersistClient::create(ctx.blob, ctx.consensus, ctx.persist);
  } else {
    WEIR_ASSIGN_OR_RETURN(client, persist::PersistClient::open(ctx.location, ctx.persist));
  }
  for (const std::string& input : ingest::view_inputs(view)) {
    WEIR_ASSIGN_OR_RETURN(const std::optional<persist::ShardId> exists, client->find_shard(input));
    if (!exists) continue;
    WEIR_ASSIGN_OR_RETURN(persist::SinceHandle hold,
                          client->open_critical_since(input, ingest::view_hold_id(output, input),
                                                      "weir view " + output));
    WEIR_ASSIGN_OR_RETURN(const auto mismatch, hold.expire(hold.epoch()));
    if (mismatch) {
      return absl::FailedPreconditionError(absl::StrCat("the view's hold on ", input,
                                                        " was moved by a newer run (epoch ",
                                                        mismatch->current, "): not released"));
    }
  }
  return absl::OkStatus();
}

// A view: run_view, which resumes from its output's upper and fences the run before it. Dropped,
// it releases its holds on its inputs.
Runner view_runner(const ViewSpec& spec) {
  return [spec](const RunContext& ctx) -> absl::Status {
    ingest::ViewOptions options;
    options.view = spec.view;
    options.output = spec.output.empty() ? "view." + spec.view : spec.output;
    options.workers = ctx.workers;
    options.location = ctx.location;
    take_run_context(ctx, options);
    ctx.running();
    WEIR_RETURN_IF_ERROR(ingest::run_view(options));
    if (!ctx.dropped->load()) return absl::OkStatus();
    return release_view_holds(ctx, spec.view, options.output);
  };
}

}  // namespace

RunnerFactory default_runners() {
  return [](const CatalogObject& object) -> absl::StatusOr<Runner> {
    return std::visit(
        [&object](const auto& spec) -> Runner {
          using Spec = std::decay_t<decltype(spec)>;
          if constexpr (std::is_same_v<Spec, SourceSpec>) {
            return source_runner(spec);
          } else if constexpr (std::is_same_v<Spec, ViewSpec>) {
            return view_runner(spec);
          } else {
            return hold_runner(object, spec);
          }
        },
        object.spec);
  };
}

}  // namespace weir::control
