#include "weir/worker/execute.h"

#include <exception>
#include <string>
#include <thread>

namespace weir::internal {
namespace {

void run_one(Worker& worker, const std::function<void(Worker&)>& per_worker) {
  try {
    per_worker(worker);
    while (worker.has_dataflows() && !worker.failed()) worker.step_or_park(std::nullopt);
  } catch (const std::exception& e) {
    worker.fail(
        absl::InternalError("worker " + std::to_string(worker.index()) + " failed: " + e.what()));
  } catch (...) {
    worker.fail(absl::InternalError("worker " + std::to_string(worker.index()) +
                                    " failed: unknown exception"));
  }
}

}  // namespace

absl::Status run_workers(const Config& config, const std::function<void(Worker&)>& per_worker) {
  if (absl::Status status = config.validate(); !status.ok()) return status;
  auto process = std::make_shared<ProcessShared>(config.workers, config.processes, config.process);
  std::unique_ptr<Transport> transport;
  if (config.processes > 1) {
    auto made = config.transport(config, *process);
    if (!made.ok()) return made.status();
    transport = std::move(*made);
    process->set_transport(transport.get());
  }
  std::vector<std::thread> threads;
  threads.reserve(config.workers - 1);
  for (size_t i = 1; i < config.workers; ++i) {
    threads.emplace_back([&, i] {
      Worker worker(i, process);
      run_one(worker, per_worker);
    });
  }
  {
    Worker worker(0, process);
    run_one(worker, per_worker);
  }
  for (auto& thread : threads) thread.join();
  if (transport) {
    absl::Status closed = transport->close();
    if (process->status().ok() && !closed.ok()) return closed;
  }
  return process->status();
}

}  // namespace weir::internal
