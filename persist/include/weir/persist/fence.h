// Fence: which process may write a shard. A process that takes over a shard from a predecessor
// (a later incarnation, a replica's later execution) opens its handles with a higher epoch than
// the predecessor's; from then on the predecessor's handles are gone from the shard.
//
//   persist::Fence fence{incarnation, "ingest auction incarnation 7 (host:1234)"};
//   WEIR_ASSIGN_OR_RETURN(WriteHandle writer, client->open_writer("auction.bids", "ingest",
//   fence));
//
// Every shard keeps the highest epoch that fenced it (0 until one does) and its owner. Opening a
// writer with a non-zero epoch raises the shard's fence to it, in the same compare-and-set that
// registers the writer, and removes every writer and leased reader registered with a lower
// non-zero epoch. Opening a handle with an epoch below the shard's fence is refused. A removed
// writer's appends and a removed reader's reads are refused: FailedPrecondition, recognised by
// is_fenced, naming the shard and the fence's owner. So once a successor has opened its writer,
// no append of a predecessor lands (an append that committed before that is in the shard; the
// predecessor's retry of it reports the outcome indeterminate, and is_fenced, never a refusal
// that would have the caller discard its parts; a successor cannot learn that outcome).
//
// Epoch 0 is "no fence": such a handle neither fences nor is fenced (tools, ad hoc readers).
// Epochs compare only with each other on one shard: a shard's epochs come from one sequence,
// that of the process kind that owns it (ingest's per-source incarnations); two handles of one
// epoch do not fence each other. Compaction runs with the fence of the process that asks for it
// (CompactionOptions::fence; it raises the fence as a writer does), so a predecessor's
// compaction stops too; GC takes none (it removes only what no registered writer may still
// append); critical since holds have their own epochs (SinceHandle). An owner that is not UTF-8
// is kept with its bytes escaped.
//
// Thread safety: a value type.

#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace weir::persist {

struct Fence {
  uint64_t epoch = 0;  // 0: no fence.
  std::string owner;   // Who holds it, for the errors of the handles it fences out.
};

// True for the error of a handle a higher fence removed, or that was opened below the fence.
bool is_fenced(const absl::Status& status);

}  // namespace weir::persist
