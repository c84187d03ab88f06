#include "weir/sinks/persist/background_maintenance.h"

#include <chrono>
#include <utility>

namespace weir::persist {

BackgroundMaintenance::BackgroundMaintenance(std::shared_ptr<PersistClient> client,
                                             std::vector<std::string> names,
                                             absl::Duration interval,
                                             std::function<void(const absl::Status&)> on_error)
    : client_(std::move(client)),
      names_(std::move(names)),
      interval_(interval),
      on_error_(std::move(on_error)),
      thread_([this] { run(); }) {}

BackgroundMaintenance::~BackgroundMaintenance() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  stop_changed_.notify_all();
  thread_.join();
}

size_t BackgroundMaintenance::passes() const {
  std::lock_guard lock(mu_);
  return passes_;
}

void BackgroundMaintenance::run() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      if (stop_changed_.wait_for(lock, absl::ToChronoNanoseconds(interval_),
                                 [&] { return stop_; })) {
        return;
      }
    }
    for (const std::string& name : names_) {
      absl::Status status = client_->compact(name).status();
      if (status.ok()) {
        status = client_->gc(name).status();
      }
      if (!status.ok() && status.code() != absl::StatusCode::kNotFound && on_error_) {
        on_error_(status);  // NotFound: the shard has not been created yet.
      }
    }
    std::lock_guard lock(mu_);
    ++passes_;
  }
}

}  // namespace weir::persist
