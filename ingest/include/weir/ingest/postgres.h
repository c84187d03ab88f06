// The PostgreSQL source for the ingestion driver (`weir ingest --source postgres`).
//
// Shards are named `<kind>.<schema>.<table>` (kind "pg" unless said otherwise). Each export's
// relation description (columns, types, nullability) is recorded in `<kind>.schemas` when its
// snapshot starts; its rows are encoded with it, and `weir persist cat` prints them with it.
// The identity recorded in `<kind>.source` is the server's system identifier, the publication
// and the slot: pointing a persist location at another server is refused.
//
// Before every epoch the driver's plan re-checks the upstream (the publication, the slot) and
// marks an export errored (a definite error at its upper) whose table left the publication or
// was dropped, or whose upper the slot has confirmed past (changes would be lost).
//
// Thread safety: the returned source is used as IngestSource requires.

#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "weir/ingest/ingest.h"

namespace weir::ingest {

struct PostgresIngestOptions {
  std::string conninfo;     // libpq: a URL or key=value pairs.
  std::string publication;  // Must exist.
  std::string slot;         // Created (logical, pgoutput) if missing.
  std::string kind = "pg";  // Shard name prefix.
  size_t workers = 1;       // The driver's (IngestOptions::workers).
  sources::ProgressMode mode = sources::ProgressMode::kConcurrent;
  // Stop once every table's upper reaches this LSN (tests and benchmarks).
  std::optional<sources::Offset> until;
  std::chrono::milliseconds status_interval{200};
};

// The default slot name for a persist location: "weir_" and a hash of it, so that two persist
// locations never share a slot.
std::string default_slot_name(const std::string& persist_location);

std::shared_ptr<IngestSource> make_postgres_source(PostgresIngestOptions options);

}  // namespace weir::ingest
