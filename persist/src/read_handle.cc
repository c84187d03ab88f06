#include "weir/persist/read_handle.h"

#include "handles.h"
#include "str_cat.h"

#include "weir/mutex.h"
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

absl::Status SeqnoHold::keep_alive() {
  return reader_ == nullptr ? absl::OkStatus() : reader_->maybe_heartbeat();
}

absl::Status SeqnoHold::explain(absl::Status status) const {
  return reader_ == nullptr ? status : reader_->explain(std::move(status));
}

absl::StatusOr<std::shared_ptr<ReaderCore>> ReaderCore::open(Shard shard, std::string purpose,
                                                             const Fence& fence) {
  std::shared_ptr<ReaderCore> reader(new ReaderCore(std::move(shard), random_id('r'), fence.epoch));
  const Shard& s = reader->shard_;
  weir::MutexLock lock(reader->mu_);
  const int64_t now = s.core().now_ms();
  const auto change = [&](proto::ProtoShardState& state) -> absl::StatusOr<Shard::Step> {
    WEIR_RETURN_IF_ERROR(
        check_or_raise_fence(
            s, state, internal::str_cat("reader ", reader->reader_id_, " (\"", purpose, "\")"),
            fence, /*raise=*/false)
            .status());
    proto::ProtoLeasedReader* entry = find_leased_reader(state, reader->reader_id_);
    if (entry == nullptr) {
      entry = state.add_leased_readers();
      entry->set_reader_id(reader->reader_id_);
      entry->set_purpose(as_utf8(purpose));
      entry->set_fence_epoch(fence.epoch);
    }
    *entry->mutable_since() = state.since();
    entry->set_seqno(state.seqno() + 1);
    entry->set_last_heartbeat_ms(now);
    entry->set_lease_duration_ms(absl::ToInt64Milliseconds(s.core().config().reader_lease));
    return Shard::Step::kWrite;
  };
  // Retried here, by the same id: a caller's retry after a lost reply would register a second
  // reader and leave the first one holding the since back for its whole lease.
  WEIR_ASSIGN_OR_RETURN(reader->state_,
                        retry_unavailable(kStoreAttempts, [&]() -> absl::StatusOr<ShardState> {
                          WEIR_ASSIGN_OR_RETURN(ShardState current, s.fetch());
                          return s.apply(std::move(current), change);
                        }));
  reader->since_ = frontier_of(reader->state_.proto.since());
  reader->last_heartbeat_ms_ = now;
  return reader;
}

absl::Status ReaderCore::check_registered(const proto::ProtoShardState& state) const {
  if (fenced_out(state, fence_epoch_)) {
    return fenced_error(shard_, state, internal::str_cat("reader ", reader_id_), fence_epoch_);
  }
  for (const proto::ProtoLeasedReader& reader : state.leased_readers()) {
    if (reader.reader_id() == reader_id_) return absl::OkStatus();
  }
  return expired_error(shard_, reader_id_);
}

absl::Status ReaderCore::explain(absl::Status status) const {
  if (status.code() != absl::StatusCode::kNotFound) {
    return status;
  }
  absl::StatusOr<ShardState> latest = shard_.fetch();
  if (!latest.ok()) {
    return status;
  }
  absl::Status gone = check_registered(latest->proto);
  if (gone.ok()) {
    return status;
  }
  absl::Status explained(gone.code(), internal::str_cat(gone.message(),
                                                        " (so a part the read still "
                                                        "needed was removed: ",
                                                        status.message(), ")"));
  gone.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    explained.SetPayload(url, payload);
  });
  return explained;
}

Frontier ReaderCore::since() const {
  weir::MutexLock lock(mu_);
  return since_;
}

absl::StatusOr<std::pair<ShardState, SeqnoHold>> ReaderCore::state_for_read() {
  weir::MutexLock lock(mu_);
  WEIR_ASSIGN_OR_RETURN(ShardState latest, shard_.fetch());
  if (latest.seqno > state_.seqno) {
    state_ = std::move(latest);
  }
  WEIR_RETURN_IF_ERROR(check_registered(state_.proto));
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
        mu_.assert_held();  // apply calls this synchronously, within update.
        WEIR_RETURN_IF_ERROR(check_registered(state));
        proto::ProtoLeasedReader* entry = find_leased_reader(state, reader_id_);
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
  weir::MutexLock lock(mu_);
  return update([&](proto::ProtoLeasedReader& entry) {
    if (frontier_of(entry.since()) < new_since) {
      to_proto(new_since, entry.mutable_since());
    }
  });
}

