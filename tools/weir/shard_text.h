// What `weir persist` and `weir subscribe` share: where the stores are (flags), and a shard's rows
// as text (typed rows as COPY prints them, other data escaped onto one line).

#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include <CLI/CLI.hpp>

#include "weir/escape.h"
#include "weir/persist/client.h"
#include "weir/sources/postgres/value.h"

namespace weir::tools {

// --persist DIR, or --blob URL and --consensus URL.
struct StoreFlags {
  std::string dir;
  std::string blob_url;
  std::string consensus_url;
  // The lease of the command's leased readers (--reader-lease; see add_reader_lease_flag).
  double reader_lease_s = 60;
  std::string pubsub;  // --pubsub HOST:PORT (add_pubsub_flag); empty: this process's relay only.
};

// What the store flags of a command may name.
enum class StoreUse {
  kExisting,  // A location that exists: the command reads it.
  kAny,       // Also one where nothing is yet: the command may create it (`weir ctl create`).
};

// Adds the store flags to `app`. For kExisting, a path that holds no location is an error naming
// the flag ("no persist location at DIR"), before anything is created there; for kAny, only a
// path that cannot be one (a regular file) is.
void add_store_flags(CLI::App& app, StoreFlags& flags, StoreUse use = StoreUse::kExisting);

// For a command whose flags take kAny and which reads the location: the error (InvalidArgument
// naming the flag) that kExisting would have given at parse time; OK if the location exists.
absl::Status check_store_exists(const StoreFlags& flags);

// Whether there may be a location where the flags point: false only where there is surely none
// (no DIR/consensus.db, no sqlite:// file). A server (postgres://) or mem:// counts as one.
bool store_may_exist(const StoreFlags& flags);

// --reader-lease SECONDS, for a command that reads through a leased reader (subscribe, persist
// cat). A reader killed before it could let go of its hold (SIGKILL) keeps the shard's since and
// consensus versions until its lease runs out without a heartbeat (a live one renews it every
// quarter of it); 60 s by default, where persist's own default is 15 minutes.
void add_reader_lease_flag(CLI::App& app, StoreFlags& flags);

// --pubsub HOST:PORT (or WEIR_PUBSUB): the `weir pubsub` that carries news of appends between
// processes (pubsub/README.md), for a command that writes shards or follows them.
void add_pubsub_flag(CLI::App& app, std::string& address);

// The upper relay of a command: one linked to the `weir pubsub` at `address`, or this process's
// own (persist::process_relay()) when it is empty.
std::shared_ptr<persist::UpperRelay> relay_for(const std::string& address);

// The client configuration the flags ask for (the reader lease, the relay).
persist::PersistConfig store_config(const StoreFlags& flags);

// The location the flags name: InvalidArgument if they name none.
absl::StatusOr<persist::PersistLocation> store_location(const StoreFlags& flags);

// The relation description of a typed shard (`<kind>.<table>` of a source with a schema, recorded
// in `<kind>.schemas`), if it has one.
absl::StatusOr<std::optional<sources::postgres::RelationDesc>> relation_of(
    persist::PersistClient& client, const std::string& shard);

// Appends `data` to `line`: with a relation, as COPY prints the row (tab-separated columns, \N for
// NULL), unless it is a definite error ("!..."); otherwise escaped. DataLoss, naming `shard`, if
// a row does not decode with the relation.
absl::Status append_row(const std::optional<sources::postgres::RelationDesc>& relation,
                        const std::string& shard, std::string_view data, std::string& line);

}  // namespace weir::tools
