#include "weir/control/catalog.h"

#include <algorithm>
#include <climits>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "codec.h"
#include <unistd.h>

#include "weir/check.h"
#include "weir/control/validate.h"
#include "weir/persist/ids.h"
#include "weir/status.h"

namespace weir::control {
namespace {

using persist::Frontier;
using persist::PersistClient;
using persist::Update;

// Object ids: "o<uuid>".
using ObjectId = persist::PrefixedId<'o'>;

// How often commit() reads again after losing the race for a version before it gives up.
constexpr int kMaxRaces = 1000;

absl::Status hostile(uint64_t version, absl::string_view why) {
  return absl::DataLossError(absl::StrCat(kCatalogShard, " version ", version, ": ", why));
}

// The catalog rebuilt from its log, every version checked.
struct Replay {
  CatalogSnapshot catalog;
  // The changes at versions >= record_from, in order.
  uint64_t record_from = 0;
  std::vector<CommittedChange> changes;
  // The versions up to here were compacted into one: their changes are not known one by one.
  std::optional<uint64_t> compacted_through;

  // Applies the updates of one version: exactly one change.
  absl::Status apply(uint64_t version, const std::vector<Update>& updates) {
    std::vector<CatalogObject> added;
    std::vector<CatalogObject> retracted;
    for (const Update& update : updates) {
      if (update.diff != 1 && update.diff != -1) {
        return hostile(version, absl::StrCat("a row has diff ", update.diff,
                                             " (a change adds or retracts one row)"));
      }
      absl::StatusOr<CatalogObject> object = internal::decode(update.data);
      if (!object.ok()) {
        return hostile(version, object.status().message());
      }
      (update.diff > 0 ? added : retracted).push_back(*std::move(object));
    }
    for (const CatalogObject& object : retracted) {
      const CatalogObject* live = catalog.find(object.name);
      if (live == nullptr || live->encoded != object.encoded) {
        return hostile(version,
                       absl::StrCat("it retracts a row of \"", object.name, "\" that is not live"));
      }
    }
    CommittedChange change;
    change.version = version;
    if (added.size() == 1 && retracted.empty()) {
      change.kind = ChangeKind::kCreate;
      if (const CatalogObject* live = catalog.find(added[0].name)) {
        return hostile(version, absl::StrCat("it creates \"", live->name,
                                             "\", which is live already (created by version ",
                                             live->created_version, "): a name live twice"));
      }
    } else if (added.empty() && retracted.size() == 1) {
      change.kind = ChangeKind::kDrop;
    } else if (added.size() == 1 && retracted.size() == 1 && added[0].name == retracted[0].name) {
      change.kind = ChangeKind::kReplace;
    } else {
      return hostile(version, absl::StrCat("it adds ", added.size(), " rows and retracts ",
                                           retracted.size(), ", which is not one change"));
    }
    if (!retracted.empty()) {
      auto live = catalog.objects.find(retracted[0].name);
      change.object = std::move(live->second);
      catalog.objects.erase(live);
    }
    if (!added.empty()) {
      if (change.kind == ChangeKind::kReplace) change.replaced = std::move(change.object);
      change.object = added[0];
      catalog.objects.emplace(added[0].name, std::move(added[0]));
    }
    if (version >= record_from) changes.push_back(std::move(change));
    return absl::OkStatus();
  }

