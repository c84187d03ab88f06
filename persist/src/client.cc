#include "weir/persist/client.h"

#include "handles.h"
#include "str_cat.h"

#include "weir/status.h"

namespace weir::persist {

PersistLocation PersistLocation::in_directory(std::string_view dir) {
  std::string base(dir);
  while (base.size() > 1 && base.back() == '/') {
    base.pop_back();
  }
  return {internal::str_cat("file://", base, "/blob"),
          internal::str_cat("sqlite://", base, "/consensus.db")};
}

absl::StatusOr<std::unique_ptr<PersistClient>> PersistClient::open(const PersistLocation& location,
                                                                   PersistConfig config) {
  // The blob store first: a file:// one creates the directory a sqlite:// file may live in.
  WEIR_ASSIGN_OR_RETURN(std::unique_ptr<Blob> blob, Blob::open(location.blob_url));
  WEIR_ASSIGN_OR_RETURN(std::unique_ptr<Consensus> consensus,
                        Consensus::open(location.consensus_url));
  return create(std::move(blob), std::move(consensus), std::move(config));
}

std::unique_ptr<PersistClient> PersistClient::create(std::shared_ptr<Blob> blob,
                                                     std::shared_ptr<Consensus> consensus,
                                                     PersistConfig config) {
  return std::unique_ptr<PersistClient>(new PersistClient(std::make_shared<internal::ClientCore>(
      std::move(blob), std::move(consensus), std::move(config))));
}

PersistClient::PersistClient(std::shared_ptr<internal::ClientCore> core) : core_(std::move(core)) {}
PersistClient::~PersistClient() = default;

absl::StatusOr<std::vector<ShardName>> PersistClient::list_shards() { return core_->list_shards(); }

absl::StatusOr<std::optional<ShardId>> PersistClient::find_shard(std::string_view name) {
  return core_->find_shard(name);
}

namespace {

absl::StatusOr<internal::Shard> existing_shard(const std::shared_ptr<internal::ClientCore>& core,
                                               std::string_view name) {
  WEIR_ASSIGN_OR_RETURN(std::optional<ShardId> id, core->find_shard(name));
  if (!id) {
    return absl::NotFoundError(internal::str_cat("no shard named \"", name, "\""));
  }
  return internal::Shard(core, *id, std::string(name));
}

absl::StatusOr<internal::Shard> new_or_existing_shard(
    const std::shared_ptr<internal::ClientCore>& core, std::string_view name) {
  WEIR_ASSIGN_OR_RETURN(ShardId id, core->find_or_create_shard(name));
  return internal::Shard(core, id, std::string(name));
}

}  // namespace

absl::StatusOr<WriteHandle> PersistClient::open_writer(std::string_view name,
                                                       std::string_view purpose,
                                                       const Fence& fence) {
  WEIR_ASSIGN_OR_RETURN(internal::Shard shard, new_or_existing_shard(core_, name));
  WEIR_ASSIGN_OR_RETURN(std::shared_ptr<internal::WriterCore> writer,
                        internal::WriterCore::open(std::move(shard), std::string(purpose), fence));
  return WriteHandle(std::move(writer));
}

absl::StatusOr<ReadHandle> PersistClient::open_reader(std::string_view name,
                                                      std::string_view purpose,
                                                      const Fence& fence) {
  WEIR_ASSIGN_OR_RETURN(internal::Shard shard, new_or_existing_shard(core_, name));
  WEIR_ASSIGN_OR_RETURN(std::shared_ptr<internal::ReaderCore> reader,
                        internal::ReaderCore::open(std::move(shard), std::string(purpose), fence));
  return ReadHandle(std::move(reader));
}

absl::StatusOr<SinceHandle> PersistClient::open_critical_since(std::string_view name,
                                                               const CriticalReaderId& id,
                                                               std::string_view purpose) {
  if (!internal::is_valid_id('c', id.str())) {
    return absl::InvalidArgumentError("open_critical_since: the empty CriticalReaderId");
  }
  WEIR_ASSIGN_OR_RETURN(internal::Shard shard, new_or_existing_shard(core_, name));
  WEIR_ASSIGN_OR_RETURN(std::shared_ptr<internal::CriticalCore> hold,
                        internal::CriticalCore::open(std::move(shard), id, std::string(purpose)));
  return SinceHandle(std::move(hold));
}

absl::StatusOr<ShardDescription> PersistClient::describe(std::string_view name) {
  WEIR_ASSIGN_OR_RETURN(internal::Shard shard, existing_shard(core_, name));
  WEIR_ASSIGN_OR_RETURN(internal::ShardState state, shard.fetch());
  const internal::proto::ProtoShardState& s = state.proto;
  using internal::frontier_of;
  ShardDescription d;
  d.id = shard.id();
  d.name = shard.name();
  d.seqno = state.seqno;
  d.walltime = absl::FromUnixMillis(s.walltime_ms());
  d.upper = frontier_of(s.upper());
  d.since = frontier_of(s.since());
  d.fence_epoch = s.fence_epoch();
  d.fence_owner = s.fence_owner();
  for (const auto& batch : s.batches()) {
    ShardDescription::BatchInfo info;
    info.description = {frontier_of(batch.lower()), frontier_of(batch.upper()),
                        frontier_of(batch.since())};
    info.writer_id = batch.writer_id();
    info.num_parts = static_cast<size_t>(batch.parts_size());
    info.num_runs = batch.parts_size() == 0 ? 0 : static_cast<size_t>(batch.run_starts_size()) + 1;
    for (const auto& part : batch.parts()) {
      info.num_updates += part.num_updates();
      info.update_bytes += part.update_bytes();
      info.encoded_bytes += part.encoded_bytes();
    }
    d.batches.push_back(std::move(info));
  }
  for (const auto& writer : s.writers()) {
    d.writers.push_back({writer.writer_id(), writer.purpose(),
                         absl::FromUnixMillis(writer.last_heartbeat_ms()),
                         absl::Milliseconds(writer.lease_duration_ms()), writer.fence_epoch()});
  }
  for (const auto& reader : s.leased_readers()) {
    d.leased_readers.push_back({reader.reader_id(), reader.purpose(), frontier_of(reader.since()),
                                reader.seqno(), absl::FromUnixMillis(reader.last_heartbeat_ms()),
                                absl::Milliseconds(reader.lease_duration_ms()),
                                reader.fence_epoch()});
  }
  for (const auto& reader : s.critical_readers()) {
    d.critical_readers.push_back(
        {reader.reader_id(), reader.purpose(), frontier_of(reader.since()), reader.epoch(),
         reader.last_changed_ms() == 0 ? absl::InfinitePast()
                                       : absl::FromUnixMillis(reader.last_changed_ms())});
  }
  return d;
}

absl::StatusOr<SnapshotCursor> PersistClient::inspect_snapshot(std::string_view name,
                                                               std::optional<uint64_t> as_of) {
  WEIR_ASSIGN_OR_RETURN(internal::Shard shard, existing_shard(core_, name));
  WEIR_ASSIGN_OR_RETURN(internal::ShardState state, shard.fetch());
  const Frontier upper = internal::frontier_of(state.proto.upper());
  if (!as_of) {
    if (upper == Frontier(0)) {
      // Nothing is final yet: the latest readable contents are empty (there are no batches).
      return SnapshotCursor(std::make_unique<internal::SnapshotCursorImpl>(shard, state.proto, 0,
                                                                           internal::SeqnoHold()));
    }
    as_of = upper.is_empty() ? UINT64_MAX : upper.time() - 1;
  }
  WEIR_RETURN_IF_ERROR(internal::check_readable(shard, state.proto, *as_of));
  return SnapshotCursor(std::make_unique<internal::SnapshotCursorImpl>(shard, state.proto, *as_of,
                                                                       internal::SeqnoHold()));
}

absl::Status PersistClient::fetch_part(
    const LeasedPart& part,
    absl::FunctionRef<void(std::string_view data, uint64_t time, int64_t diff)> each) {
  const internal::Shard shard(core_, part.shard_id, part.shard_name);
  WEIR_ASSIGN_OR_RETURN(std::shared_ptr<const internal::DecodedPart> decoded,
                        shard.part_fetcher()(part.part));
  for (size_t i = 0; i < decoded->size(); ++i) {
    uint64_t time = decoded->time(i);
    if (time < part.lower) continue;
    if (part.as_of) {
      if (time > *part.as_of) continue;
      time = *part.as_of;
    }
    each(decoded->data(i), time, decoded->diff(i));
  }
  return absl::OkStatus();
}

absl::Status PersistClient::fence(std::string_view name, const Fence& fence) {
  WEIR_ASSIGN_OR_RETURN(internal::Shard shard, new_or_existing_shard(core_, name));
  using internal::Shard;
  return internal::retry_unavailable(internal::kStoreAttempts, [&]() -> absl::Status {
    WEIR_ASSIGN_OR_RETURN(internal::ShardState current, shard.fetch());
    return shard
        .apply(std::move(current),
               [&](internal::proto::ProtoShardState& state) -> absl::StatusOr<Shard::Step> {
                 WEIR_ASSIGN_OR_RETURN(const bool raised,
                                       internal::check_or_raise_fence(
                                           shard, state,
                                           internal::str_cat("a fence of epoch ", fence.epoch, " (",
                                                             fence.owner, ")"),
                                           fence,
                                           /*raise=*/true));
                 return raised ? Shard::Step::kWrite : Shard::Step::kKeep;
               })
        .status();
  });
}

absl::Status PersistClient::maintain(std::string_view name) {
  return maintain_turn(name, CompactionOptions{}).status;
}

PersistClient::MaintainTurn PersistClient::maintain_turn(std::string_view name,
                                                         const CompactionOptions& compaction) {
  const absl::StatusOr<CompactionResult> compacted = compact(name, compaction);
  // GC even when the compaction failed: what it truncates and removes does not depend on it.
  const absl::StatusOr<GcResult> gc_result = gc(name);
  MaintainTurn turn;
  turn.more = compacted.ok() && !compacted->settled;
  if (!compacted.ok()) {
    turn.status = compacted.status();
  } else if (!gc_result.ok()) {
    turn.status = gc_result.status();
  } else if (gc_result->blobs_failed > 0) {
    turn.status = absl::UnavailableError(internal::str_cat(
        "shard \"", name, "\": GC could not remove ", gc_result->blobs_failed,
        " blob(s) (it removed ", gc_result->blobs_deleted, " and truncated ",
        gc_result->versions_truncated, " version(s)); first: ", gc_result->failures.front()));
  }
  return turn;
}

const std::shared_ptr<UpperRelay>& PersistClient::relay() const { return core_->config().relay; }

}  // namespace weir::persist
