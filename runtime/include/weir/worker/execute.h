// execute: runs a computation on Config.workers threads and waits until every dataflow completes.
//
//   int main(int argc, char** argv) {
//     auto config = weir::Config::from_args(argc, argv);
//     if (!config.ok()) { std::cerr << config.status() << "\n"; return 2; }
//     absl::Status status = weir::execute(*config, [](weir::Worker& worker) { ... });
//     return status.ok() ? 0 : 1;
//   }
//
// `fn(worker)` runs once on every worker (worker 0 on the calling thread); afterwards each
// worker keeps stepping until its dataflows complete. An exception thrown by `fn`, by an
// operator, or a dataflow that fails to build, fails the execution: every worker stops and the
// returned Status names the operator (or worker). If `fn` returns a value, `execute` returns one
// per worker of this process, in worker order.
//
// Thread safety: call from any thread; blocks until the workers finish.

#pragma once

#include <functional>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "weir/worker/config.h"
#include "weir/worker/worker.h"

namespace weir {

namespace internal {
// Runs `per_worker` on every worker, then steps each until it has no dataflows.
absl::Status run_workers(const Config& config, const std::function<void(Worker&)>& per_worker);
}  // namespace internal

template <class F>
auto execute(const Config& config, F&& fn) {
  using Result = std::invoke_result_t<F&, Worker&>;
  if constexpr (std::is_void_v<Result>) {
    return internal::run_workers(config, [&](Worker& worker) { fn(worker); });
  } else {
    std::vector<std::optional<Result>> results(config.workers);
    absl::Status status = internal::run_workers(config, [&](Worker& worker) {
      results[worker.allocator().local_index()].emplace(fn(worker));
    });
    absl::StatusOr<std::vector<Result>> out;
    if (!status.ok()) {
      out = status;
    } else {
      std::vector<Result> values;
      values.reserve(results.size());
      for (auto& r : results) values.push_back(std::move(*r));
      out = std::move(values);
    }
    return out;
  }
}

// Parses the worker flags from argv, then executes. Errors in the flags come back as the Status.
template <class F>
auto execute_from_args(int& argc, char** argv, F&& fn) {
  auto config = Config::from_args(argc, argv);
  using Returned = decltype(execute(Config{}, std::forward<F>(fn)));
  if (!config.ok()) return Returned(config.status());
  return execute(*config, std::forward<F>(fn));
}

}  // namespace weir