absl::Status ReaderCore::heartbeat() {
  weir::MutexLock lock(mu_);
  return update([](proto::ProtoLeasedReader&) {});
}

absl::Status ReaderCore::maybe_heartbeat() {
  weir::MutexLock lock(mu_);
  const int64_t lease_ms = absl::ToInt64Milliseconds(shard_.core().config().reader_lease);
  if (shard_.core().now_ms() - last_heartbeat_ms_ < lease_ms / 4) return absl::OkStatus();
  return retry_unavailable(kStoreAttempts, [&] {
    mu_.assert_held();  // Called synchronously, with mu_ held.
    return update([](proto::ProtoLeasedReader&) {});
  });
}

absl::Status ReaderCore::expire() {
  weir::MutexLock lock(mu_);
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
  weir::MutexLock lock(mu_);
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
  cursors.reserve(runs.size());
  for (std::vector<PartRef>& run : runs) {
    cursors.emplace_back(shard.core().pool(), fetcher, std::move(run), depth);
  }
  return cursors;
}

}  // namespace

ConsolidatedRuns::ConsolidatedRuns(std::vector<RunCursor> runs, uint64_t as_of)
    : merger_(std::move(runs)), as_of_(as_of) {}

bool ConsolidatedRuns::next() {
  int64_t sum;
  const auto add = [&](uint64_t time, int64_t diff) {
    if (time <= as_of_) {
      sum = add_diffs(sum, diff);
    }
  };
  while ((sum = 0, merger_.next_key(add))) {
    if (sum != 0) {
      diff_ = sum;
      return true;
    }
  }
  return false;
}

namespace {

// Updates of a block of BackgroundRuns: big enough that the queue's lock is rare, small enough to
// stay in cache between the two threads.
constexpr size_t kBlockBytes = 256 << 10;
// Blocks the background thread may be ahead of the reader.
constexpr size_t kMaxReadyBlocks = 4;

}  // namespace

BackgroundRuns::BackgroundRuns(std::vector<RunCursor> runs, uint64_t as_of)
    : thread_([this, consolidated = ConsolidatedRuns(std::move(runs), as_of)]() mutable {
        produce(std::move(consolidated));
      }) {}

