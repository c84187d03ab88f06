// Critical since holds that the driver keeps on its shards, fenced by the incarnation.

#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

#include "weir/persist/client.h"

namespace weir::ingest::internal {

// Opens the driver's hold on `shard` and takes it over for `incarnation` (its epoch). Its id is
// the shard's uuid with the prefix `c`: the same for every incarnation, so the hold is found
// again across restarts without storing its id anywhere. A hold at a later incarnation means
// this driver is stale: FailedPrecondition.
absl::StatusOr<std::shared_ptr<persist::SinceHandle>> take_over_hold(
    persist::PersistClient& client, const std::string& shard, const persist::ShardId& shard_id,
    uint64_t incarnation, const std::string& purpose);

}  // namespace weir::ingest::internal
