// Shared helpers of the benchmark programs: worker flags, positional arguments, timing, and the
// one result line bench/run parses:  RESULT <name> <figure> <unit>
//
// The programs run as one process (-w W) or as a cluster (-n N, through weir-launch): they use
// weir::cluster::execute, time only the dataflow (RunTimer: not process start-up or connecting),
// and print from process 0 only (reports()).

#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "weir/worker/config.h"
#include "weir/worker/worker.h"

namespace weir::bench {

struct Args {
  Config config;
  std::vector<unsigned long long> numbers;
};

// Parses the worker flags and `count` numeric arguments; prints usage and exits on error.
inline Args parse(int argc, char** argv, size_t count, const char* usage) {
  auto config = Config::from_args(argc, argv);
  if (!config.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], std::string(config.status().message()).c_str());
    std::exit(2);
  }
  if (static_cast<size_t>(argc) != count + 1) {
    std::fprintf(stderr, "usage: %s\n", usage);
    std::exit(2);
  }
  Args args{*config, {}};
  for (size_t i = 1; i <= count; ++i) {
    char* end = nullptr;
    args.numbers.push_back(std::strtoull(argv[i], &end, 10));
    if (end == argv[i] || *end != '\0') {
      std::fprintf(stderr, "%s: '%s' is not a number\nusage: %s\n", argv[0], argv[i], usage);
      std::exit(2);
    }
  }
  return args;
}

class Timer {
 public:
  Timer() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

// Times a run from when this process's first worker starts its computation (after a cluster
// has connected) until that worker finishes it. start/stop from worker code; seconds() after
// execute returns.
class RunTimer {
 public:
  void start(Worker& worker) {
    if (worker.allocator().local_index() == 0) start_ = std::chrono::steady_clock::now();
  }
  void stop(Worker& worker) {
    if (worker.allocator().local_index() == 0) stop_ = std::chrono::steady_clock::now();
  }
  double seconds() const { return std::chrono::duration<double>(stop_ - start_).count(); }

 private:
  std::chrono::steady_clock::time_point start_, stop_;
};

// True in the process that prints the results: the only one, or process 0 of a cluster.
inline bool reports(const Config& config) { return config.process == 0; }

inline void result(const char* name, double figure, const char* unit) {
  std::printf("RESULT %s %.6g %s\n", name, figure, unit);
  std::fflush(stdout);
}

}  // namespace weir::bench
