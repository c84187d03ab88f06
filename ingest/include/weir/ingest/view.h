// Maintained views over the auction load generator's shards, exactly once: `weir view`, and later
// a replica's catalog-defined views, run them with run_view.
//
// - bids-per-auction: "AUCTION,BIDS" per auction with at least one bid (count by key).
// - max-bid: "AUCTION,AMOUNT,BID,BUYER,REGION": each auction's highest bid (ties: the higher bid
//   id) with its bidder's region (a join of bids with users, then a reduce).
//
// The inputs are read with persist_source (weir/sources/persist_source.h), the view computed with
// weir::collections, the result written with the persist sink into the output shard. A run
// resumes from the output's upper: the inputs are read as of upper - 1 (their snapshot rebuilds
// the operators' state) and the sink drops what the output already holds, so the output is the
// same whatever the crashes, stops and restarts. Rows that do not parse, and the inputs' definite
// errors, go into the output as error rows ("!error: ...").
//
// Each input holds a critical since for the view (view_hold_id), so that compaction never passes
// what a restart needs. Every run takes the holds over with one epoch above all of theirs (a
// compare-and-set each, so two runs that start together get different epochs), and opens the
// output's writer and its maintenance with that epoch as a persist fence (weir/persist/fence.h,
// owner "weir view VIEW -> OUTPUT epoch N (host:pid)"): a later run of the same view (the higher
// epoch) fences the earlier one out, whose next append is refused and which ends with that error
// (persist::is_fenced, naming the later run). The readers of the input shards carry no fence: those
// shards are ingest's, fenced by its incarnations, whose next one would remove a reader of a view's
// epoch.
//
// Thread safety: run_view blocks; runs of different views may share a process.

#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

#include "weir/ingest/ingest.h"
#include "weir/persist/blob.h"
#include "weir/persist/config.h"
#include "weir/persist/consensus.h"
#include "weir/persist/ids.h"

namespace weir::ingest {

struct ViewOptions {
  std::string view;    // One of known_views().
  std::string output;  // The output shard; empty: "view." + view.
  // End once the output is complete before this time (its upper reaches it); unset: follow the
  // inputs until stopped.
  std::optional<uint64_t> until;
  size_t workers = 1;
  persist::PersistLocation location;
  persist::PersistConfig persist;  // Tuning of the persist client (defaults).
  // Optional: stores to use instead of opening `location`'s. Both or neither.
  std::shared_ptr<persist::Blob> blob;
  std::shared_ptr<persist::Consensus> consensus;
  // Set to stop: the dataflow is dropped and run_view returns OK (what is durable stays).
  std::shared_ptr<std::atomic<bool>> stop;
  // Events (a maintenance failure, a maintenance that did not settle: warnings); may be null.
  std::function<void(LogSeverity, const std::string&)> log_event;
  // Optional: called once the run has taken its input holds over and before it fences the output
  // (opens its writer); an error ends the run with it. See IngestOptions::check_before_fencing.
  std::function<absl::Status()> check_before_fencing;
};

// The views run_view knows, by name.
const std::vector<std::string>& known_views();

// The shards `view` reads, in the order its rendering takes them; empty for an unknown view.
std::vector<std::string> view_inputs(std::string_view view);

// The critical reader id of the view's hold on `input`, the same in every run (derived from the
// output and input names, so a restart finds the hold again without storing its id anywhere).
persist::CriticalReaderId view_hold_id(const std::string& output, const std::string& input);

// Runs the view until its output is complete before `until`, or until stopped. Returns at once
// if the output is sealed or already complete before `until`. Errors: InvalidArgument for an
// unknown view, NotFound for a missing input shard ("run weir ingest first"), a persist::is_fenced
// error naming the later run once one took the output over, or the error that failed the
// dataflow. The output's maintenance is waited for at most a minute at the end (a warning if it
// had not settled).
absl::Status run_view(const ViewOptions& options);

}  // namespace weir::ingest