BackgroundRuns::~BackgroundRuns() {
  {
    weir::MutexLock lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void BackgroundRuns::produce(ConsolidatedRuns runs) {
  const auto fresh_block = [] {
    auto block = std::make_unique<Block>();
    block->bytes.reserve(kBlockBytes);
    return block;
  };
  std::unique_ptr<Block> block = fresh_block();
  // Hands `block` to the reader and takes an empty one; false if the reader has gone.
  const auto hand_over = [&] {
    {
      weir::MutexLock lock(mu_);
      while (!stop_ && ready_.size() >= kMaxReadyBlocks) {
        changed_.wait(mu_);
      }
      if (stop_) {
        return false;
      }
      ready_.push_back(std::move(block));
      block = nullptr;
      if (!spare_.empty()) {
        block = std::move(spare_.back());
        spare_.pop_back();
      }
      changed_.notify_all();
    }
    if (block == nullptr) {
      block = fresh_block();
    }
    block->bytes.clear();
    block->ends.clear();
    return true;
  };
  while (runs.next()) {
    block->bytes.append(runs.data());
    block->ends.emplace_back(block->bytes.size(), runs.diff());
    if (block->bytes.size() >= kBlockBytes && !hand_over()) {
      return;
    }
  }
  if (!block->ends.empty() && !hand_over()) {
    return;
  }
  weir::MutexLock lock(mu_);
  produced_ = true;
  produced_status_ = runs.status();
  changed_.notify_all();
}

bool BackgroundRuns::next() {
  if (block_ != nullptr && index_ < block_->ends.size()) {
    const size_t begin = index_ == 0 ? 0 : block_->ends[index_ - 1].first;
    data_ = std::string_view(block_->bytes).substr(begin, block_->ends[index_].first - begin);
    diff_ = block_->ends[index_].second;
    ++index_;
    return true;
  }
  {
    weir::MutexLock lock(mu_);
    while (ready_.empty() && !produced_) {
      changed_.wait(mu_);
    }
    if (ready_.empty()) {
      status_ = produced_status_;
      block_ = nullptr;
      return false;
    }
    if (block_ != nullptr) {
      spare_.push_back(std::move(block_));
    }
    block_ = std::move(ready_.front());
    ready_.pop_front();
  }
  changed_.notify_all();
  index_ = 0;
  return next();  // Blocks are never empty.
}

namespace {

// Runs merged in two halves, one on a thread of its own, from this many on, when there are cores
// for it.
constexpr size_t kMinRunsForTwoThreads = 8;

// Takes the first half of `runs` for a BackgroundRuns when there are enough of them and cores for
// a second thread; null otherwise. The first half's parts are fetched first (snapshot_runs starts
// them in order), so the background merge starts while the other half's are still being decoded.
std::unique_ptr<BackgroundRuns> split_off_background(std::vector<RunCursor>& runs, uint64_t as_of) {
  if (runs.size() < kMinRunsForTwoThreads || std::thread::hardware_concurrency() < 2) {
    return nullptr;
  }
  const auto half = runs.begin() + static_cast<long>(runs.size() / 2);
  std::vector<RunCursor> first(std::make_move_iterator(runs.begin()),
                               std::make_move_iterator(half));
  runs.erase(runs.begin(), half);
  return std::make_unique<BackgroundRuns>(std::move(first), as_of);
}

}  // namespace

SnapshotCursorImpl::SnapshotCursorImpl(const Shard& shard, const proto::ProtoShardState& state,
                                       uint64_t as_of, SeqnoHold hold)
    : SnapshotCursorImpl(snapshot_runs(shard, state, as_of), as_of, std::move(hold)) {}

SnapshotCursorImpl::SnapshotCursorImpl(std::vector<RunCursor> runs, uint64_t as_of, SeqnoHold hold)
    : as_of_(as_of),
      hold_(std::move(hold)),
      background_(split_off_background(runs, as_of)),
      local_(std::move(runs), as_of) {}

template <class Stream>
bool SnapshotCursorImpl::advance(Stream* stream, bool& live) {
  live = stream != nullptr && stream->next();
  if (!live && stream != nullptr && !stream->status().ok()) {
    status_ = hold_.explain(stream->status());
    return false;
  }
  return true;
}

namespace {

// a.compare(b), deciding most pairs on their first 8 bytes without a call.
int compare_data(std::string_view a, std::string_view b) {
  const uint64_t prefix_a = key_prefix(a);
  const uint64_t prefix_b = key_prefix(b);
  if (prefix_a != prefix_b) {
    return prefix_a < prefix_b ? -1 : 1;
  }
  return a.compare(b);
}

}  // namespace

bool SnapshotCursorImpl::next() {
  if (!status_.ok()) {
    return false;
  }
  if ((++steps_ & 1023) == 0) {
    // A store that is down for a moment is no reason to fail the read: the lease has 3/4 left.
    if (absl::Status alive = hold_.keep_alive();
        !alive.ok() && alive.code() != absl::StatusCode::kUnavailable) {
      status_ = std::move(alive);
      return false;
    }
  }
  // Move past the updates returned last time (or to the first ones); an update of one stream that
  // was not returned stays where it is.
  if ((consumed_local_ && !advance(&local_, local_live_)) ||
      (consumed_background_ && !advance(background_.get(), background_live_))) {
    return false;
  }
  consumed_local_ = false;
  consumed_background_ = false;
  while (local_live_ || background_live_) {
    int order = !background_live_ ? -1
                : !local_live_    ? 1
                                  : compare_data(local_.data(), background_->data());
    int64_t sum = 0;
    if (order <= 0) {
      sum = add_diffs(sum, local_.diff());
    }
    if (order >= 0) {
      sum = add_diffs(sum, background_->diff());
    }
    if (sum != 0) {
      data_ = order <= 0 ? local_.data() : background_->data();
      diff_ = sum;
      update_bytes_ += persist::update_bytes(data_);
      consumed_local_ = order <= 0;
      consumed_background_ = order >= 0;
      return true;
    }
    if ((order <= 0 && !advance(&local_, local_live_)) ||
        (order >= 0 && !advance(background_.get(), background_live_))) {
      return false;
    }
  }
  hold_.release();
  return false;
}

absl::StatusOr<bool> ListenImpl::load_batches() {
  const Shard& shard = reader_->shard();
  if (absl::Status alive = reader_->maybe_heartbeat();
      !alive.ok() && alive.code() != absl::StatusCode::kUnavailable) {
    return alive;
  }
  if (!batches_.empty()) {
    return true;
  }
  if (frontier_.is_empty()) {
    return false;
  }
  WEIR_ASSIGN_OR_RETURN(auto read, reader_->state_for_read());
  auto& [state, hold] = read;
  if (!(frontier_ < frontier_of(state.proto.upper()))) {
    return false;
  }
  // The batch that holds the frontier, and every one after it (they tile up to the upper).
  const uint64_t f = frontier_.time();
  for (const proto::ProtoBatch& batch : state.proto.batches()) {
    if (!batches_.empty() || !frontier_of(batch.upper()).less_equal(f)) {
      batches_.push_back(batch);
    }
  }
  if (batches_.empty()) {
    return absl::DataLossError(
        internal::str_cat(shard.label(), ": no batch holds time ", f, " below the upper"));
  }
  // Compaction advances times before the batch's since to it. If it did that to times we
  // already yielded, and moved them to or past our frontier, we would yield them again.
  const proto::ProtoBatch& first = batches_.front();
  const Frontier since = frontier_of(first.since());
  if (frontier_of(first.lower()).less_than(f) && !since.less_than(f)) {
    const Frontier lower = frontier_of(first.lower());
    batches_.clear();
    return absl::FailedPreconditionError(internal::str_cat(
        shard.label(), ": the listen at frontier ", f, " cannot continue: batch starting at ",
        lower.to_string(), " was compacted to since ", since.to_string(),
        "; keep the reader's since at or before the listen's frontier - 1"));
  }
  next_part_ = 0;
  hold_ = std::move(hold);
  return true;
}

absl::StatusOr<std::optional<ListenEvent>> ListenImpl::next() {
  WEIR_ASSIGN_OR_RETURN(const bool loaded, load_batches());
  if (!loaded) {
    return std::nullopt;
  }
  const proto::ProtoBatch& batch = batches_.front();
  ListenEvent event;
  if (next_part_ < batch.parts_size()) {
    const proto::ProtoPartRef& ref = batch.parts(next_part_);
    absl::StatusOr<std::shared_ptr<const DecodedPart>> fetched = reader_->shard().part_fetcher()(
        PartRef{ref.key(), ref.encoded_bytes(), ref.num_updates(), ref.update_bytes()});
    if (!fetched.ok()) {
      return reader_->explain(fetched.status());
    }
    const std::shared_ptr<const DecodedPart>& part = *fetched;
    ++next_part_;
    const uint64_t f = frontier_.time();
    for (size_t i = 0; i < part->size(); ++i) {
      if (part->time(i) >= f) {
        event.updates.push_back({std::string(part->data(i)), part->time(i), part->diff(i)});
      }
    }
  }
  if (next_part_ >= batch.parts_size()) {
    frontier_ = frontier_of(batch.upper());
    batches_.pop_front();
    next_part_ = 0;
    if (batches_.empty()) {
      hold_.release();
    }
  }
  event.progress = frontier_;
  return event;
}

absl::StatusOr<std::optional<PartsBatch>> ListenImpl::next_parts() {
  WEIR_ASSIGN_OR_RETURN(const bool loaded, load_batches());
  if (!loaded) {
    return std::nullopt;
  }
  const Shard& shard = reader_->shard();
  PartsBatch parts;
  // Every loaded batch at once: a reader behind by many batches catches up in one state read.
  for (const proto::ProtoBatch& batch : batches_) {
    for (int i = next_part_; i < batch.parts_size(); ++i) {
      const proto::ProtoPartRef& ref = batch.parts(i);
      parts.parts.push_back(
          LeasedPart{shard.id(), shard.name(),
                     PartRef{ref.key(), ref.encoded_bytes(), ref.num_updates(), ref.update_bytes()},
                     frontier_.time(), std::nullopt});
    }
    next_part_ = 0;
    frontier_ = frontier_of(batch.upper());
  }
  batches_.clear();
  parts.progress = frontier_;
  parts.lease = PartsLease(std::make_shared<SeqnoHold>(std::move(hold_)));
  return parts;
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
absl::StatusOr<std::optional<PartsBatch>> Listen::next_parts() { return impl_->next_parts(); }
Frontier Listen::frontier() const { return impl_->frontier(); }

namespace {
constexpr uint32_t kLeasedPartFormatVersion = 1;
}  // namespace

std::string LeasedPart::encode() const {
  internal::proto::ProtoLeasedPart wire;
  wire.set_format_version(kLeasedPartFormatVersion);
  wire.set_shard_id(shard_id.str());
  wire.set_shard_name(shard_name);
  internal::proto::ProtoPartRef* ref = wire.mutable_part();
  ref->set_key(part.key);
  ref->set_encoded_bytes(part.encoded_bytes);
  ref->set_num_updates(part.num_updates);
  ref->set_update_bytes(part.update_bytes);
  wire.set_lower(lower);
  wire.set_snapshot(as_of.has_value());
  wire.set_as_of(as_of.value_or(0));
  return wire.SerializeAsString();
}

absl::StatusOr<LeasedPart> LeasedPart::decode(std::string_view bytes) {
  internal::proto::ProtoLeasedPart wire;
  if (!wire.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(
        internal::str_cat("not an encoded leased part (", bytes.size(), " bytes)"));
  }
  if (wire.format_version() != kLeasedPartFormatVersion) {
    return absl::InvalidArgumentError(
        internal::str_cat("encoded leased part has format version ", wire.format_version(),
                          "; this build reads version ", kLeasedPartFormatVersion));
  }
  WEIR_ASSIGN_OR_RETURN(ShardId shard_id, ShardId::parse(wire.shard_id()));
  const internal::proto::ProtoPartRef& ref = wire.part();
  if (!validate_blob_key(ref.key()).ok() || !ref.key().starts_with(shard_id.str() + "/")) {
    return absl::InvalidArgumentError(internal::str_cat("encoded leased part of shard ",
                                                        shard_id.str(), " has a malformed key \"",
                                                        ref.key(), "\""));
  }
  // Every update counts its data and 16 bytes in update_bytes; a part has bytes.
  if (ref.encoded_bytes() == 0 || ref.num_updates() == 0 ||
      ref.update_bytes() / 16 < ref.num_updates()) {
    return absl::InvalidArgumentError(internal::str_cat(
        "encoded leased part \"", ref.key(), "\" has impossible sizes (", ref.encoded_bytes(),
        " bytes, ", ref.num_updates(), " updates of ", ref.update_bytes(), " bytes)"));
  }
  LeasedPart part;
  part.shard_id = std::move(shard_id);
  part.shard_name = wire.shard_name();
  part.part = PartRef{ref.key(), ref.encoded_bytes(), ref.num_updates(), ref.update_bytes()};
  part.lower = wire.lower();
  if (wire.snapshot()) part.as_of = wire.as_of();
  return part;
}

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

absl::StatusOr<PartsBatch> ReadHandle::snapshot_parts(uint64_t as_of) {
  WEIR_ASSIGN_OR_RETURN(auto read, core_->state_for_read());
  auto& [state, hold] = read;
  const internal::Shard& shard = core_->shard();
  WEIR_RETURN_IF_ERROR(internal::check_readable(shard, state.proto, as_of));
  PartsBatch parts;
  for (const internal::proto::ProtoBatch& batch : state.proto.batches()) {
    if (!internal::frontier_of(batch.lower()).less_equal(as_of)) {
      break;  // This batch and the later ones hold only times after as_of.
    }
    for (const internal::proto::ProtoPartRef& ref : batch.parts()) {
      parts.parts.push_back(
          LeasedPart{shard.id(), shard.name(),
                     PartRef{ref.key(), ref.encoded_bytes(), ref.num_updates(), ref.update_bytes()},
                     0, as_of});
    }
  }
  parts.progress = as_of == UINT64_MAX ? Frontier::empty() : Frontier(as_of + 1);
  parts.lease = PartsLease(std::make_shared<internal::SeqnoHold>(std::move(hold)));
  return parts;
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
absl::Status ReadHandle::heartbeat_if_due() { return core_->maybe_heartbeat(); }
absl::Status ReadHandle::expire() { return core_->expire(); }

}  // namespace weir::persist
