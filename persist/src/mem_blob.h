// MemBlob: an in-memory Blob for tests (mem:// URLs).

#pragma once

#include <map>
#include <memory>
#include <string>

#include "weir/mutex.h"
#include "weir/persist/blob.h"

namespace weir::persist::internal {

class MemBlob final : public Blob {
 public:
  // The store named `name`, shared by every MemBlob of this process opened with the same name;
  // an empty name gives a fresh private store.
  static std::unique_ptr<MemBlob> open_named(const std::string& name);

  absl::StatusOr<std::optional<std::string>> get(std::string_view key) override;
  absl::Status set(std::string_view key, std::string_view value) override;
  absl::Status remove(std::string_view key) override;
  absl::StatusOr<std::vector<BlobMetadata>> list_keys(std::string_view prefix) override;

 private:
  struct Store {
    weir::Mutex mu;
    std::map<std::string, std::string, std::less<>> values ABSL_GUARDED_BY(mu);
  };

  explicit MemBlob(std::shared_ptr<Store> store) : store_(std::move(store)) {}

  std::shared_ptr<Store> store_;  // Shared with other MemBlobs of the same name.
};

}  // namespace weir::persist::internal
