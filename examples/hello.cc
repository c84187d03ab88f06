// hello: the smallest dataflow: an input, an exchange, an inspect and a probe.
//
//   hello [-w W]                 one process of W workers
//   weir-launch -n N -w W hello  a cluster of N processes (each prints its own workers' lines)
//
// Worker 0 sends the numbers 0..9, one per round; records are exchanged by value, so each is
// printed by worker `x % (N·W)`.

#include <cstdio>
#include <string>

#include "weir/protocol/cluster.h"
#include "weir/weir.h"

int main(int argc, char** argv) {
  absl::Status status = weir::cluster::execute_from_args(argc, argv, [](weir::Worker& worker) {
    const size_t index = worker.index();
    weir::ProbeHandle<uint64_t> probe;
    auto input = worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
      auto [handle, stream] = weir::new_input<uint64_t>(scope);
      stream | weir::exchange([](const uint64_t& x) { return x; }) |
          weir::inspect([index](const uint64_t& x) {
            std::printf("worker %zu:\thello %llu\n", index, static_cast<unsigned long long>(x));
          }) |
          weir::probe_with(probe);
      return std::move(handle);
    });
    for (uint64_t round = 0; round < 10; ++round) {
      if (index == 0) input.send(round);
      input.advance_to(round + 1);
      while (probe.less_than(input.time())) worker.step();
    }
  });
  if (!status.ok()) {
    std::fprintf(stderr, "hello: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
