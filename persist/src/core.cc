#include "core.h"

#include <algorithm>
#include <thread>

#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "str_cat.h"

#include "weir/mutex.h"
#include "weir/persist/write_handle.h"
#include "weir/status.h"

namespace weir::persist::internal {
namespace {

// Decoded parts kept for reuse when reads let go of them: enough that a merge of many runs
// rarely allocates, few enough that an idle client keeps little memory.
constexpr size_t kMaxFreeDecodedParts = 4;

int pool_threads(const PersistConfig& config) {
  if (config.io_threads > 0) {
    return config.io_threads;
  }
  // Twice the cores, as uploads spend part of their time waiting for fsync; but few enough that
  // the buffers they work in stay a small part of a process.
  return std::clamp(2 * static_cast<int>(std::thread::hardware_concurrency()), 4, 16);
}

absl::Status validate_name(std::string_view name) {
  if (name.empty()) {
    return absl::InvalidArgumentError("a shard name must not be empty");
  }
  for (const char c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
      return absl::InvalidArgumentError(internal::str_cat(
          "shard name \"", absl::CEscape(std::string(name)), "\" has a control character"));
    }
  }
  // The name map and the state keep it in proto3 strings: one that is not UTF-8 would make the
  // map, and so every shard's name, unreadable.
  if (!is_utf8(name)) {
    return absl::InvalidArgumentError(internal::str_cat(
        "shard name \"", absl::CHexEscape(std::string(name)), "\" is not valid UTF-8"));
  }
  return absl::OkStatus();
}

proto::ProtoShardState initial_state(const ShardId& id, const std::string& name) {
  proto::ProtoShardState state;
  state.set_format_version(kStateFormatVersion);
  state.set_shard_id(id.str());
  state.set_shard_name(name);
  to_proto(Frontier(0), state.mutable_upper());
  to_proto(Frontier(0), state.mutable_since());
  return state;
}

}  // namespace

