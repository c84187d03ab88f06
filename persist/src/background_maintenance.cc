#include "weir/persist/background_maintenance.h"

#include <algorithm>
#include <utility>

#include "weir/mutex.h"

namespace weir::persist {

BackgroundMaintenance::BackgroundMaintenance(std::shared_ptr<PersistClient> client,
                                             std::function<void(const absl::Status&)> on_error)
    : client_(std::move(client)), on_error_(std::move(on_error)), thread_([this] { run(); }) {}

BackgroundMaintenance::~BackgroundMaintenance() {
  {
    weir::MutexLock lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void BackgroundMaintenance::request(const std::string& name) {
  {
    weir::MutexLock lock(mu_);
    if (std::find(waiting_.begin(), waiting_.end(), name) != waiting_.end()) {
      return;
    }
    waiting_.push_back(name);
  }
  changed_.notify_all();
}

void BackgroundMaintenance::finish() {
  weir::MutexLock lock(mu_);
  while (!stop_ && (busy_ || !waiting_.empty())) {
    changed_.wait(mu_);
  }
}

size_t BackgroundMaintenance::completed() const {
  weir::MutexLock lock(mu_);
  return completed_;
}

void BackgroundMaintenance::run() {
  for (;;) {
    std::string name;
    {
      weir::MutexLock lock(mu_);
      while (!stop_ && waiting_.empty()) {
        changed_.wait(mu_);
      }
      if (stop_) {
        return;
      }
      name = std::move(waiting_.front());
      waiting_.pop_front();
      busy_ = true;
    }
    const absl::StatusOr<bool> settled = client_->maintain_turn(name, kStepsPerTurn);
    if (!settled.ok() && on_error_) {
      on_error_(settled.status());
    }
    {
      weir::MutexLock lock(mu_);
      ++completed_;
      busy_ = false;
      // Compaction is behind: another turn, after the shards already waiting.
      if (settled.ok() && !*settled &&
          std::find(waiting_.begin(), waiting_.end(), name) == waiting_.end()) {
        waiting_.push_back(std::move(name));
      }
    }
    changed_.notify_all();
  }
}

}  // namespace weir::persist
