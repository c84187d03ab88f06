// Maintenance of a shard: compaction (merging batches, advancing times to the since) and garbage
// collection (expiring lapsed leases, removing unreferenced blobs, truncating consensus).

#include <algorithm>
#include <optional>
#include <tuple>

#include "absl/container/flat_hash_set.h"
#include "handles.h"
#include "str_cat.h"

#include "weir/persist/client.h"
#include "weir/status.h"

namespace weir::persist {
namespace internal {
namespace {

size_t runs_in(const proto::ProtoBatch& batch) {
  return batch.parts_size() == 0 ? 0 : static_cast<size_t>(batch.run_starts_size()) + 1;
}

uint64_t bytes_in(const std::vector<PartRef>& run) {
  uint64_t bytes = 0;
  for (const PartRef& part : run) {
    bytes += part.update_bytes;
  }
  return bytes;
}

uint64_t bytes_in(const proto::ProtoBatch& batch) {
  uint64_t bytes = 0;
  for (const auto& part : batch.parts()) {
    bytes += part.update_bytes();
  }
  return bytes;
}

// Folds every empty batch but the last into a neighbour: widening a batch over an interval
// without updates changes nothing it holds. Returns whether anything changed.
bool coalesce_empty_batches(proto::ProtoShardState& state) {
  const int n = state.batches_size();
  google::protobuf::RepeatedPtrField<proto::ProtoBatch> out;
  std::optional<proto::ProtoFrontier> carried_lower;
  bool changed = false;
  for (int i = 0; i < n; ++i) {
    proto::ProtoBatch batch = state.batches(i);
    if (carried_lower) {
      *batch.mutable_lower() = *std::exchange(carried_lower, std::nullopt);
    }
    if (batch.parts_size() == 0 && i + 1 < n) {
      if (!out.empty()) {
        *out.Mutable(out.size() - 1)->mutable_upper() = batch.upper();
      } else {
        carried_lower = batch.lower();
      }
      changed = true;
      continue;
    }
    *out.Add() = std::move(batch);
  }
  if (changed) {
    state.mutable_batches()->Swap(&out);
  }
  return changed;
}

// One compaction step: batches [first, last] are replaced by one batch whose first run merges
// `inputs`; `kept` are runs of a single batch (first == last) that this step leaves alone.
struct MergePlan {
  int first = 0;
  int last = 0;
  std::vector<std::vector<PartRef>> inputs;
  std::vector<std::vector<PartRef>> kept;
};

std::optional<MergePlan> plan_merge(const proto::ProtoShardState& state, bool full,
                                    size_t max_runs) {
  max_runs = std::max<size_t>(2, max_runs);
  int m = state.batches_size();
  while (m > 0 && state.batches(m - 1).parts_size() == 0) {
    --m;  // The trailing empty batches grow with every progress append: leave them.
  }
  if (m == 0) {
    return std::nullopt;
  }
  const Frontier since = frontier_of(state.since());
  std::optional<std::pair<int, int>> window;
  if (full) {
    const proto::ProtoBatch& only = state.batches(0);
    if (!(m == 1 && runs_in(only) <= 1 && frontier_of(only.since()) == since)) {
      window = {0, m - 1};
    }
  } else {
    // Keep batch sizes geometric, oldest largest: merge the longest suffix whose oldest batch is
    // no more than twice the rest. Every update is then rewritten O(log n) times.
    uint64_t suffix = 0;
    std::vector<uint64_t> suffix_after(static_cast<size_t>(m), 0);
    for (int i = m - 1; i >= 0; --i) {
      suffix_after[static_cast<size_t>(i)] = suffix;
      suffix += bytes_in(state.batches(i));
    }
    for (int i = 0; i + 1 < m; ++i) {
      if (bytes_in(state.batches(i)) <= 2 * suffix_after[static_cast<size_t>(i)]) {
        window = {i, m - 1};
        break;
      }
    }
    if (!window) {
      // Sizes are geometric; still bound the runs a snapshot has to merge.
      size_t total_runs = 0;
      int most = 0;
      for (int i = 0; i < m; ++i) {
        total_runs += runs_in(state.batches(i));
        if (runs_in(state.batches(i)) > runs_in(state.batches(most))) {
          most = i;
        }
      }
      if (total_runs > max_runs) {
        window = runs_in(state.batches(most)) > 1 ? std::pair{most, most}
                                                  : std::pair{std::max(0, m - 2), m - 1};
      }
    }
  }
  if (!window) {
    return std::nullopt;
  }
  MergePlan plan;
  plan.first = window->first;
  plan.last = window->second;
  const auto window_runs = [&] {
    size_t runs = 0;
    for (int i = plan.first; i <= plan.last; ++i) {
      runs += runs_in(state.batches(i));
    }
    return runs;
  };
  if (window_runs() > max_runs) {
    // More runs than one step merges: merge the adjacent batches of the window that remove the
    // most batches per byte rewritten (the oldest such). Dropping the oldest batch until the
    // rest fit merged the newest ones, the previous step's output among them: a backlog of equal
    // batches had every update rewritten about n / max_runs times instead of log n / log
    // max_runs.
    std::optional<std::pair<int, int>> best;
    double best_cost = 0;
    for (int a = window->first; a < window->second; ++a) {
      size_t runs = runs_in(state.batches(a));
      uint64_t bytes = bytes_in(state.batches(a));
      for (int b = a + 1; b <= window->second; ++b) {
        runs += runs_in(state.batches(b));
        bytes += bytes_in(state.batches(b));
        if (runs > max_runs) break;
        const double cost = static_cast<double>(bytes) / static_cast<double>(b - a);
        if (!best || cost < best_cost) {
          best = {a, b};
          best_cost = cost;
        }
      }
    }
    if (best) {
      std::tie(plan.first, plan.last) = *best;
    } else {
      plan.first = plan.last = window->second;  // No two fit one step: merge within one (below).
    }
  }
  const proto::ProtoBatch& single = state.batches(plan.first);
  if (plan.first == plan.last && runs_in(single) <= 1 &&
      !(full && frontier_of(single.since()) != since)) {
    // Rewriting one run would change nothing. The window had more runs than one step merges,
    // so one of its batches has several: merge within that one.
    int most = window->first;
    for (int i = window->first; i <= window->second; ++i) {
      if (runs_in(state.batches(i)) > runs_in(state.batches(most))) {
        most = i;
      }
    }
    if (runs_in(state.batches(most)) <= 1) {
      return std::nullopt;
    }
    plan.first = plan.last = most;
  }
  for (int i = plan.first; i <= plan.last; ++i) {
    for (std::vector<PartRef>& run : runs_of(state.batches(i))) {
      plan.inputs.push_back(std::move(run));
    }
  }
  if (plan.inputs.size() > max_runs) {
    // One batch with too many runs: merge its smallest runs first, like Huffman coding, so each
    // update is rewritten few times.
    std::stable_sort(plan.inputs.begin(), plan.inputs.end(),
                     [](const auto& a, const auto& b) { return bytes_in(a) < bytes_in(b); });
    plan.kept.assign(std::make_move_iterator(plan.inputs.begin() + static_cast<long>(max_runs)),
                     std::make_move_iterator(plan.inputs.end()));
    plan.inputs.resize(max_runs);
  }
  return plan;
}

// Merges `inputs` into one run, times advanced to `since`, consolidated.
absl::StatusOr<std::vector<PartRef>> merge_runs(const Shard& shard, WriterCore& writer,
                                                std::vector<std::vector<PartRef>> inputs,
                                                Frontier since) {
  ClientCore& core = shard.core();
  const PersistConfig& config = core.config();
  std::vector<RunCursor> cursors;
  cursors.reserve(inputs.size());
  const PartFetcher fetcher = shard.part_fetcher();
  for (std::vector<PartRef>& run : inputs) {
    cursors.emplace_back(core.pool(), fetcher, std::move(run));
  }
  RunMerger merger(std::move(cursors));
  PartUploader uploader(core.pool(), core.blob(), config.max_parts_in_flight);
  Columns columns;
  std::vector<std::pair<uint64_t, int64_t>> entries;
  const auto flush = [&]() -> absl::Status {
    WEIR_RETURN_IF_ERROR(writer.maybe_heartbeat());
    std::string key = shard.new_part_key(writer.writer_id());
    return uploader.upload(
        key, [columns = std::exchange(columns, {}), blob = core.blob(), shard_id = shard.id().str(),
              key, level = config.zstd_level]() mutable {
          return write_part(*blob, shard_id, key, columns, level);
        });
  };
  absl::Status status;
  const auto collect = [&](uint64_t time, int64_t diff) {
    entries.emplace_back(since.is_empty() ? time : std::max(time, since.time()), diff);
  };
  while (status.ok() && (entries.clear(), merger.next_key(collect))) {
    std::sort(entries.begin(), entries.end());
    for (size_t i = 0; i < entries.size();) {
      int64_t diff = 0;
      size_t j = i;
      for (; j < entries.size() && entries[j].first == entries[i].first; ++j) {
        diff = static_cast<int64_t>(static_cast<uint64_t>(diff) +
                                    static_cast<uint64_t>(entries[j].second));
      }
      if (diff != 0) {
        columns.append(merger.key(), entries[i].first, diff);
      }
      i = j;
    }
    if (columns.update_bytes() >= config.part_target_bytes) {
      status = flush();
    }
  }
  if (status.ok()) {
    status = merger.status();
  }
  if (status.ok() && !columns.empty()) {
    status = flush();
  }
  absl::StatusOr<std::vector<WrittenPart>> parts =
      status.ok() ? uploader.finish() : absl::StatusOr<std::vector<WrittenPart>>(status);
  if (!parts.ok()) {
    uploader.discard().IgnoreError();
    return parts.status();
  }
  std::vector<PartRef> refs;
  for (WrittenPart& part : *parts) {
    refs.push_back(std::move(part.ref));
  }
  return refs;
}

enum class StepOutcome {
  kMore,  // Look for another step.
  kDone,  // Nothing (more) to do.
};

// One compaction step on the latest state. It re-reads the state first, so it may run again
// after any failure, an indeterminate one included: what a lost write did is then in the state.
absl::StatusOr<StepOutcome> compaction_step(const Shard& shard, ReaderCore& reader,
                                            WriterCore& writer, const CompactionOptions& options,
                                            bool first, CompactionResult& result) {
  const PersistConfig& config = shard.core().config();
  WEIR_ASSIGN_OR_RETURN(auto read, reader.state_for_read());
  auto& [state, hold] = read;
  if (first) {
    result.batches_before = static_cast<size_t>(state.proto.batches_size());
  }
  result.batches_after = static_cast<size_t>(state.proto.batches_size());
  if (proto::ProtoShardState probe = state.proto; coalesce_empty_batches(probe)) {
    // A pure function of the state: redo it on whatever state the CaS meets.
    WEIR_ASSIGN_OR_RETURN(
        ShardState coalesced, shard.apply(std::move(state), [](proto::ProtoShardState& s) {
          return coalesce_empty_batches(s) ? Shard::Step::kWrite : Shard::Step::kKeep;
        }));
    result.batches_after = static_cast<size_t>(coalesced.proto.batches_size());
    return StepOutcome::kMore;
  }
  std::optional<MergePlan> plan = plan_merge(state.proto, options.full, config.compaction_max_runs);
  if (!plan) {
    return StepOutcome::kDone;
  }
  const Frontier since = frontier_of(state.proto.since());
  WEIR_ASSIGN_OR_RETURN(std::vector<PartRef> merged,
                        merge_runs(shard, writer, plan->inputs, since));
  Batch output;
  output.shard_id = shard.id();
  output.writer_id = writer.writer_id();
  output.description = {frontier_of(state.proto.batches(plan->first).lower()),
                        frontier_of(state.proto.batches(plan->last).upper()), since};
  output.parts = std::move(merged);
  for (std::vector<PartRef>& run : plan->kept) {
    if (!output.parts.empty()) {
      output.run_starts.push_back(static_cast<uint32_t>(output.parts.size()));
    }
    std::move(run.begin(), run.end(), std::back_inserter(output.parts));
  }
  std::vector<std::string> originals;
  for (int i = plan->first; i <= plan->last; ++i) {
    originals.push_back(state.proto.batches(i).SerializeAsString());
  }
  bool replaced = false;
  const auto change = [&](proto::ProtoShardState& s) -> absl::StatusOr<Shard::Step> {
    replaced = false;
    WEIR_RETURN_IF_ERROR(writer.check_registered(s));
    // The batches merged must still be there, unchanged (appends only add newer ones).
    int at = -1;
    for (int i = 0; i + static_cast<int>(originals.size()) <= s.batches_size(); ++i) {
      if (s.batches(i).SerializeAsString() == originals.front()) {
        at = i;
        break;
      }
    }
    if (at < 0) {
      return Shard::Step::kKeep;
    }
    for (size_t j = 1; j < originals.size(); ++j) {
      if (s.batches(at + static_cast<int>(j)).SerializeAsString() != originals[j]) {
        return Shard::Step::kKeep;
      }
    }
    google::protobuf::RepeatedPtrField<proto::ProtoBatch> batches;
    for (int i = 0; i < s.batches_size(); ++i) {
      if (i == at) {
        to_proto(output, batches.Add());
      } else if (i < at || i >= at + static_cast<int>(originals.size())) {
        *batches.Add() = s.batches(i);
      }
    }
    s.mutable_batches()->Swap(&batches);
    replaced = true;
    return Shard::Step::kWrite;
  };
  // After an error the new state may or may not have been written, so the parts stay; GC
  // removes them once this compaction's writer is gone if they are not in the shard.
  WEIR_ASSIGN_OR_RETURN(ShardState applied, shard.apply(state, change));
  if (!replaced) {
    // Someone else changed those batches: our parts were never referenced.
    for (const PartRef& part : output.parts) {
      if (writer_of_key(part.key) == writer.writer_id()) {
        shard.core().blob()->remove(part.key).IgnoreError();
      }
    }
    return StepOutcome::kMore;
  }
  ++result.merges;
  for (const std::vector<PartRef>& run : plan->inputs) {
    result.bytes_merged += bytes_in(run);
  }
  result.batches_after = static_cast<size_t>(applied.proto.batches_size());
  return StepOutcome::kMore;
}

// Compaction steps between two releases of the versions its reader holds.
constexpr size_t kStepsPerRelease = 4;

// Runs compaction steps until the plan says there is nothing to do. A step that fails for a
// transient store error is retried: at a few percent of failed store calls, a compaction of many
// steps would otherwise almost never get to its end.
absl::Status run_compaction(const Shard& shard, ReaderCore& reader, WriterCore& writer,
                            const CompactionOptions& options, CompactionResult& result) {
  constexpr size_t kMaxSteps = 10'000;
  const size_t steps = options.max_steps == 0 ? kMaxSteps : std::min(options.max_steps, kMaxSteps);
  for (size_t step = 0; step < steps; ++step) {
    WEIR_ASSIGN_OR_RETURN(StepOutcome outcome, retry_unavailable(kStepAttempts, [&] {
                            return compaction_step(shard, reader, writer, options, step == 0,
                                                   result);
                          }));
    if (outcome == StepOutcome::kDone) {
      result.settled = true;
      return absl::OkStatus();
    }
    if (step % kStepsPerRelease == kStepsPerRelease - 1) {
      // Let go of the versions the steps so far read (none is in use between steps). The
      // reader's hold would otherwise stay at the compaction's start until its lease needs
      // renewing, and a compaction that appends keep busy would keep GC from truncating, or
      // removing anything compacted, all that time. A failure only delays that.
      retry_unavailable(kStoreAttempts, [&] { return reader.heartbeat(); }).IgnoreError();
    }
  }
  result.settled = false;
  if (options.max_steps != 0 && options.max_steps <= kMaxSteps) {
    return absl::OkStatus();  // The caller asked for a bounded turn.
  }
  return absl::InternalError(internal::str_cat(shard.label(), ": compaction did not settle"));
}

}  // namespace
}  // namespace internal

absl::StatusOr<CompactionResult> PersistClient::compact(std::string_view name,
                                                        const CompactionOptions& options) {
  WEIR_ASSIGN_OR_RETURN(std::optional<ShardId> id, core_->find_shard(name));
  if (!id) {
    return absl::NotFoundError(internal::str_cat("no shard named \"", name, "\""));
  }
  internal::Shard shard(core_, *id, std::string(name));
  // The reader holds the versions whose parts we read; the writer's lease protects the parts we
  // write until they are in the state.
  WEIR_ASSIGN_OR_RETURN(std::shared_ptr<internal::ReaderCore> reader,
                        internal::ReaderCore::open(shard, "compaction", options.fence));
  absl::StatusOr<std::shared_ptr<internal::WriterCore>> writer =
      internal::WriterCore::open(shard, "compaction", options.fence);
  CompactionResult result;
  absl::Status status = writer.ok()
                            ? internal::run_compaction(shard, *reader, **writer, options, result)
                            : writer.status();
  // Retried: a compaction reader left registered holds the since and consensus versions back for
  // its whole lease.
  if (writer.ok()) {
    status.Update(
        internal::retry_unavailable(internal::kStoreAttempts, [&] { return (*writer)->expire(); }));
  }
  status.Update(
      internal::retry_unavailable(internal::kStoreAttempts, [&] { return reader->expire(); }));
  WEIR_RETURN_IF_ERROR(status);
  return result;
}

absl::StatusOr<GcResult> PersistClient::gc(std::string_view name) {
  using internal::Shard;
  using internal::proto::ProtoShardState;
  WEIR_ASSIGN_OR_RETURN(std::optional<ShardId> id, core_->find_shard(name));
  if (!id) {
    return absl::NotFoundError(internal::str_cat("no shard named \"", name, "\""));
  }
  const Shard shard(core_, *id, std::string(name));
  GcResult result;
  // Every store call below is retried while it fails transiently: each is a read, or a write that
  // may safely happen twice (expiring lapsed leases, truncating), and a GC that gives up at the
  // first of them would, at a few percent of failed calls, seldom reach the truncation.
  using internal::kStoreAttempts;
  using internal::retry_unavailable;
  WEIR_ASSIGN_OR_RETURN(internal::ShardState state,
                        retry_unavailable(kStoreAttempts, [&] { return shard.fetch(); }));
  if (state.seqno == 0) {
    return result;
  }

  // 1. Expire the writers and leased readers whose lease ran out. A writer is removed from the
  // state before its parts are: once removed, it can no longer append them.
  const int64_t now = core_->now_ms();
  const auto expire_lapsed = [&](ProtoShardState& s) {
    result.expired_writers = 0;
    result.expired_readers = 0;
    auto* writers = s.mutable_writers();
    for (int i = writers->size() - 1; i >= 0; --i) {
      if (writers->Get(i).last_heartbeat_ms() + writers->Get(i).lease_duration_ms() < now) {
        writers->DeleteSubrange(i, 1);
        ++result.expired_writers;
      }
    }
    auto* readers = s.mutable_leased_readers();
    for (int i = readers->size() - 1; i >= 0; --i) {
      if (readers->Get(i).last_heartbeat_ms() + readers->Get(i).lease_duration_ms() < now) {
        readers->DeleteSubrange(i, 1);
        ++result.expired_readers;
      }
    }
    internal::recompute_since(s);
    return result.expired_writers + result.expired_readers > 0 ? Shard::Step::kWrite
                                                               : Shard::Step::kKeep;
  };
  WEIR_ASSIGN_OR_RETURN(
      state, retry_unavailable(kStoreAttempts, [&]() -> absl::StatusOr<internal::ShardState> {
        if (state.seqno == 0) {  // A retry: learn what the failed attempt did.
          WEIR_ASSIGN_OR_RETURN(state, shard.fetch());
        }
        internal::ShardState current = std::exchange(state, {});
        return shard.apply(std::move(current), expire_lapsed);
      }));

  // 2. List the blobs before reading the state they are checked against: a writer registers
  // before it uploads, so the owner of every listed blob is either in that state or gone.
  WEIR_ASSIGN_OR_RETURN(std::vector<BlobMetadata> blobs, retry_unavailable(kStoreAttempts, [&] {
                          return core_->blob()->list_keys(internal::str_cat(id->str(), "/"));
                        }));
  WEIR_ASSIGN_OR_RETURN(internal::ShardState head,
                        retry_unavailable(kStoreAttempts, [&] { return shard.fetch(); }));
  uint64_t seqno_since = head.seqno;
  for (const auto& reader : head.proto.leased_readers()) {
    seqno_since = std::min(seqno_since, reader.seqno());
  }

  // 3. Blobs referenced by a version a reader may still read are live. Blobs referenced only by
  // older versions were appended and then compacted away: nothing can append them again.
  absl::flat_hash_set<std::string> live;
  absl::flat_hash_set<std::string> retired;
  std::optional<uint64_t> oldest;
  constexpr size_t kPage = 64;
  for (uint64_t from = 0;;) {
    WEIR_ASSIGN_OR_RETURN(std::vector<VersionedData> versions,
                          retry_unavailable(kStoreAttempts, [&] {
                            return core_->consensus().scan(id->str(), from, kPage);
                          }));
    result.versions_scanned += versions.size();
    for (const VersionedData& version : versions) {
      WEIR_ASSIGN_OR_RETURN(ProtoShardState s,
                            internal::decode_state(shard.label(), id->str(), version));
      oldest = oldest.value_or(version.seqno);
      auto& into = version.seqno >= seqno_since ? live : retired;
      for (const auto& batch : s.batches()) {
        for (const auto& part : batch.parts()) {
          into.insert(part.key());
        }
      }
    }
    if (versions.size() < kPage) {
      break;
    }
    from = versions.back().seqno + 1;
  }
  absl::flat_hash_set<std::string_view> writers;
  for (const auto& writer : head.proto.writers()) {
    writers.insert(writer.writer_id());
  }

  // 4. Remove what no retained version needs and no live writer may still append. A blob that
  // cannot be removed (a store error, a file under the shard's prefix that is no valid key) is
  // reported and skipped: it must not keep the others, or the truncation, from happening.
  for (const BlobMetadata& blob : blobs) {
    if (live.contains(blob.key)) {
      continue;
    }
    if (retired.contains(blob.key) || !writers.contains(internal::writer_of_key(blob.key))) {
      if (absl::Status removed = core_->blob()->remove(blob.key); !removed.ok()) {
        if (result.failures.size() < GcResult::kMaxFailuresListed) {
          result.failures.push_back(internal::str_cat(blob.key, ": ", removed.message()));
        }
        ++result.blobs_failed;
        continue;
      }
      ++result.blobs_deleted;
      result.bytes_deleted += blob.size_bytes;
    }
  }

  // 5. Only now drop the versions: until then a crash leaves them to be collected again. A blob
  // that failed above is no longer named by a retained version once they are gone; it is removed
  // by a later run once its writer is gone (an unreferenced blob of a gone writer always is).
  if (oldest && *oldest < seqno_since) {
    WEIR_ASSIGN_OR_RETURN(result.versions_truncated, retry_unavailable(kStoreAttempts, [&] {
                            return core_->consensus().truncate(id->str(), seqno_since);
                          }));
  }
  return result;
}

}  // namespace weir::persist
