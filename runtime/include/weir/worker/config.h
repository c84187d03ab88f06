// Config: how many workers to run, in the conventions of timely dataflow.
//
//   -w, --workers N      worker threads per process (default 1)
//   -n, --processes N    processes in the cluster (default 1)
//   -p, --process I      this process's index (default 0)
//   -h, --hostfile FILE  one host:port per line, one line per process
//
// `from_args` takes these flags out of argv and leaves the program's own arguments.
//
// Thread safety: a value type.

#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace weir {

struct Config {
  size_t workers = 1;
  size_t processes = 1;
  size_t process = 0;
  std::string hostfile;

  // Parses and removes the worker flags from `args`; the remaining arguments stay in order.
  static absl::StatusOr<Config> from_args(std::vector<std::string>& args);
  // The same for main's argc/argv: argv keeps the program name and the remaining arguments.
  static absl::StatusOr<Config> from_args(int& argc, char** argv);

  // Error unless this configuration can run (today: a single process).
  absl::Status validate() const;
};

}  // namespace weir
