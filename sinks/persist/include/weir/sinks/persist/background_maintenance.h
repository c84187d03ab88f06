// BackgroundMaintenance: compaction and garbage collection of shards on a thread of their own.
//
// A long-running writer needs it. Without it every append adds a batch to the shard's state (and
// every later state is encoded and written whole), and consensus keeps every version: a sink that
// appends ten times a second would write states of thousands of batches, gigabytes within minutes.

#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

#include "weir/sinks/persist/client.h"

namespace weir::persist {

// Every `interval`, compacts (PersistClient::compact, geometric batch sizes) and then
// garbage-collects (PersistClient::gc) each shard in `names`. Both are safe alongside writers and
// readers: they change a state only by compare-and-set and never touch what a reader may still
// read or a live writer may still append. A failed pass is reported to `on_error` (if given) and
// retried at the next interval.
//
// Thread safety: construction and destruction on one thread; on_error runs on the maintenance
// thread.
class BackgroundMaintenance {
 public:
  BackgroundMaintenance(std::shared_ptr<PersistClient> client, std::vector<std::string> names,
                        absl::Duration interval,
                        std::function<void(const absl::Status&)> on_error = nullptr);
  // Finishes the pass under way, if any, and stops.
  ~BackgroundMaintenance();
  BackgroundMaintenance(const BackgroundMaintenance&) = delete;
  BackgroundMaintenance& operator=(const BackgroundMaintenance&) = delete;

  // Passes completed (every shard compacted and collected), for tests.
  size_t passes() const;

 private:
  void run();

  const std::shared_ptr<PersistClient> client_;
  const std::vector<std::string> names_;
  const absl::Duration interval_;
  const std::function<void(const absl::Status&)> on_error_;
  mutable std::mutex mu_;
  std::condition_variable stop_changed_;
  bool stop_ = false;   // Guarded by mu_.
  size_t passes_ = 0;   // Guarded by mu_.
  std::thread thread_;  // Last: starts once the rest is set.
};

}  // namespace weir::persist
