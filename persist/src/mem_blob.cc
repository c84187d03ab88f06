#include "mem_blob.h"

#include "absl/container/flat_hash_map.h"

#include "weir/mutex.h"
#include "weir/status.h"

namespace weir::persist::internal {

std::unique_ptr<MemBlob> MemBlob::open_named(const std::string& name) {
  if (name.empty()) {
    return std::unique_ptr<MemBlob>(new MemBlob(std::make_shared<Store>()));
  }
  static weir::Mutex registry_mu;
  static auto* registry = new absl::flat_hash_map<std::string, std::shared_ptr<Store>>();
  weir::MutexLock lock(registry_mu);
  std::shared_ptr<Store>& store = (*registry)[name];
  if (store == nullptr) {
    store = std::make_shared<Store>();
  }
  return std::unique_ptr<MemBlob>(new MemBlob(store));
}

absl::StatusOr<std::optional<std::string>> MemBlob::get(std::string_view key) {
  weir::MutexLock lock(store_->mu);
  auto it = store_->values.find(key);
  if (it == store_->values.end()) {
    return std::nullopt;
  }
  return it->second;
}

absl::Status MemBlob::set(std::string_view key, std::string_view value) {
  WEIR_RETURN_IF_ERROR(validate_blob_key(key));
  weir::MutexLock lock(store_->mu);
  store_->values.insert_or_assign(std::string(key), std::string(value));
  return absl::OkStatus();
}

absl::Status MemBlob::remove(std::string_view key) {
  weir::MutexLock lock(store_->mu);
  auto it = store_->values.find(key);
  if (it != store_->values.end()) {
    store_->values.erase(it);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<BlobMetadata>> MemBlob::list_keys(std::string_view prefix) {
  weir::MutexLock lock(store_->mu);
  std::vector<BlobMetadata> keys;
  for (auto it = store_->values.lower_bound(prefix);
       it != store_->values.end() && it->first.starts_with(prefix); ++it) {
    keys.push_back({it->first, it->second.size()});
  }
  return keys;
}

}  // namespace weir::persist::internal
