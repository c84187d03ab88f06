// BackgroundMaintenance: PersistClient::maintain (compaction, then GC) of the shards whose appends
// report maintenance_due, on a thread of its own.
//
// A long-running writer needs it. Without it every append adds a batch to the shard's state (and
// every later state is encoded and written whole), and consensus keeps every version: a sink that
// appends a hundred times a second would write states of thousands of batches, gigabytes within
// a minute.

#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"

#include "weir/persist/client.h"

namespace weir::persist {

// Maintenance is safe alongside writers and readers: it changes a state only by compare-and-set
// and never removes what a reader may still read or a live writer may still append. A failed
// maintain is reported to `on_error` (if given); the shard's next maintenance_due asks again.
//
// Thread safety: request() from any thread; on_error runs on the maintenance thread.
class BackgroundMaintenance {
 public:
  explicit BackgroundMaintenance(std::shared_ptr<PersistClient> client,
                                 std::function<void(const absl::Status&)> on_error = nullptr);
  // Finishes the maintain under way, if any; drops the requests still waiting.
  ~BackgroundMaintenance();
  BackgroundMaintenance(const BackgroundMaintenance&) = delete;
  BackgroundMaintenance& operator=(const BackgroundMaintenance&) = delete;

  // Asks for a maintain of shard `name` (as named to the client). Never blocks; a request for a
  // shard already waiting is merged with it.
  void request(const std::string& name);

  // Maintains finished, successful or not (for tests).
  size_t completed() const;

 private:
  void run();

  const std::shared_ptr<PersistClient> client_;
  const std::function<void(const absl::Status&)> on_error_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::deque<std::string> waiting_;  // Guarded by mu_; no name twice.
  bool stop_ = false;                // Guarded by mu_.
  size_t completed_ = 0;             // Guarded by mu_.
  std::thread thread_;               // Last: starts once the rest is set.
};

}  // namespace weir::persist
