// PersistConfig: tuning knobs of a PersistClient, and PersistLocation: where a persist
// environment keeps its data.
//
// Thread safety: plain values.

#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "weir/persist/relay.h"

namespace weir::persist {

// A Blob URL and a Consensus URL (see Blob::open and Consensus::open).
struct PersistLocation {
  std::string blob_url;
  std::string consensus_url;

  // The `--persist DIR` shorthand: blobs in DIR/blob, consensus in the SQLite file
  // DIR/consensus.db.
  static PersistLocation in_directory(std::string_view dir);
};

struct PersistConfig {
  // A part is cut when the updates buffered for it reach this many bytes (data + 16 each).
  size_t part_target_bytes = size_t{8} << 20;
  // Parts a BatchBuilder may have being encoded or uploaded before add() waits for one. A
  // builder's memory is about this many parts plus the one filling.
  size_t max_parts_in_flight = 4;
  // zstd level for parts. The default, -3 (a fast level), compresses table-like rows about 1.7x
  // at about 1.6x the speed of level 1 (2.8x): compression is most of a writer's CPU. Use 1 or more
  // where storage or bandwidth, not CPU, is what is scarce.
  int zstd_level = -3;
  // Threads that encode, compress, upload, fetch and decode parts. 0: two per core (uploads wait
  // for fsync part of the time), from 4 to 16.
  int io_threads = 0;
  // Writers and leased readers that do not heartbeat for this long may be expired by GC, which
  // then removes the parts they had not appended yet.
  absl::Duration writer_lease = absl::Minutes(15);
  absl::Duration reader_lease = absl::Minutes(15);
  // compare_and_append reports maintenance_due once the shard holds more batches than this, and
  // whenever the state's seqno passes a multiple of maintenance_seqno_interval (so that GC
  // truncates consensus regularly).
  size_t maintenance_batch_threshold = 32;
  uint64_t maintenance_seqno_interval = 128;
  // Compaction merges at most this many runs in one step; its memory is about that many parts.
  size_t compaction_max_runs = 16;
  // The wall clock for leases and heartbeats. Tests move it forward to expire leases.
  std::function<absl::Time()> clock = [] { return absl::Now(); };
  // Where appends publish their new uppers and readers that follow a shard hear of them (see
  // relay.h). Null: nowhere; readers only poll.
  std::shared_ptr<UpperRelay> relay = process_relay();
};

}  // namespace weir::persist
