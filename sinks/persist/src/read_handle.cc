#include "weir/sinks/persist/read_handle.h"

#include <mutex>

#include "handles.h"
#include "str_cat.h"

#include "weir/status.h"

namespace weir::persist {
namespace internal {
namespace {

int64_t add_diffs(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

absl::Status expired_error(const Shard& shard, const std::string& reader_id) {
  return absl::FailedPreconditionError(
      internal::str_cat(shard.label(), ": reader ", reader_id, " has expired"));
}

}  // namespace

SeqnoHold& SeqnoHold::operator=(SeqnoHold&& other) noexcept {
  if (this != &other) {
    release();
    reader_ = std::move(other.reader_);
    seqno_ = other.seqno_;
  }
  return *this;
}

void SeqnoHold::release() {
  if (reader_ != nullptr) {
    reader_->release_seqno(seqno_);
    reader_ = nullptr;
  }
}

absl::StatusOr<std::shared_ptr<ReaderCore>> ReaderCore::open(Shard shard, std::string purpose) {
  std::shared_ptr<ReaderCore> reader(new ReaderCore(std::move(shard), random_id('r')));
  const Shard& s = reader->shard_;
  std::lock_guard lock(reader->mu_);
  WEIR_ASSIGN_OR_RETURN(ShardState current, s.fetch());
  const int64_t now = s.core().now_ms();
  WEIR_ASSIGN_OR_RETURN(
      reader->state_, s.apply(std::move(current), [&](proto::ProtoShardState& state) {
        proto::ProtoLeasedReader* entry = find_leased_reader(state, reader->reader_id_);
        if (entry == nullptr) {
          entry = state.add_leased_readers();
          entry->set_reader_id(reader->reader_id_);
          entry->set_purpose(purpose);
        }
        *entry->mutable_since() = state.since();
        entry->set_seqno(state.seqno() + 1);
        entry->set_last_heartbeat_ms(now);
        entry->set_lease_duration_ms(absl::ToInt64Milliseconds(s.core().config().reader_lease));
        return Shard::Step::kWrite;
      }));
  reader->since_ = frontier_of(reader->state_.proto.since());
  reader->last_heartbeat_ms_ = now;
  return reader;
}

Frontier ReaderCore::since() const {
  std::lock_guard lock(mu_);
  return since_;
}

absl::StatusOr<std::pair<ShardState, SeqnoHold>> ReaderCore::state_for_read() {
  std::lock_guard lock(mu_);
  WEIR_ASSIGN_OR_RETURN(ShardState latest, shard_.fetch());
  if (latest.seqno > state_.seqno) {
    state_ = std::move(latest);
  }
  if (find_leased_reader(state_.proto, reader_id_) == nullptr) {
    return expired_error(shard_, reader_id_);
  }
  const int64_t lease_ms = absl::ToInt64Milliseconds(shard_.core().config().reader_lease);
  if (shard_.core().now_ms() - last_heartbeat_ms_ >= lease_ms / 4) {
    WEIR_RETURN_IF_ERROR(update([](proto::ProtoLeasedReader&) {}));
  }
  seqnos_in_use_.insert(state_.seqno);
  return std::pair{state_, SeqnoHold(shared_from_this(), state_.seqno)};
}

absl::Status ReaderCore::update(absl::FunctionRef<void(proto::ProtoLeasedReader&)> change) {
  const int64_t now = shard_.core().now_ms();
  Frontier since;
  WEIR_ASSIGN_OR_RETURN(
      state_,
      shard_.apply(state_, [&](proto::ProtoShardState& state) -> absl::StatusOr<Shard::Step> {
        proto::ProtoLeasedReader* entry = find_leased_reader(state, reader_id_);
        if (entry == nullptr) {
          return expired_error(shard_, reader_id_);
        }
        change(*entry);
        entry->set_last_heartbeat_ms(now);
        // Versions older than the oldest one a read of ours still uses may go.
        uint64_t hold = state.seqno() + 1;
        if (!seqnos_in_use_.empty()) {
          hold = std::min(hold, *seqnos_in_use_.begin());
        }
        entry->set_seqno(std::max(entry->seqno(), hold));
        since = frontier_of(entry->since());
        recompute_since(state);
        return Shard::Step::kWrite;
      }));
  since_ = since;
  last_heartbeat_ms_ = now;
  return absl::OkStatus();
}

absl::Status ReaderCore::downgrade_since(Frontier new_since) {
  std::lock_guard lock(mu_);
  return update([&](proto::ProtoLeasedReader& entry) {
    if (frontier_of(entry.since()) < new_since) {
      to_proto(new_since, entry.mutable_since());
    }
  });
}

absl::Status ReaderCore::heartbeat() {
  std::lock_guard lock(mu_);
  return update([](proto::ProtoLeasedReader&) {});
}

absl::Status ReaderCore::expire() {
  std::lock_guard lock(mu_);
  WEIR_ASSIGN_OR_RETURN(ShardState latest, shard_.fetch());
  WEIR_ASSIGN_OR_RETURN(state_, shard_.apply(std::move(latest), [&](proto::ProtoShardState& state) {
    auto* readers = state.mutable_leased_readers();
    for (int i = 0; i < readers->size(); ++i) {
      if (readers->Get(i).reader_id() == reader_id_) {
        readers->DeleteSubrange(i, 1);
        recompute_since(state);
        return Shard::Step::kWrite;
      }
    }
    return Shard::Step::kKeep;
  }));
  return absl::OkStatus();
}

void ReaderCore::release_seqno(uint64_t seqno) {
  std::lock_guard lock(mu_);
  auto it = seqnos_in_use_.find(seqno);
  if (it != seqnos_in_use_.end()) {
    seqnos_in_use_.erase(it);
  }
}

absl::Status check_readable(const Shard& shard, const proto::ProtoShardState& state,
                            uint64_t as_of) {
  const Frontier since = frontier_of(state.since());
  const Frontier upper = frontier_of(state.upper());
  if (!since.less_equal(as_of)) {
    return absl::FailedPreconditionError(internal::str_cat(
        shard.label(), ": cannot read at ", as_of, ": it is before the since ", since.to_string()));
  }
  if (upper.less_equal(as_of)) {
    return absl::FailedPreconditionError(
        internal::str_cat(shard.label(), ": cannot read at ", as_of,
                          ": it is not final, the upper is ", upper.to_string()));
  }
  return absl::OkStatus();
}

namespace {

// Parts fetched ahead by a snapshot, spread over its runs (at least one per run): with few runs,
// several parts decode at once while the merge reads.
constexpr size_t kSnapshotPrefetchParts = 4;

std::vector<RunCursor> snapshot_runs(const Shard& shard, const proto::ProtoShardState& state,
                                     uint64_t as_of) {
  std::vector<std::vector<PartRef>> runs;
  for (const proto::ProtoBatch& batch : state.batches()) {
    if (!frontier_of(batch.lower()).less_equal(as_of)) {
      break;  // This batch and the later ones hold only times after as_of.
    }
    for (std::vector<PartRef>& run : runs_of(batch)) {
      runs.push_back(std::move(run));
    }
  }
  const size_t depth = kSnapshotPrefetchParts / std::max<size_t>(1, runs.size());
  std::vector<RunCursor> cursors;
  const PartFetcher fetcher = shard.part_fetcher();
  for (std::vector<PartRef>& run : runs) {
    cursors.emplace_back(shard.core().pool(), fetcher, std::move(run), depth);
  }
  return cursors;
}

}  // namespace

SnapshotCursorImpl::SnapshotCursorImpl(const Shard& shard, const proto::ProtoShardState& state,
                                       uint64_t as_of, SeqnoHold hold)
    : as_of_(as_of), hold_(std::move(hold)), merger_(snapshot_runs(shard, state, as_of)) {}

bool SnapshotCursorImpl::next() {
  int64_t sum;
  const auto add = [&](uint64_t time, int64_t diff) {
    if (time <= as_of_) {
      sum = add_diffs(sum, diff);
    }
  };
  while ((sum = 0, merger_.next_key(add))) {
    if (sum != 0) {
      diff_ = sum;
      update_bytes_ += persist::update_bytes(merger_.key());
      return true;
    }
  }
  hold_.release();
  return false;
}

absl::StatusOr<std::optional<ListenEvent>> ListenImpl::next() {
  const Shard& shard = reader_->shard();
  if (!batch_) {
    if (frontier_.is_empty()) {
      return std::nullopt;
    }
    WEIR_ASSIGN_OR_RETURN(auto read, reader_->state_for_read());
    auto& [state, hold] = read;
    if (!(frontier_ < frontier_of(state.proto.upper()))) {
      return std::nullopt;
    }
    const uint64_t f = frontier_.time();
    for (const proto::ProtoBatch& batch : state.proto.batches()) {
      if (!frontier_of(batch.upper()).less_equal(f)) {
        batch_ = batch;
        break;
      }
    }
    if (!batch_) {
      return absl::DataLossError(
          internal::str_cat(shard.label(), ": no batch holds time ", f, " below the upper"));
    }
    // Compaction advances times before the batch's since to it. If it did that to times we
    // already yielded, and moved them to or past our frontier, we would yield them again.
    const Frontier since = frontier_of(batch_->since());
    if (frontier_of(batch_->lower()).less_than(f) && !since.less_than(f)) {
      const Frontier lower = frontier_of(batch_->lower());
      batch_.reset();
      return absl::FailedPreconditionError(internal::str_cat(
          shard.label(), ": the listen at frontier ", f, " cannot continue: batch starting at ",
          lower.to_string(), " was compacted to since ", since.to_string(),
          "; keep the reader's since at or before the listen's frontier - 1"));
    }
    next_part_ = 0;
    hold_ = std::move(hold);
  }
  ListenEvent event;
  if (next_part_ < batch_->parts_size()) {
    const proto::ProtoPartRef& ref = batch_->parts(next_part_);
    WEIR_ASSIGN_OR_RETURN(std::shared_ptr<const DecodedPart> part,
                          shard.part_fetcher()(PartRef{ref.key(), ref.encoded_bytes(),
                                                       ref.num_updates(), ref.update_bytes()}));
    ++next_part_;
    const uint64_t f = frontier_.time();
    for (size_t i = 0; i < part->size(); ++i) {
      if (part->time(i) >= f) {
        event.updates.push_back({std::string(part->data(i)), part->time(i), part->diff(i)});
      }
    }
  }
  if (next_part_ >= batch_->parts_size()) {
    frontier_ = frontier_of(batch_->upper());
    batch_.reset();
    hold_.release();
  }
  event.progress = frontier_;
  return event;
}

}  // namespace internal

SnapshotCursor::SnapshotCursor(std::unique_ptr<internal::SnapshotCursorImpl> impl)
    : impl_(std::move(impl)) {}
SnapshotCursor::SnapshotCursor(SnapshotCursor&&) noexcept = default;
SnapshotCursor& SnapshotCursor::operator=(SnapshotCursor&&) noexcept = default;
SnapshotCursor::~SnapshotCursor() = default;

bool SnapshotCursor::next() { return impl_->next(); }
absl::Status SnapshotCursor::status() const { return impl_->status(); }
std::string_view SnapshotCursor::data() const { return impl_->data(); }
uint64_t SnapshotCursor::time() const { return impl_->time(); }
int64_t SnapshotCursor::diff() const { return impl_->diff(); }
uint64_t SnapshotCursor::update_bytes() const { return impl_->update_bytes(); }

Listen::Listen(std::unique_ptr<internal::ListenImpl> impl) : impl_(std::move(impl)) {}
Listen::Listen(Listen&&) noexcept = default;
Listen& Listen::operator=(Listen&&) noexcept = default;
Listen::~Listen() = default;

absl::StatusOr<std::optional<ListenEvent>> Listen::next() { return impl_->next(); }
Frontier Listen::frontier() const { return impl_->frontier(); }

ReadHandle::ReadHandle(std::shared_ptr<internal::ReaderCore> core) : core_(std::move(core)) {}
ReadHandle::ReadHandle(ReadHandle&&) noexcept = default;
ReadHandle& ReadHandle::operator=(ReadHandle&&) noexcept = default;
ReadHandle::~ReadHandle() = default;

const ShardId& ReadHandle::shard_id() const { return core_->shard().id(); }
const std::string& ReadHandle::reader_id() const { return core_->reader_id(); }
Frontier ReadHandle::since() const { return core_->since(); }

absl::Status ReadHandle::downgrade_since(Frontier new_since) {
  return core_->downgrade_since(new_since);
}

absl::StatusOr<std::vector<Update>> ReadHandle::snapshot(uint64_t as_of) {
  WEIR_ASSIGN_OR_RETURN(SnapshotCursor cursor, snapshot_cursor(as_of));
  std::vector<Update> updates;
  while (cursor.next()) {
    updates.push_back({std::string(cursor.data()), cursor.time(), cursor.diff()});
  }
  WEIR_RETURN_IF_ERROR(cursor.status());
  return updates;
}

absl::StatusOr<SnapshotCursor> ReadHandle::snapshot_cursor(uint64_t as_of) {
  WEIR_ASSIGN_OR_RETURN(auto read, core_->state_for_read());
  auto& [state, hold] = read;
  WEIR_RETURN_IF_ERROR(internal::check_readable(core_->shard(), state.proto, as_of));
  return SnapshotCursor(std::make_unique<internal::SnapshotCursorImpl>(core_->shard(), state.proto,
                                                                       as_of, std::move(hold)));
}

absl::StatusOr<Listen> ReadHandle::listen(uint64_t as_of) {
  WEIR_ASSIGN_OR_RETURN(auto read, core_->state_for_read());
  const Frontier since = internal::frontier_of(read.first.proto.since());
  if (!since.less_equal(as_of)) {
    return absl::FailedPreconditionError(
        internal::str_cat(core_->shard().label(), ": cannot listen at ", as_of,
                          ": it is before the since ", since.to_string()));
  }
  const Frontier start = as_of == UINT64_MAX ? Frontier::empty() : Frontier(as_of + 1);
  return Listen(std::make_unique<internal::ListenImpl>(core_, start));
}

absl::StatusOr<Frontier> ReadHandle::fetch_recent_upper() {
  WEIR_ASSIGN_OR_RETURN(internal::ShardState state, core_->shard().fetch());
  return internal::frontier_of(state.proto.upper());
}

absl::Status ReadHandle::heartbeat() { return core_->heartbeat(); }
absl::Status ReadHandle::expire() { return core_->expire(); }

}  // namespace weir::persist
