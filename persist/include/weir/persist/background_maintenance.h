// BackgroundMaintenance: maintenance (compaction, then GC) of the shards whose appends report
// maintenance_due, on a thread of its own, in turns: a turn compacts a shard by at most
// kStepsPerTurn merges, then collects its garbage (truncating consensus, removing blobs); a shard
// whose compaction is not done goes to the back of the queue. So a shard that fell behind its
// appends (a slow store, a starved thread) catches up without stopping the truncation of its
// versions, or the maintenance of every other shard, until it has.
//
// A long-running writer needs it. Without it every append adds a batch to the shard's state (and
// every later state is encoded and written whole), and consensus keeps every version: a sink that
// appends a hundred times a second would write states of thousands of batches, gigabytes within
// a minute.

#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"

#include "weir/mutex.h"
#include "weir/persist/client.h"

namespace weir::persist {

// Maintenance is safe alongside writers and readers: it changes a state only by compare-and-set
// and never removes what a reader may still read or a live writer may still append. A failed
// maintain is reported to `on_error` (if given); the shard's next maintenance_due asks again.
// Compactions run with `fence` (see fence.h): once a later process fences the shards, this one's
// compactions are refused (reported to on_error) instead of holding back its GC.
//
// Thread safety: request() from any thread; on_error runs on the maintenance thread.
class BackgroundMaintenance {
 public:
  explicit BackgroundMaintenance(std::shared_ptr<PersistClient> client,
                                 std::function<void(const absl::Status&)> on_error = nullptr,
                                 Fence fence = {});
  // Merge steps a turn of one shard's compaction takes before its GC runs.
  static constexpr size_t kStepsPerTurn = 8;

  // Finishes the turn under way, if any; drops the requests still waiting.
  ~BackgroundMaintenance();
  BackgroundMaintenance(const BackgroundMaintenance&) = delete;
  BackgroundMaintenance& operator=(const BackgroundMaintenance&) = delete;

  // Asks for a maintain of shard `name` (as named to the client). Never blocks; a request for a
  // shard already waiting is merged with it.
  void request(const std::string& name);

  // Returns once every request made before the call has been carried out, and the compactions
  // they started have settled (the turn under way, then those waiting). Call it once appends
  // have stopped: a compaction that another writer keeps busy may not settle. A writer that stops
  // cleanly calls it, so that what it leaves behind is maintained however far the thread had fallen
  // behind its appends.
  void finish();
  // As finish, for `limit` at the longest: true if everything settled, false if work was still
  // waiting or under way when the limit passed (it goes on until the destructor). A backlog
  // whose GC a dead process's reader lease holds back can take many minutes to settle; a writer
  // that must stop in bounded time leaves it to the next writer's maintenance.
  bool finish_within(std::chrono::steady_clock::duration limit);

  // Turns finished, successful or not (for tests).
  size_t completed() const;

 private:
  void run();
  // finish (no deadline) and finish_within: true once nothing waits or runs.
  bool settle(std::optional<std::chrono::steady_clock::time_point> deadline);

  const std::shared_ptr<PersistClient> client_;
  const std::function<void(const absl::Status&)> on_error_;
  const Fence fence_;
  mutable weir::Mutex mu_;
  weir::CondVar changed_;
  std::deque<std::string> waiting_ ABSL_GUARDED_BY(mu_);  // No name twice.
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  size_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // A maintain is under way.
  std::thread thread_;                      // Last: starts once the rest is set.
};

}  // namespace weir::persist
