#include "weir/worker/introspection.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <utility>

#include "weir/mutex.h"

namespace weir {
namespace {

// Requests, counted. Relaxed on the workers' side: a request is a hint that reaches each worker
// at some later step; the answers are published under the mutex.
std::atomic<uint64_t> graph_request_count{0};

struct Answers {
  weir::Mutex mu;
  weir::CondVar arrived;
  std::map<size_t, WorkerGraph> latest ABSL_GUARDED_BY(mu);  // By worker.
};

Answers& answers() {
  static Answers* a = new Answers;  // Never destroyed: workers may answer during exit.
  return *a;
}

}  // namespace

uint64_t request_graphs() { return graph_request_count.fetch_add(1) + 1; }

std::vector<WorkerGraph> collect_graphs(uint64_t request, size_t workers,
                                        std::chrono::milliseconds timeout) {
  Answers& a = answers();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<WorkerGraph> result;
  weir::MutexLock lock(a.mu);
  for (;;) {
    size_t answered = 0;
    for (const auto& [worker, graph] : a.latest) answered += graph.request >= request ? 1 : 0;
    if (answered >= workers || !a.arrived.wait_until(a.mu, deadline)) break;
  }
  for (const auto& [worker, graph] : a.latest) {
    if (graph.request >= request) result.push_back(graph);
  }
  return result;
}

namespace internal {

uint64_t graph_requests() { return graph_request_count.load(std::memory_order_relaxed); }

void publish_graph(WorkerGraph graph) {
  Answers& a = answers();
  {
    weir::MutexLock lock(a.mu);
    a.latest[graph.worker] = std::move(graph);
  }
  a.arrived.notify_all();
}

}  // namespace internal
}  // namespace weir
