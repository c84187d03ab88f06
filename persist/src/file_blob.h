// FileBlob: a Blob in a filesystem directory (file:// URLs).
//
// Key "a/b/c" is the file DIR/a/b/c. set writes "<key>.tmp-<random>", fsyncs it, renames it
// into place and fsyncs the directory, so a key is either absent or whole. A temporary left by
// a crash is listed like a key, so that GC removes it. remove also removes directories it
// leaves empty.

#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_set.h"

#include "weir/mutex.h"
#include "weir/persist/blob.h"

namespace weir::persist::internal {

// The directories of a file blob known to be durable (created, and their parent fsynced).
class DurableDirs {
 public:
  bool contains(const std::string& dir) const {
    weir::MutexLock lock(mu_);
    return dirs_.contains(dir);
  }
  void insert(const std::string& dir) {
    weir::MutexLock lock(mu_);
    dirs_.insert(dir);
  }
  void erase(const std::string& dir) {
    weir::MutexLock lock(mu_);
    dirs_.erase(dir);
  }
  // Directory fsyncs so far (for tests).
  void count_fsync() { fsyncs_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t fsyncs() const { return fsyncs_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> fsyncs_{0};
  mutable weir::Mutex mu_;
  absl::flat_hash_set<std::string> dirs_ ABSL_GUARDED_BY(mu_);
};

class FileBlob final : public Blob {
 public:
  // Creates `root` (and its parents) if absent.
  static absl::StatusOr<std::unique_ptr<FileBlob>> open(std::string root);

  absl::StatusOr<std::optional<std::string>> get(std::string_view key) override;
  absl::Status set(std::string_view key, std::string_view value) override;
  absl::Status remove(std::string_view key) override;
  absl::StatusOr<std::vector<BlobMetadata>> list_keys(std::string_view prefix) override;

  // How many times this blob fsynced a directory (for tests).
  uint64_t directory_fsyncs() const { return durable_.fsyncs(); }

 private:
  explicit FileBlob(std::string root) : root_(std::move(root)) {}

  std::string path(std::string_view key) const { return root_ + "/" + std::string(key); }

  const std::string root_;  // Absolute or relative directory, without a trailing '/'.
  DurableDirs durable_;
};

}  // namespace weir::persist::internal
