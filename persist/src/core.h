// The shared machinery behind PersistClient and its handles: the stores, the I/O threads, the
// name map, and Shard, which reads a shard's state and changes it by compare-and-set.

#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "codec.h"
#include "parts.h"
#include "retry.h"
#include "thread_pool.h"

#include "weir/mutex.h"
#include "weir/persist/blob.h"
#include "weir/persist/client.h"
#include "weir/persist/config.h"
#include "weir/persist/consensus.h"
#include "weir/persist/fence.h"

namespace weir::persist::internal {

// The consensus key of the name -> shard id map. Shard ids start with 's' and have no '.'.
inline constexpr std::string_view kShardNamesKey = "weir.shard_names";

class ClientCore {
 public:
  ClientCore(std::shared_ptr<Blob> blob, std::shared_ptr<Consensus> consensus,
             PersistConfig config);

  const std::shared_ptr<Blob>& blob() const { return blob_; }
  Consensus& consensus() const { return *consensus_; }
  const PersistConfig& config() const { return config_; }
  ThreadPool& pool() { return pool_; }
  const std::shared_ptr<DecodedPartPool>& decoded_parts() const { return decoded_parts_; }
  const std::shared_ptr<BufferRecycler>& part_buffers() const { return part_buffers_; }
  int64_t now_ms() const { return absl::ToUnixMillis(config_.clock()); }

  absl::StatusOr<std::optional<ShardId>> find_shard(std::string_view name);
  absl::StatusOr<ShardId> find_or_create_shard(std::string_view name);
  absl::StatusOr<std::vector<ShardName>> list_shards();

 private:
  absl::StatusOr<std::pair<std::optional<uint64_t>, proto::ProtoShardNames>> fetch_names();
  absl::StatusOr<ShardId> find_or_create_shard_once(std::string_view name);

  const std::shared_ptr<Blob> blob_;
  const std::shared_ptr<Consensus> consensus_;
  const PersistConfig config_;
  weir::Mutex names_mu_;
  // Names never change their id once mapped, so hits need no consensus round trip.
  absl::flat_hash_map<std::string, ShardId> names_ ABSL_GUARDED_BY(names_mu_);
  const std::shared_ptr<DecodedPartPool> decoded_parts_;
  const std::shared_ptr<BufferRecycler> part_buffers_;
  ThreadPool pool_;  // Last: its threads stop before the rest goes away.
};

// A shard state and the consensus seqno it was read at; seqno 0: the shard has no state yet
// and `proto` is the initial state.
struct ShardState {
  uint64_t seqno = 0;
  proto::ProtoShardState proto;
};

// Fetches and decodes parts of one shard. Holds no ClientCore, so pool tasks may own copies.
struct PartFetcher {
  std::shared_ptr<Blob> blob;
  std::string shard_id;
  std::string label;
  std::shared_ptr<DecodedPartPool> parts;

  absl::StatusOr<std::shared_ptr<const DecodedPart>> operator()(const PartRef& ref) const;
};

// One shard's state machine.
//
// Thread safety: thread-safe (it holds no mutable state).
class Shard {
 public:
  Shard(std::shared_ptr<ClientCore> core, ShardId id, std::string name);

  ClientCore& core() const { return *core_; }
  const std::shared_ptr<ClientCore>& core_ptr() const { return core_; }
  const ShardId& id() const { return id_; }
  const std::string& name() const { return name_; }
  // `shard "NAME" (ID)`, for messages.
  const std::string& label() const { return label_; }

  // The latest state.
  absl::StatusOr<ShardState> fetch() const;

  enum class Step {
    kWrite,  // Write the changed state.
    kKeep,   // Change nothing: the caller has its answer.
  };

  // Applies `change` to a copy of `current` and compare-and-sets the result; on a lost race,
  // fetches the latest state and applies `change` again. `change` may run several times and must
  // reset whatever it reports to the caller each time. Returns the state the last run saw
  // (kKeep) or wrote (kWrite).
  absl::StatusOr<ShardState> apply(
      ShardState current,
      absl::FunctionRef<absl::StatusOr<Step>(proto::ProtoShardState&)> change) const;

  PartFetcher part_fetcher() const {
    return {core_->blob(), id_.str(), label_, core_->decoded_parts()};
  }
  // A fresh key "<shard id>/<writer id>/p<uuid>": GC recognizes the writer by it.
  std::string new_part_key(std::string_view writer_id) const;

 private:
  std::shared_ptr<ClientCore> core_;
  ShardId id_;
  std::string name_;
  std::string label_;
};

// The writer id in a part key (its second component), or "" if it has none.
std::string_view writer_of_key(std::string_view key);

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF).
bool is_utf8(std::string_view text);
// `text` as it may go into a state: the state is a proto3 message, whose string fields must be
// UTF-8 (a parse of one that is not fails, and every later read of the shard with it). Text
// that is not is kept with its bytes escaped (\xNN). For what only shows in describe and in
// errors: purposes, a fence's owner.
std::string as_utf8(std::string_view text);

// Tags a failed consensus compare_and_set whose outcome is unknown (see is_indeterminate).
absl::Status mark_indeterminate(absl::Status status);

// Helpers over a state.
proto::ProtoWriter* find_writer(proto::ProtoShardState& state, std::string_view id);
bool has_writer(const proto::ProtoShardState& state, std::string_view id);
proto::ProtoLeasedReader* find_leased_reader(proto::ProtoShardState& state, std::string_view id);
proto::ProtoCriticalReader* find_critical_reader(proto::ProtoShardState& state,
                                                 std::string_view id);
bool references_part(const proto::ProtoShardState& state, std::string_view key);
// Moves the since forward to the smallest since of the readers, if there are any.
void recompute_since(proto::ProtoShardState& state);
// The runs of a batch, as lists of parts.
std::vector<std::vector<PartRef>> runs_of(const proto::ProtoBatch& batch);

// Fences (weir/persist/fence.h). True if a handle opened with `epoch` may not act on `state`.
bool fenced_out(const proto::ProtoShardState& state, uint64_t epoch);
// The refusal of `handle` (say "writer w...") of fence epoch `epoch` on `state`:
// FailedPrecondition, recognised by is_fenced.
absl::Status fenced_error(const Shard& shard, const proto::ProtoShardState& state,
                          std::string_view handle, uint64_t epoch);
// Refuses a handle of `fence` on `state` (fenced_error) or raises the shard's fence to it,
// removing the writers and leased readers of lower non-zero epochs (`raise` false: only checks).
// Returns whether it changed `state`.
absl::StatusOr<bool> check_or_raise_fence(const Shard& shard, proto::ProtoShardState& state,
                                          std::string_view handle, const Fence& fence, bool raise);

}  // namespace weir::persist::internal
