// The runners a replica gives each kind of catalog object.

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"

#include "weir/control/replica.h"
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
// created, kept through any silence (it has no lease), expired when the object is dropped. Its id
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
        client->open_critical_since(spec.shard, id, absl::StrCat("catalog hold ", spec.reader)));
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

}  // namespace

RunnerFactory default_runners() {
  return [](const CatalogObject& object) -> absl::StatusOr<Runner> {
    if (const auto* hold = std::get_if<HoldSpec>(&object.spec)) return hold_runner(object, *hold);
    return absl::UnimplementedError(
        absl::StrCat(object.name, ": this build's replica does not run this kind of object"));
  };
}

}  // namespace weir::control