bool is_utf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    const unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    size_t n;
    uint32_t cp;
    uint32_t min;
    if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (static_cast<size_t>(end - p) <= n) {
      return false;
    }
    for (size_t k = 1; k <= n; ++k) {
      if ((p[k] & 0xC0) != 0x80) {
        return false;
      }
      cp = (cp << 6) | (p[k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    p += n + 1;
  }
  return true;
}

std::string as_utf8(std::string_view text) {
  return is_utf8(text) ? std::string(text)
                       : absl::CHexEscape(absl::string_view(text.data(), text.size()));
}

ClientCore::ClientCore(std::shared_ptr<Blob> blob, std::shared_ptr<Consensus> consensus,
                       PersistConfig config)
    : blob_(std::move(blob)),
      consensus_(std::move(consensus)),
      config_(std::move(config)),
      decoded_parts_(DecodedPartPool::create(kMaxFreeDecodedParts)),
      part_buffers_(BufferRecycler::for_part_size(config_.part_target_bytes,
                                                  config_.max_parts_in_flight + 1)),
      pool_(pool_threads(config_)) {}

absl::StatusOr<std::pair<std::optional<uint64_t>, proto::ProtoShardNames>>
ClientCore::fetch_names() {
  WEIR_ASSIGN_OR_RETURN(std::optional<VersionedData> head, consensus_->head(kShardNamesKey));
  proto::ProtoShardNames names;
  if (!head) {
    names.set_format_version(kNamesFormatVersion);
    return std::pair{std::optional<uint64_t>(), std::move(names)};
  }
  if (!names.ParseFromString(head->data)) {
    return absl::DataLossError(internal::str_cat("shard names at consensus key \"", kShardNamesKey,
                                                 "\" seqno ", head->seqno,
                                                 " are truncated or corrupt"));
  }
  if (names.format_version() != kNamesFormatVersion) {
    return absl::FailedPreconditionError(
        internal::str_cat("shard names at consensus key \"", kShardNamesKey, "\" seqno ",
                          head->seqno, " have format version ", names.format_version(),
                          "; this build reads version ", kNamesFormatVersion));
  }
  return std::pair{std::optional<uint64_t>(head->seqno), std::move(names)};
}

absl::StatusOr<std::optional<ShardId>> ClientCore::find_shard(std::string_view name) {
  WEIR_RETURN_IF_ERROR(validate_name(name));
  {
    weir::MutexLock lock(names_mu_);
    if (auto it = names_.find(absl::string_view(name.data(), name.size())); it != names_.end()) {
      return it->second;
    }
  }
  WEIR_ASSIGN_OR_RETURN(auto names, fetch_names());
  auto it = names.second.ids().find(std::string(name));
  if (it == names.second.ids().end()) {
    return std::nullopt;
  }
  absl::StatusOr<ShardId> id = ShardId::parse(it->second);
  if (!id.ok()) {
    return absl::DataLossError(internal::str_cat("shard names at consensus key \"", kShardNamesKey,
                                                 "\" map \"", name, "\" to a malformed id \"",
                                                 it->second, "\""));
  }
  weir::MutexLock lock(names_mu_);
  names_.emplace(std::string(name), *id);
  return *id;
}

absl::StatusOr<ShardId> ClientCore::find_or_create_shard(std::string_view name) {
  // Retried while consensus fails transiently: a retry after a lost reply finds the name that
  // the lost attempt registered.
  return retry_unavailable(kStoreAttempts, [&] { return find_or_create_shard_once(name); });
}

absl::StatusOr<ShardId> ClientCore::find_or_create_shard_once(std::string_view name) {
  while (true) {
    WEIR_ASSIGN_OR_RETURN(std::optional<ShardId> existing, find_shard(name));
    if (existing) {
      return *existing;
    }
    WEIR_ASSIGN_OR_RETURN(auto names, fetch_names());
    auto& [seqno, map] = names;
    if (map.ids().contains(std::string(name))) {
      continue;  // Created since find_shard looked.
    }
    const ShardId id = ShardId::random();
    (*map.mutable_ids())[std::string(name)] = id.str();
    const uint64_t next = seqno.value_or(0) + 1;
    WEIR_ASSIGN_OR_RETURN(
        CasResult result,
        consensus_->compare_and_set(kShardNamesKey, seqno, {next, map.SerializeAsString()}));
    if (result == CasResult::kCommitted) {
      // Only the head of the name map is ever read.
      consensus_->truncate(kShardNamesKey, next).IgnoreError();
      weir::MutexLock lock(names_mu_);
      names_.emplace(std::string(name), id);
      return id;
    }
  }
}

absl::StatusOr<std::vector<ShardName>> ClientCore::list_shards() {
  WEIR_ASSIGN_OR_RETURN(auto names, fetch_names());
  std::vector<ShardName> result;
  for (const auto& [name, id_text] : names.second.ids()) {
    absl::StatusOr<ShardId> id = ShardId::parse(id_text);
    if (!id.ok()) {
      return absl::DataLossError(internal::str_cat("shard names at consensus key \"",
                                                   kShardNamesKey, "\" map \"", name,
                                                   "\" to a malformed id \"", id_text, "\""));
    }
    result.push_back({name, *id});
  }
  std::sort(result.begin(), result.end(),
            [](const ShardName& a, const ShardName& b) { return a.name < b.name; });
  return result;
}

absl::StatusOr<std::shared_ptr<const DecodedPart>> PartFetcher::operator()(
    const PartRef& ref) const {
  // Retried while it fails transiently: a read of n parts would otherwise fail whenever one of
  // its n gets does, which at many parts is nearly always, however rare the failures.
  WEIR_ASSIGN_OR_RETURN(std::optional<std::string> bytes,
                        retry_unavailable(kStoreAttempts, [&] { return blob->get(ref.key); }));
  if (!bytes) {
    return absl::NotFoundError(
        internal::str_cat(label, ": part \"", ref.key, "\" is missing from the blob store"));
  }
  return decode_part(label, shard_id, ref, *bytes, parts.get());
}

Shard::Shard(std::shared_ptr<ClientCore> core, ShardId id, std::string name)
    : core_(std::move(core)),
      id_(std::move(id)),
      name_(std::move(name)),
      label_(internal::str_cat("shard \"", name_, "\" (", id_.str(), ")")) {}

absl::StatusOr<ShardState> Shard::fetch() const {
  // A read: retried while consensus fails transiently, so that one lost call does not fail (and
  // restart) whatever needed the state.
  WEIR_ASSIGN_OR_RETURN(std::optional<VersionedData> head, retry_unavailable(kStoreAttempts, [&] {
                          return core_->consensus().head(id_.str());
                        }));
  if (!head) {
    return ShardState{0, initial_state(id_, name_)};
  }
  WEIR_ASSIGN_OR_RETURN(proto::ProtoShardState state, decode_state(label_, id_.str(), *head));
  return ShardState{head->seqno, std::move(state)};
}

constexpr char kIndeterminatePayload[] = "weir.persist/indeterminate";

absl::Status mark_indeterminate(absl::Status status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kAborted:
      status.SetPayload(kIndeterminatePayload, absl::Cord("1"));
      break;
    default:
      break;  // A definite refusal: nothing was written.
  }
  return status;
}

