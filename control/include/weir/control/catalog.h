// The catalog: the durable list of what should run (sources, views, read holds), kept in the
// persist shard `weir.catalog` and changed only by compare-and-append.
//
// The shard's time is the catalog version, dense from 0. The batch [v, v+1) holds exactly one
// change, "version v": a create (+row), a drop (-row) or a replace (-old +new), where a row is one
// encoded object (catalog.proto). So the catalog at version V (its objects after the changes at
// versions < V) is the shard's snapshot at V - 1, and the latest version is the shard's upper.
//
// Reading replays the log and checks every version: a row that does not decode (or has a format
// version this build does not know), a diff other than +1 or -1, a version that is not exactly one
// change, a name live twice, or a retraction of a row that is not live makes the read fail with
// DataLoss naming the version. Such a catalog is never built upon: commit() reads it first.
//
// commit() is optimistic: it reads the catalog at the shard's upper v, validates the change
// against it, and appends it at [v, v+1). If another commit took v first, it reads again and
// validates again; a change that no longer holds fails with Aborted ("conflict: ... by version
// N"). If the append's outcome is unknown (a lost reply), it retries the same batch, whose
// idempotency token makes persist report the truth, so a change lands once. Any number of
// committers may race; the log is their serial order. See docs/control.md.
//
//   WEIR_ASSIGN_OR_RETURN(
//       CommittedChange created,
//       commit(client, Change::create("audit", HoldSpec{.shard = "bids", .reader = "audit"})));
//   WEIR_ASSIGN_OR_RETURN(CatalogSnapshot catalog, read(client));
//   const CatalogObject* audit = catalog.find("audit");  // created.version < catalog.version
//
// Thread safety: functions are thread-safe (as the PersistClient is); values have no internal
// synchronization.

#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "weir/persist/client.h"

namespace weir::control {

// The persist shard that holds the catalog.
inline constexpr char kCatalogShard[] = "weir.catalog";

// ---- Objects ----

struct SourceOption {
  std::string key;
  std::string value;
  friend bool operator==(const SourceOption&, const SourceOption&) = default;
};

// An ingested source. Options are stored sorted by key (equal keys keep their order).
struct SourceSpec {
  std::string source;
  std::vector<SourceOption> options;
  std::vector<std::string> tables;
  friend bool operator==(const SourceSpec&, const SourceSpec&) = default;
};

// A view: the computation `view` reads `inputs` and writes `output`.
struct ViewSpec {
  std::string view;
  std::vector<std::string> inputs;
  std::string output;
  friend bool operator==(const ViewSpec&, const ViewSpec&) = default;
};

// A durable read hold that `reader` keeps on `shard`, from where it was registered (its shard's
// since then) or, once advanced (`weir ctl hold advance`), from `since`: a replace moves it
// forward only.
struct HoldSpec {
  std::string shard;
  std::string reader;
  uint64_t since = 0;  // 0: where it was registered.
  friend bool operator==(const HoldSpec&, const HoldSpec&) = default;
};

using ObjectSpec = std::variant<SourceSpec, ViewSpec, HoldSpec>;

// One live object, as the catalog holds it.
struct CatalogObject {
  std::string name;
  std::string object_id;         // "o<uuid>", fresh per create.
  uint64_t created_version = 0;  // The version of its create (a replace keeps it).
  std::string created_by;
  ObjectSpec spec;
  // The row's bytes exactly as read from the shard: a drop or replace retracts these.
  std::string encoded;
};

// ---- Reading ----

struct CatalogSnapshot {
  uint64_t version = 0;  // Holds the changes at versions < version.
  std::map<std::string, CatalogObject, std::less<>> objects;  // Live objects by name.

  // nullptr if no live object is called `name`.
  const CatalogObject* find(std::string_view name) const;
};

// The catalog at `version` (default: the latest, the shard's upper). A read of an empty store
// creates nothing. DataLoss naming the version for hostile bytes (see above); OutOfRange for a
// version beyond the latest; FailedPrecondition for one whose history has been compacted away.
absl::StatusOr<CatalogSnapshot> read(persist::PersistClient& client,
                                     std::optional<uint64_t> version = std::nullopt);

enum class ChangeKind { kCreate, kDrop, kReplace };
std::string_view to_string(ChangeKind kind);

// A change as the log holds it.
struct CommittedChange {
  uint64_t version = 0;
  ChangeKind kind = ChangeKind::kCreate;
  CatalogObject object;                   // Created, dropped, or (a replace) the new one.
  std::optional<CatalogObject> replaced;  // A replace's old object.
};

// Every change at versions >= `from`, in order, up to the latest: replaying them on the catalog at
// `from` gives the latest catalog. Fails as read() does (checking the whole log), and with
// FailedPrecondition if the changes before `from` have been compacted into one.
absl::StatusOr<std::vector<CommittedChange>> history(persist::PersistClient& client,
                                                     uint64_t from = 0);

// ---- Committing ----

// A change a committer asks for. A create names the object and gives its spec (the object id,
// created_version and created_by are filled in at commit); a drop names it; a replace names a live
// object and gives its new spec (the object keeps its id and creation).
struct Change {
  ChangeKind kind = ChangeKind::kCreate;
  std::string name;
  ObjectSpec spec;  // Ignored by a drop.

  static Change create(std::string name, ObjectSpec spec);
  static Change drop(std::string name);
  static Change replace(std::string name, ObjectSpec spec);
};

struct CommitOptions {
  // Recorded in a created object's created_by; empty: "pid@host".
  std::string created_by;
  // How long to retry an append whose outcome is unknown before giving up (the error is then
  // indeterminate too: read the catalog to learn whether the change landed).
  absl::Duration outcome_timeout = absl::Minutes(1);
};

// Validates `change` (validate.h, against the catalog and the shards of `client`'s store) and
// appends it as the next version, its spec completed (complete_spec), as described above. Returns
// the change as committed. Errors before the append leave the catalog as it was, and a refusal
// creates no shard (not even weir.catalog): InvalidArgument for a bad name or spec; AlreadyExists
// if the name, the shards it would write or its hold are taken; NotFound if a drop's or replace's
// name is not live; FailedPrecondition for a shard to read that is not there, or a drop from
// under a view; Aborted "conflict: ..." if a concurrent commit made the change invalid; DataLoss
// if the catalog does not decode. When the append says the shard is due for maintenance, runs it
// (inline).
absl::StatusOr<CommittedChange> commit(persist::PersistClient& client, const Change& change,
                                       const CommitOptions& options = {});

// "pid@host" of this process: what created_by says by default.
std::string this_process();

}  // namespace weir::control
