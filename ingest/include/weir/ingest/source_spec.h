// SourceSpec: what a source ingests, as text that can be stored and read back: the `weir ingest`
// flags that define the source, without the ones that say how a process runs it.
//
// `weir ingest` parses its flags into a SourceSpec and turns that into IngestOptions here; a
// catalog stores the same SourceSpec and a replica turns it into IngestOptions the same way, so a
// definition means the same wherever it is run, and a bad one gets the same error everywhere.
//
//   auto spec = parse_source_spec({{"source", "loadgen:auction"}, {"scale", "10"}});
//   auto options = to_ingest_options(*spec, {.location = location, .location_key = dir});
//   options->stop = stop;  // and the other process-level options
//   run_ingest(*options);
//
// What is in a SourceSpec: --source, --tables and every other flag of `weir ingest` that decides
// what is ingested (scale, rate, until, mode, seed, snapshot-rows, fault, transient-fault,
// add-table, add-after, compaction-window, conn, publication, slot, name, until-lsn,
// until-gtid, server-id). What is not: the persist location (--persist, --blob, --consensus),
// --workers, --http, --quiet, --log-level and --inject-faults, which say how a process runs it.
// A flag that was not given is absent: its default is applied by to_ingest_options.
//
// Thread safety: value types and stateless functions.

#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "weir/ingest/ingest.h"
#include "weir/ingest/mysql.h"
#include "weir/ingest/postgres.h"
#include "weir/persist/config.h"

namespace weir::ingest {

// The largest --scale: its snapshot has 1000 * scale rows per table at most, far more than a run
// can ingest, far from overflowing.
inline constexpr uint64_t kMaxScale = 1'000'000;
// The largest --add-after, in seconds: in milliseconds it fits an int64_t.
inline constexpr double kMaxAddAfterSeconds = 1e9;

// A source definition in canonical form (parse_source_spec makes one): two definitions that say
// the same compare equal.
struct SourceSpec {
  // As `weir ingest --source`: loadgen:counter, loadgen:auction, postgres or mysql.
  std::string source = "loadgen:auction";
  // Every other defining flag that was given: the flag's name without its leading dashes
  // ("compaction-window") and its value, sorted by name, each name once. Numbers are in
  // canonical form ("010" is "10"); snapshot-rows is one list "TABLE=N,TABLE=N" sorted by table.
  std::vector<std::pair<std::string, std::string>> options;
  // --tables, in the order given (empty: every table of the source).
  std::vector<std::string> tables;

  bool operator==(const SourceSpec&) const = default;
};

// Checks and normalises flags as `weir ingest` got them: `flags` holds (name, value) pairs with
// the names as in SourceSpec, "source" and "tables" included, in any order. tables and
// snapshot-rows are lists: each value may hold several elements separated by commas, and the name
// may come more than once; any other name may come once. Each value is checked as `weir ingest`
// checks its flag (with the same message, "--scale: expected a whole number from 0 to 1000000,
// got \"-1\""), then the flags together: --add-after needs --add-table, and a load generator's
// tables must be its own. Returns InvalidArgument naming the flag for a bad value or an unknown
// or process-level name.
absl::StatusOr<SourceSpec> parse_source_spec(
    std::span<const std::pair<std::string, std::string>> flags);

// Checks one value of flag `name` (without dashes; "source" and "tables" too) as
// parse_source_spec does, and rewrites it in canonical form. For a list (tables, snapshot-rows)
// `value` is one element. The message names the flag ("--scale: ..."). Used to check a flag as
// it is parsed, before any work.
absl::Status check_source_flag(std::string_view name, std::string& value);

// True if `name` (without dashes) is a flag of a SourceSpec, "source" and "tables" included.
bool is_source_flag(std::string_view name);

// The value flag `name` takes when it is not given, as --help shows it ("1" for scale), or ""
// where there is none to show: its absence means something (no until: no end) or the default
// depends on other flags (name: pg or mysql) or on the process (slot).
std::string source_flag_default(std::string_view name);

// How a process runs a source, as far as IngestOptions depend on it (the rest, such as stop, log
// and on_worker, the caller adds).
struct RunSettings {
  persist::PersistLocation location;
  // The persist location as its user named it, from which the defaults tied to a location are
  // derived: the PostgreSQL slot (default_slot_name) and the MariaDB server id. `weir ingest`
  // passes the --persist directory, else "BLOB_URL CONSENSUS_URL".
  std::string location_key;
  size_t workers = 1;  // -w
};

// The IngestOptions of `spec` as `weir ingest` runs it with `settings`. `spec` is checked as
// parse_source_spec checks it (a hand-made or stored one may be anything), and then as a whole:
// a PostgreSQL source needs conn and publication, a MariaDB one conn. Nothing is connected to
// or opened here.
absl::StatusOr<IngestOptions> to_ingest_options(const SourceSpec& spec,
                                                const RunSettings& settings);

// The parts to_ingest_options makes IngestOptions::upstream from, for a postgres or mysql spec.
absl::StatusOr<PostgresIngestOptions> to_postgres_options(const SourceSpec& spec,
                                                          const RunSettings& settings);
absl::StatusOr<MysqlIngestOptions> to_mysql_options(const SourceSpec& spec,
                                                    const RunSettings& settings);

// Whether `spec` may be stored where others can read it (a catalog): refuses a connection string
// that holds a password (password= or sslpassword= among libpq's or MariaDB's key=value pairs or
// in a URL's query, or user:password@ in a URL), with InvalidArgument saying where to give the
// password instead (PGPASSFILE or PGPASSWORD, MYSQL_PWD). `weir ingest` does not call it: a
// password on its own command line is its user's business.
absl::Status check_storable(const SourceSpec& spec);

// The spec as `weir ingest` flags: "--source loadgen:auction --scale 10 --tables bids,users".
std::string to_string(const SourceSpec& spec);

}  // namespace weir::ingest