absl::StatusOr<ShardState> Shard::apply(
    ShardState current,
    absl::FunctionRef<absl::StatusOr<Step>(proto::ProtoShardState&)> change) const {
  while (true) {
    ShardState next{current.seqno + 1, current.proto};
    WEIR_ASSIGN_OR_RETURN(Step step, change(next.proto));
    if (step == Step::kKeep) {
      return current;
    }
    next.proto.set_seqno(next.seqno);
    next.proto.set_walltime_ms(core_->now_ms());
    const std::optional<uint64_t> expected =
        current.seqno == 0 ? std::nullopt : std::optional(current.seqno);
    absl::StatusOr<CasResult> result = core_->consensus().compare_and_set(
        id_.str(), expected, {next.seqno, encode_state(next.proto)});
    if (!result.ok()) {
      return mark_indeterminate(result.status());
    }
    if (*result == CasResult::kCommitted) {
      return next;
    }
    WEIR_ASSIGN_OR_RETURN(current, fetch());
  }
}

std::string Shard::new_part_key(std::string_view writer_id) const {
  return internal::str_cat(id_.str(), "/", writer_id, "/", internal::random_id('p'));
}

std::string_view writer_of_key(std::string_view key) {
  const size_t first = key.find('/');
  if (first == std::string_view::npos) {
    return {};
  }
  const size_t second = key.find('/', first + 1);
  if (second == std::string_view::npos) {
    return {};
  }
  return key.substr(first + 1, second - first - 1);
}

proto::ProtoWriter* find_writer(proto::ProtoShardState& state, std::string_view id) {
  for (proto::ProtoWriter& writer : *state.mutable_writers()) {
    if (writer.writer_id() == id) {
      return &writer;
    }
  }
  return nullptr;
}

bool has_writer(const proto::ProtoShardState& state, std::string_view id) {
  return std::any_of(state.writers().begin(), state.writers().end(),
                     [&](const proto::ProtoWriter& writer) { return writer.writer_id() == id; });
}

proto::ProtoLeasedReader* find_leased_reader(proto::ProtoShardState& state, std::string_view id) {
  for (proto::ProtoLeasedReader& reader : *state.mutable_leased_readers()) {
    if (reader.reader_id() == id) {
      return &reader;
    }
  }
  return nullptr;
}

