#include "weir/worker/execute.h"

#include <csignal>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "log_file.h"
#include "watchdog.h"

#include "weir/usage_error.h"

namespace weir::internal {
namespace {

void run_one(Worker& worker, const std::function<void(Worker&)>& per_worker,
             const std::shared_ptr<LogFile>& log_file) {
  if (log_file) worker.log_to(log_file->sink());
  // A rule broken by the closure fails the worker even if the closure caught the UsageError (as
  // one broken inside an operator does).
  const uint64_t broken_rules = usage_errors;
  try {
    per_worker(worker);
    if (usage_errors != broken_rules && !worker.failed()) [[unlikely]] {
      throw UsageError(last_usage_error);
    }
    while (worker.has_dataflows() && !worker.failed()) worker.step_or_park(std::nullopt);
  } catch (const ExecutionFailed&) {
    // The execution failed elsewhere (recorded already): the closure is unwound.
  } catch (const UsageError& e) {
    worker.fail(absl::FailedPreconditionError("worker " + std::to_string(worker.index()) +
                                              " broke a rule: " + e.what()));
  } catch (const std::exception& e) {
    worker.fail(
        absl::InternalError("worker " + std::to_string(worker.index()) + " failed: " + e.what()));
  } catch (...) {
    worker.fail(absl::InternalError("worker " + std::to_string(worker.index()) +
                                    " failed: unknown exception"));
  }
}

// With WEIR_STALL_REPORT_AFTER set, SIGUSR1 asks every worker for its progress report (unless the
// program handles SIGUSR1 itself).
void install_report_signal() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto after = stall_report_after_from_env();
    if (!after.ok() || !after->has_value()) return;
    struct sigaction current {};
    if (sigaction(SIGUSR1, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;
    struct sigaction action {};
    action.sa_handler = [](int) { request_progress_reports(); };
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &action, nullptr);
  });
}

}  // namespace

absl::Status run_workers(const Config& config, const std::function<void(Worker&)>& per_worker) {
  if (absl::Status status = config.validate(); !status.ok()) return status;
  if (auto after = stall_report_after_from_env(); !after.ok()) return after.status();
  install_report_signal();
  // WEIR_LOG=FILE: this process's workers write their events to FILE (FILE.<process> in a
  // cluster, so processes on one machine do not overwrite each other).
  std::shared_ptr<LogFile> log_file;
  if (std::string path = log_path_from_env(); !path.empty()) {
    if (config.processes > 1) path += "." + std::to_string(config.process);
    auto opened = LogFile::open(std::move(path));
    if (!opened.ok()) return opened.status();
    log_file = std::move(*opened);
  }
  auto process = std::make_shared<ProcessShared>(config.workers, config.processes, config.process);
  // $WEIR_FLOW_WINDOW_BYTES overrides every execution's window: a stress run of the tests with
  // a window of 1 gates every channel after one batch (docs/cluster.md, "Flow control").
  uint64_t window = config.flow_window_bytes;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): weir never sets the environment.
  if (const char* text = std::getenv("WEIR_FLOW_WINDOW_BYTES"); text != nullptr) {
    if (!absl::SimpleAtoi(text, &window) || window > Config::kMaxFlowWindowBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("$WEIR_FLOW_WINDOW_BYTES must be a number of bytes from 0 (off) to ",
                       Config::kMaxFlowWindowBytes, ", got '", text, "'"));
    }
  }
  process->set_flow_window(static_cast<int64_t>(window));
  std::unique_ptr<Transport> transport;
  if (config.processes > 1) {
    Config effective = config;  // The transport tells its peers the window in use.
    effective.flow_window_bytes = window;
    auto made = config.transport(effective, *process);
    if (!made.ok()) return made.status();
    transport = std::move(*made);
    process->set_transport(transport.get());
  }
  std::optional<Watchdog> watchdog;
  if (const auto timeout = config.effective_operator_timeout(); timeout.count() > 0) {
    watchdog.emplace(process, timeout);
  }
  std::vector<std::thread> threads;
  threads.reserve(config.workers - 1);
  for (size_t i = 1; i < config.workers; ++i) {
    threads.emplace_back([&, i] {
      Worker worker(i, process);
      run_one(worker, per_worker, log_file);
    });
  }
  {
    Worker worker(0, process);
    run_one(worker, per_worker, log_file);
  }
  for (auto& thread : threads) thread.join();
  watchdog.reset();  // Before close: a watchdog that found a stuck worker closes the transport.
  if (transport) {
    absl::Status closed = transport->close();
    if (process->status().ok() && !closed.ok()) return closed;
  }
  if (log_file && process->status().ok()) {
    // Every worker's sink is gone (flushed) with its worker.
    if (absl::Status written = log_file->status(); !written.ok()) return written;
  }
  return process->status();
}

}  // namespace weir::internal
