// Blob: a durable key-value store of immutable byte strings, where persist keeps batch parts.
//
// Keys are written once: persist never writes a key twice with different contents, so `set` may
// be retried freely. A `set` that returns OK is durable; a `set` interrupted by a crash leaves
// either nothing or the whole value under the key (plus, for some stores, a temporary key that
// list_keys reports and remove deletes; see FileBlob below).
//
// Keys are '/'-separated components of [A-Za-z0-9._-], none empty, "." or "..".
//
// Thread safety: implementations are thread-safe.

#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace weir::persist {

struct BlobMetadata {
  std::string key;
  uint64_t size_bytes = 0;
};

class Blob {
 public:
  // Opens a store by URL:
  //   file:///abs/dir   a directory (created if absent); each key is a file written to a
  //                     temporary name, fsynced and renamed into place. A temporary left by a
  //                     crash is listed as "<key>.tmp-<random>" so that GC can remove it.
  //   mem://            a fresh in-memory store, for tests.
  //   mem://NAME        the in-memory store NAME, shared by everything in this process that
  //                     opens the same URL.
  static absl::StatusOr<std::unique_ptr<Blob>> open(std::string_view url);

  virtual ~Blob() = default;

  // The value under `key`, or nullopt if there is none.
  virtual absl::StatusOr<std::optional<std::string>> get(std::string_view key) = 0;

  // Stores `value` under `key` atomically and durably.
  virtual absl::Status set(std::string_view key, std::string_view value) = 0;

  // Removes `key`. Removing an absent key is OK.
  virtual absl::Status remove(std::string_view key) = 0;

  // Every key starting with `prefix`, in unspecified order.
  virtual absl::StatusOr<std::vector<BlobMetadata>> list_keys(std::string_view prefix) = 0;
};

// Returns InvalidArgument unless `key` is a valid blob key (see above).
absl::Status validate_blob_key(std::string_view key);

}  // namespace weir::persist
