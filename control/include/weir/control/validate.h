// Validation of catalog changes: what commit() checks against the catalog it read before it
// appends, and again after losing a race, so that what a replica is asked to run can run.
//
// A change is checked on its own, then against the live objects of the catalog, then (where the
// caller gives the store) against the shards that exist:
// - names: [a-z0-9][a-z0-9_.-]*, at most kMaxNameLength characters, not "weir.*"; a create's name
//   not live, a drop's or replace's live.
// - a source: its definition as `weir ingest` would take it (ingest::parse_source_spec and
//   to_ingest_options, with their messages), storable (ingest::check_storable: no password), and
//   its shards (`<prefix>.*`: loadgen:auction writes auction.*, postgres and mysql sources
//   `<--name>.*`, pg.* and mysql.* by default) written by no other live object.
// - a view: a known view (ingest::known_views), reading ingest::view_inputs(view) (filled in when
//   empty), each an existing shard or one a live object writes, into an output (default
//   "view.VIEW") that is none of its inputs, not under an input's source prefix, and written by
//   no other live object.
// - a hold: on a shard that exists or that a live object writes; (reader, shard) held by no other
//   live hold.
// - a drop (or a replace that stops writing a shard): refused while a live view reads a shard the
//   object writes (no cascade: drop the view first).
// Refusals are InvalidArgument (the change on its own), AlreadyExists (another live object has
// the name, the shards or the hold), NotFound (no such live name) or FailedPrecondition (a shard
// that is not there, a view that still reads), each naming the object and the thing. Nothing here
// writes to the store: shard existence is asked of PersistClient::find_shard, which creates
// nothing.
//
// Thread safety: pure functions (shards_of's lookups are as thread-safe as its client).

#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "weir/control/catalog.h"
#include "weir/ingest/source_spec.h"
#include "weir/persist/client.h"

namespace weir::control {

inline constexpr size_t kMaxNameLength = 128;

// InvalidArgument, naming `name`, unless it matches [a-z0-9][a-z0-9_.-]*, has at most
// kMaxNameLength characters and does not start with "weir." (reserved for weir's own shards).
absl::Status validate_name(std::string_view name);

// Whether the store has a shard called `shard`; it must create nothing.
using ShardExists = std::function<absl::StatusOr<bool>(const std::string& shard)>;

// The shards of `client`'s store, looked up with find_shard (which creates nothing).
// REQUIRES: `client` outlives the result.
ShardExists shards_of(persist::PersistClient& client);

// `spec` checked on its own and completed as the catalog stores it: a source's options in the
// canonical form of ingest::parse_source_spec (numbers normalised, sorted), a view's inputs and
// output filled in. InvalidArgument naming the object (`name`) and the thing otherwise.
absl::StatusOr<ObjectSpec> complete_spec(std::string_view name, const ObjectSpec& spec);

// Whether `change` may be applied to `catalog` (see above). With `exists`, an input or held shard
// that no live object writes must exist in the store; without it (null), that check is skipped.
// A lookup's own error (the store is unavailable) is returned as it is.
absl::Status validate(const Change& change, const CatalogSnapshot& catalog,
                      const ShardExists& exists = nullptr);

// What a replica checks of each live object before it runs it (the catalog may hold rows written
// without validation): its name, its spec, and that it shares no shard with another live object.
absl::Status validate_live(const CatalogObject& object, const CatalogSnapshot& catalog);

// The catalog's source definition as ingest's, and back (the same fields; nothing is checked).
ingest::SourceSpec to_ingest_spec(const SourceSpec& spec);
SourceSpec from_ingest_spec(const ingest::SourceSpec& spec);

// The prefix of the shards a source writes (`<prefix>.<table>`, `<prefix>.status`, ...): the
// load generator's kind, or a database source's --name (pg, mysql by default). InvalidArgument
// as complete_spec for a definition that does not parse.
absl::StatusOr<std::string> shard_prefix(const SourceSpec& spec);

}  // namespace weir::control
