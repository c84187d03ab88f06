// The MySQL-family source (MariaDB) for the ingestion driver (`weir ingest --source mysql`).
//
// Shards are named `<kind>.<table>` (kind "mysql" unless said otherwise) for the tables of the
// connection string's database. Each export's relation description is recorded in
// `<kind>.schemas` when its snapshot starts, with the catalog's columns (key "@columns:<table>"),
// which decode the binlog's rows after a restart as they did before; and the GTID domain and
// server id of the binlog (key "@gtid-origin"): a binlog of another domain or server later is a
// definite error of every export.
//
// Thread safety: the returned source is used as IngestSource requires.

#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "weir/ingest/ingest.h"

namespace weir::ingest {

struct MysqlIngestOptions {
  std::string conninfo;        // "host=... port=... user=... password=... database=..."
  std::string kind = "mysql";  // Shard name prefix.
  size_t workers = 1;          // The driver's (IngestOptions::workers).
  sources::ProgressMode mode = sources::ProgressMode::kConcurrent;
  // The binlog dump's server id, unique among the server's replicas (0: derived from
  // `replica_key`, a hash in [2^31, 2^32)).
  uint32_t replica_server_id = 0;
  std::string replica_key;
  // Stop once every table holds every transaction up to this GTID sequence number.
  std::optional<uint64_t> until_seq;
  std::chrono::milliseconds heartbeat{1000};
};

std::shared_ptr<IngestSource> make_mysql_source(MysqlIngestOptions options);

}  // namespace weir::ingest