  // Applies the consolidated versions 0 to `since` (> 0) of a compacted log: live rows only.
  absl::Status apply_compacted(uint64_t since, const std::vector<Update>& rows) {
    compacted_through = since;
    const auto refuse = [since](absl::string_view why) {
      return absl::DataLossError(
          absl::StrCat(kCatalogShard, " versions 0 to ", since, " (compacted): ", why));
    };
    for (const Update& row : rows) {
      if (row.diff != 1) {
        return refuse(absl::StrCat("a row has diff ", row.diff, " (a live row has 1)"));
      }
      absl::StatusOr<CatalogObject> object = internal::decode(row.data);
      if (!object.ok()) {
        return refuse(object.status().message());
      }
      const std::string name = object->name;
      if (!catalog.objects.emplace(name, *std::move(object)).second) {
        return refuse(absl::StrCat("\"", name, "\" is live twice"));
      }
    }
    return absl::OkStatus();
  }
};

// The catalog at `version` (default: the latest), recording the changes from `record_from` on.
absl::StatusOr<Replay> replay_log(PersistClient& client, std::optional<uint64_t> version,
                                  uint64_t record_from) {
  Replay replay;
  replay.record_from = record_from;
  WEIR_ASSIGN_OR_RETURN(const std::optional<persist::ShardId> id, client.find_shard(kCatalogShard));
  if (!id) {
    if (version.value_or(0) > 0) {
      return absl::OutOfRangeError(
          absl::StrCat("there is no catalog version ", *version, ": the catalog is empty"));
    }
    return replay;
  }
  WEIR_ASSIGN_OR_RETURN(persist::ReadHandle reader, client.open_reader(kCatalogShard, "catalog"));
  absl::Cleanup expire = [&reader] { (void)reader.expire(); };
  WEIR_ASSIGN_OR_RETURN(const Frontier upper, reader.fetch_recent_upper());
  const Frontier since = reader.since();
  if (upper.is_empty() || since.is_empty()) {
    return absl::FailedPreconditionError(absl::StrCat("shard ", kCatalogShard, " is closed"));
  }
  const uint64_t target = version.value_or(upper.time());
  if (target > upper.time()) {
    return absl::OutOfRangeError(
        absl::StrCat("there is no catalog version ", target, " yet: the latest is ", upper.time()));
  }
  replay.catalog.version = target;
  if (target == 0) {
    return replay;
  }
  const uint64_t as_of = target - 1;
  if (as_of < since.time()) {
    return absl::FailedPreconditionError(absl::StrCat("catalog version ", target,
                                                      " has been compacted away: the earliest is ",
                                                      since.time() + 1));
  }
  // The snapshot at the since holds version 0 alone, or (compacted) every version up to it.
  WEIR_ASSIGN_OR_RETURN(std::vector<Update> first, reader.snapshot(since.time()));
  if (since.time() == 0) {
    WEIR_RETURN_IF_ERROR(replay.apply(0, first));
  } else {
    WEIR_RETURN_IF_ERROR(replay.apply_compacted(since.time(), first));
  }
  if (as_of == since.time()) {
    return replay;
  }
  // Then every version after it, one by one (a listen yields a part's updates in data order).
  std::map<uint64_t, std::vector<Update>> versions;
  WEIR_ASSIGN_OR_RETURN(persist::Listen listen, reader.listen(since.time()));
  while (listen.frontier().less_equal(as_of)) {
    WEIR_ASSIGN_OR_RETURN(std::optional<persist::ListenEvent> event, listen.next());
    if (!event) {
      return absl::UnavailableError(absl::StrCat("reading ", kCatalogShard, " stopped at ",
                                                 listen.frontier().to_string(),
                                                 ", below its upper ", upper.to_string()));
    }
    for (Update& update : event->updates) {
      if (update.time <= as_of) versions[update.time].push_back(std::move(update));
    }
  }
  for (uint64_t v = since.time() + 1; v <= as_of; ++v) {
    WEIR_RETURN_IF_ERROR(replay.apply(v, versions[v]));
  }
  return replay;
}

// The error of a change that held when first read and no longer does: Aborted, naming the version
// that last changed the name after that read.
absl::Status conflict(const Change& change, const std::vector<CommittedChange>& since_first_read,
                      const absl::Status& invalid) {
  for (auto it = since_first_read.rbegin(); it != since_first_read.rend(); ++it) {
    if (it->object.name == change.name) {
      const char* verb = it->kind == ChangeKind::kCreate ? "created"
                         : it->kind == ChangeKind::kDrop ? "dropped"
                                                         : "replaced";
      return absl::AbortedError(absl::StrCat("conflict: \"", change.name, "\" was ", verb,
                                             " by version ", it->version, " (", invalid.message(),
                                             ")"));
    }
  }
  return absl::AbortedError(absl::StrCat("conflict: ", invalid.message()));
}

// The change `change` makes to `catalog` as version `version`.
CommittedChange prepare(const Change& change, const CatalogSnapshot& catalog, uint64_t version,
                        const std::string& object_id, const std::string& created_by) {
  CommittedChange committed;
  committed.version = version;
  committed.kind = change.kind;
  if (change.kind == ChangeKind::kCreate) {
    committed.object.name = change.name;
    committed.object.object_id = object_id;
    committed.object.created_version = version;
    committed.object.created_by = created_by;
    committed.object.spec = internal::canonical(change.spec);
  } else {
    committed.object = *catalog.find(change.name);  // Its bytes as read: a drop retracts them.
    if (change.kind == ChangeKind::kReplace) {
      committed.replaced = committed.object;
      committed.object.spec = internal::canonical(change.spec);
    }
  }
  if (change.kind != ChangeKind::kDrop) {
    committed.object.encoded = internal::encode(committed.object);
  }
  // -row +row would consolidate to a version with no change, which no reader accepts.
  WEIR_CHECK(!committed.replaced || committed.replaced->encoded != committed.object.encoded)
      << "a replace of \"" << change.name << "\" that changes nothing passed validation";
  return committed;
}

// An error that keeps what `unknown` says (its payload: persist::is_indeterminate) with a message
// of its own. persist has no public way to mark an error indeterminate.
absl::Status still_unknown(const absl::Status& unknown, const std::string& message) {
  absl::Status status(absl::StatusCode::kUnavailable, message);
  unknown.ForEachPayload([&status](absl::string_view url, const absl::Cord& payload) {
    status.SetPayload(url, payload);
  });
  return status;
}

// Appends `change` as its version. A mismatch: another commit took the version (nothing of this
// one is in the shard). An append whose outcome is unknown is retried, with the same batch, until
// persist can say, or options.outcome_timeout has passed.
absl::StatusOr<persist::AppendResult> append(persist::WriteHandle& writer,
                                             const CommittedChange& change,
                                             const CommitOptions& options) {
  const uint64_t v = change.version;
  persist::BatchBuilder builder = writer.builder(Frontier(v));
  absl::Status added;
  if (change.kind != ChangeKind::kCreate) {
    const CatalogObject& old = change.replaced ? *change.replaced : change.object;
    added.Update(builder.add(old.encoded, v, -1));
  }
  if (change.kind != ChangeKind::kDrop) {
    added.Update(builder.add(change.object.encoded, v, +1));
  }
  if (!added.ok()) {
    (void)builder.discard();
    return added;
  }
  WEIR_ASSIGN_OR_RETURN(const persist::Batch batch, builder.finish(Frontier(v + 1)));
  const absl::Time deadline = absl::Now() + options.outcome_timeout;
  absl::Duration backoff = absl::Milliseconds(10);
  std::optional<absl::Status> unknown;  // The first error that left the outcome unknown.
  while (true) {
    absl::StatusOr<persist::AppendResult> result =
        writer.compare_and_append(batch, Frontier(v), Frontier(v + 1));
    if (result.ok()) {
      if (!result->is_appended()) {
        (void)writer.discard(batch);
      }
      return result;
    }
    if (!persist::is_indeterminate(result.status())) {
      if (!unknown) {
        (void)writer.discard(batch);  // A definite error: the batch is not in the shard.
        return result.status();
      }
      return still_unknown(
          *unknown, absl::StrCat("whether catalog version ", v, " was committed is unknown (",
                                 unknown->message(), "; then: ", result.status().message(), ")"));
    }
    if (!unknown) unknown = result.status();
    if (absl::Now() + backoff > deadline) {
      return still_unknown(*unknown, absl::StrCat("whether catalog version ", v,
                                                  " was committed is still unknown after ",
                                                  absl::FormatDuration(options.outcome_timeout),
                                                  ": ", result.status().message()));
    }
    absl::SleepFor(backoff);
    backoff = std::min(2 * backoff, absl::Seconds(1));
  }
}

}  // namespace

const CatalogObject* CatalogSnapshot::find(std::string_view name) const {
  auto it = objects.find(name);
  return it == objects.end() ? nullptr : &it->second;
}

std::string_view to_string(ChangeKind kind) {
  switch (kind) {
    case ChangeKind::kCreate:
      return "create";
    case ChangeKind::kDrop:
      return "drop";
    case ChangeKind::kReplace:
      return "replace";
  }
  return "?";
}

Change Change::create(std::string name, ObjectSpec spec) {
  return {.kind = ChangeKind::kCreate, .name = std::move(name), .spec = std::move(spec)};
}
Change Change::drop(std::string name) {
  return {.kind = ChangeKind::kDrop, .name = std::move(name), .spec = {}};
}
Change Change::replace(std::string name, ObjectSpec spec) {
  return {.kind = ChangeKind::kReplace, .name = std::move(name), .spec = std::move(spec)};
}

std::string this_process() {
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return absl::StrCat(getpid(), "@", host[0] != '\0' ? host : "unknown-host");
}

absl::StatusOr<CatalogSnapshot> read(PersistClient& client, std::optional<uint64_t> version) {
  WEIR_ASSIGN_OR_RETURN(Replay replay, replay_log(client, version, /*record_from=*/UINT64_MAX));
  return std::move(replay.catalog);
}

absl::StatusOr<std::vector<CommittedChange>> history(PersistClient& client, uint64_t from) {
  WEIR_ASSIGN_OR_RETURN(Replay replay, replay_log(client, std::nullopt, from));
  if (from > replay.catalog.version) {
    return absl::OutOfRangeError(absl::StrCat("there is no catalog version ", from,
                                              " yet: the latest is ", replay.catalog.version));
  }
  if (replay.compacted_through && from <= *replay.compacted_through) {
    return absl::FailedPreconditionError(
        absl::StrCat("the catalog's changes up to version ", *replay.compacted_through,
                     " have been compacted into one: its history starts at version ",
                     *replay.compacted_through + 1));
  }
  return std::move(replay.changes);
}

absl::StatusOr<CommittedChange> commit(PersistClient& client, const Change& change,
                                       const CommitOptions& options) {
  // A bad name fails before anything is written, the shard's creation included; so does any
  // other refusal of the first change to a store that has no catalog yet.
  WEIR_RETURN_IF_ERROR(validate_name(change.name));
  const ShardExists exists = shards_of(client);
  WEIR_ASSIGN_OR_RETURN(const std::optional<persist::ShardId> catalog_shard,
                        client.find_shard(kCatalogShard));
  if (!catalog_shard) {
    WEIR_RETURN_IF_ERROR(validate(change, CatalogSnapshot{}, exists));
  }
  // What is stored: the spec completed (validate.h), once it has validated.
  Change completed = change;
  if (change.kind != ChangeKind::kDrop) {
    absl::StatusOr<ObjectSpec> spec = complete_spec(change.name, change.spec);
    if (spec.ok()) completed.spec = *std::move(spec);
  }
  const std::string created_by = options.created_by.empty() ? this_process() : options.created_by;
  const std::string object_id = ObjectId::random().str();
  WEIR_ASSIGN_OR_RETURN(persist::WriteHandle writer,
                        client.open_writer(kCatalogShard, "catalog commit by " + created_by));
  absl::Cleanup expire = [&writer] { (void)writer.expire(); };
  std::optional<uint64_t> first_read;  // The version the change was first validated at.
  std::string validated_id;            // The object a drop or replace was validated against.
  for (int race = 0; race < kMaxRaces; ++race) {
    WEIR_ASSIGN_OR_RETURN(const Frontier upper, writer.fetch_recent_upper());
    if (upper.is_empty()) {
      return absl::FailedPreconditionError(absl::StrCat("shard ", kCatalogShard, " is closed"));
    }
    const uint64_t v = upper.time();
    WEIR_ASSIGN_OR_RETURN(Replay replay, replay_log(client, v, first_read.value_or(v)));
    absl::Status valid = validate(change, replay.catalog, exists);
    if (valid.ok() && first_read && change.kind != ChangeKind::kCreate &&
        replay.catalog.find(change.name)->object_id != validated_id) {
      valid = absl::NotFoundError(absl::StrCat("the object \"", change.name, "\" read at version ",
                                               *first_read, " is gone"));
    }
    if (!valid.ok()) {
      return first_read ? conflict(change, replay.changes, valid) : valid;
    }
    if (!first_read) {
      first_read = v;
      if (change.kind != ChangeKind::kCreate) {
        validated_id = replay.catalog.find(change.name)->object_id;
      }
    }
    const CommittedChange committed = prepare(completed, replay.catalog, v, object_id, created_by);
    WEIR_ASSIGN_OR_RETURN(const persist::AppendResult appended, append(writer, committed, options));
    if (appended.is_appended()) {
      if (appended.maintenance_due) {
        // Compaction keeps reads of the log to a few parts, GC keeps its state small. The change
        // has landed whatever this says; a later commit tries again.
        (void)client.maintain(kCatalogShard);
      }
      return committed;
    }
  }
  return absl::AbortedError(absl::StrCat("could not commit to ", kCatalogShard, " in ", kMaxRaces,
                                         " tries: too much contention"));
}

}  // namespace weir::control
