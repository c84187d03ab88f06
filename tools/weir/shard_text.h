// What `weir persist` and `weir subscribe` share: where the stores are (flags), and a shard's rows
// as text (typed rows as COPY prints them, other data escaped onto one line).

#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include <CLI/CLI.hpp>

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
};

// Adds the store flags to `app`, for a command that reads a location that exists: a path that
// holds none is an error naming the flag ("no persist location at DIR"), before anything is
// created there.
void add_store_flags(CLI::App& app, StoreFlags& flags);

// The store flags of a command that may create the location it is given (a first run): a path
// must be a directory or nothing yet.
void add_writable_store_flags(CLI::App& app, StoreFlags& flags);

// --reader-lease SECONDS, for a command that reads through a leased reader (subscribe, persist
// cat). A reader killed before it could let go of its hold (SIGKILL) keeps the shard's since and
// consensus versions until its lease runs out without a heartbeat (a live one renews it every
// quarter of it); 60 s by default, where persist's own default is 15 minutes.
void add_reader_lease_flag(CLI::App& app, StoreFlags& flags);

// The client configuration the flags ask for (the reader lease).
persist::PersistConfig store_config(const StoreFlags& flags);

// The location the flags name: InvalidArgument if they name none.
absl::StatusOr<persist::PersistLocation> store_location(const StoreFlags& flags);

// Data bytes as one line: printable ASCII as is, '\\', tab and newline as C escapes, other bytes
// as \xNN.
std::string escape(std::string_view data);

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
