// LogFile: the file WEIR_LOG names, shared by the workers of a process.
//
// Each worker's sink buffers whole JSON lines and hands them over in one write(2) under a lock
// (when its buffer passes kLogFlushBytes, and when the sink is destroyed with its worker), so
// lines of different workers never interleave. Lines of one worker keep their order; lines of
// different workers are ordered by their "time_ns", not by their place in the file.
//
// Thread safety: thread-safe.

#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "weir/mutex.h"
#include "weir/worker/logging.h"

namespace weir::internal {

inline constexpr size_t kLogFlushBytes = size_t{64} << 10;

class LogFile : public std::enable_shared_from_this<LogFile> {
 public:
  // Creates or truncates `path`. The error names the file and says why.
  static absl::StatusOr<std::shared_ptr<LogFile>> open(std::string path);
  LogFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;
  ~LogFile();

  // A sink that writes events as JSON lines to this file (it shares ownership of the file).
  LogSink sink();
  // Appends whole lines.
  void write(std::string_view lines);
  // OK, or the first write error, naming the file.
  absl::Status status() const;

 private:
  std::string path_;
  int fd_;
  mutable weir::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

// WEIR_LOG's value, or empty when it is not set.
std::string log_path_from_env();

}  // namespace weir::internal