proto::ProtoCriticalReader* find_critical_reader(proto::ProtoShardState& state,
                                                 std::string_view id) {
  for (proto::ProtoCriticalReader& reader : *state.mutable_critical_readers()) {
    if (reader.reader_id() == id) {
      return &reader;
    }
  }
  return nullptr;
}

bool references_part(const proto::ProtoShardState& state, std::string_view key) {
  for (const proto::ProtoBatch& batch : state.batches()) {
    for (const proto::ProtoPartRef& part : batch.parts()) {
      if (part.key() == key) {
        return true;
      }
    }
  }
  return false;
}

namespace {
constexpr char kFencedPayload[] = "weir.persist/fenced";
}  // namespace

bool fenced_out(const proto::ProtoShardState& state, uint64_t epoch) {
  return epoch != 0 && epoch < state.fence_epoch();
}

absl::Status fenced_error(const Shard& shard, const proto::ProtoShardState& state,
                          std::string_view handle, uint64_t epoch) {
  absl::Status status = absl::FailedPreconditionError(internal::str_cat(
      shard.label(), ": ", handle, " is fenced out: ",
      state.fence_owner().empty() ? std::string("a later process") : state.fence_owner(),
      " has taken the shard over (the shard's fence epoch is ", state.fence_epoch(),
      ", this one's ", epoch, ")"));
  status.SetPayload(kFencedPayload, absl::Cord("1"));
  return status;
}

absl::StatusOr<bool> check_or_raise_fence(const Shard& shard, proto::ProtoShardState& state,
                                          std::string_view handle, const Fence& fence, bool raise) {
  if (fenced_out(state, fence.epoch)) {
    return fenced_error(shard, state, handle, fence.epoch);
  }
  if (!raise || fence.epoch <= state.fence_epoch()) {
    return false;
  }
  state.set_fence_epoch(fence.epoch);
  state.set_fence_owner(as_utf8(fence.owner));
  const auto below = [&](const auto& entry) {
    return entry.fence_epoch() != 0 && entry.fence_epoch() < fence.epoch;
  };
  auto* writers = state.mutable_writers();
  writers->erase(std::remove_if(writers->begin(), writers->end(), below), writers->end());
  auto* readers = state.mutable_leased_readers();
  readers->erase(std::remove_if(readers->begin(), readers->end(), below), readers->end());
  recompute_since(state);
  return true;
}

void recompute_since(proto::ProtoShardState& state) {
  std::optional<Frontier> smallest;
  for (const auto& reader : state.leased_readers()) {
    const Frontier since = frontier_of(reader.since());
    smallest = smallest ? std::min(*smallest, since) : since;
  }
  for (const auto& reader : state.critical_readers()) {
    const Frontier since = frontier_of(reader.since());
    smallest = smallest ? std::min(*smallest, since) : since;
  }
  if (smallest && frontier_of(state.since()) < *smallest) {
    to_proto(*smallest, state.mutable_since());
  }
}

std::vector<std::vector<PartRef>> runs_of(const proto::ProtoBatch& batch) {
  std::vector<std::vector<PartRef>> runs;
  size_t next_start = 0;
  for (int i = 0; i < batch.parts_size(); ++i) {
    if (i == 0 || (next_start < static_cast<size_t>(batch.run_starts_size()) &&
                   static_cast<uint32_t>(i) == batch.run_starts(static_cast<int>(next_start)))) {
      if (i != 0) {
        ++next_start;
      }
      runs.emplace_back();
    }
    const proto::ProtoPartRef& ref = batch.parts(i);
    runs.back().push_back({ref.key(), ref.encoded_bytes(), ref.num_updates(), ref.update_bytes()});
  }
  return runs;
}

}  // namespace weir::persist::internal

namespace weir::persist {

bool is_fenced(const absl::Status& status) {
  return status.GetPayload(internal::kFencedPayload).has_value();
}

bool is_indeterminate(const absl::Status& status) {
  return status.GetPayload(internal::kIndeterminatePayload).has_value();
}

}  // namespace weir::persist
