#include "weir/persist/background_maintenance.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "weir/mutex.h"

namespace weir::persist {

BackgroundMaintenance::BackgroundMaintenance(std::shared_ptr<PersistClient> client,
                                             std::function<void(const absl::Status&)> on_error,
                                             Fence fence)
    : client_(std::move(client)),
      on_error_(std::move(on_error)),
      fence_(std::move(fence)),
      thread_([this] { run(); }) {}

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

void BackgroundMaintenance::finish() { settle(std::nullopt); }

bool BackgroundMaintenance::finish_within(std::chrono::steady_clock::duration limit) {
  return settle(std::chrono::steady_clock::now() + limit);
}

bool BackgroundMaintenance::settle(std::optional<std::chrono::steady_clock::time_point> deadline) {
  weir::MutexLock lock(mu_);
  while (!stop_ && (busy_ || !waiting_.empty())) {
    if (!deadline) {
      changed_.wait(mu_);
    } else if (!changed_.wait_until(mu_, *deadline)) {
      return !busy_ && waiting_.empty();  // The deadline passed.
    }
  }
  return true;
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
    const PersistClient::MaintainTurn turn =
        client_->maintain_turn(name, {.max_steps = kStepsPerTurn, .fence = fence_});
    if (!turn.status.ok() && on_error_) {
      on_error_(turn.status);
    }
    {
      weir::MutexLock lock(mu_);
      ++completed_;
      busy_ = false;
      // Compaction made progress and is not done: another turn, after the shards already
      // waiting (whatever GC did: a blob it could not remove must not stop the compaction).
      // A compaction that failed is not retried here; the shard's next request asks again.
      if (turn.more && std::find(waiting_.begin(), waiting_.end(), name) == waiting_.end()) {
        waiting_.push_back(std::move(name));
      }
    }
    changed_.notify_all();
  }
}

}  // namespace weir::persist
