#include "weir/persist/blob.h"

#include <algorithm>

#include "file_blob.h"
#include "mem_blob.h"
#include "str_cat.h"
#include "url.h"

#include "weir/status.h"

namespace weir::persist {

absl::Status validate_blob_key(std::string_view key) {
  const auto invalid = [&] {
    return absl::InvalidArgumentError(internal::str_cat("invalid blob key \"", key, "\""));
  };
  if (key.empty()) {
    return invalid();
  }
  for (size_t start = 0; start <= key.size();) {
    const size_t end = std::min(key.find('/', start), key.size());
    const std::string_view part = key.substr(start, end - start);
    start = end + 1;
    if (part.empty() || part == "." || part == "..") {
      return invalid();
    }
    for (char c : part) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
      if (!ok) {
        return invalid();
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Blob>> Blob::open(std::string_view url) {
  const std::optional<internal::Url> parsed = internal::split_url(url);
  if (parsed && parsed->scheme == "file") {
    if (parsed->rest.empty()) {
      return absl::InvalidArgumentError(
          internal::str_cat("blob URL \"", url, "\" names no directory"));
    }
    WEIR_ASSIGN_OR_RETURN(std::unique_ptr<internal::FileBlob> blob,
                          internal::FileBlob::open(std::string(parsed->rest)));
    return std::unique_ptr<Blob>(std::move(blob));
  }
  if (parsed && parsed->scheme == "mem") {
    return std::unique_ptr<Blob>(internal::MemBlob::open_named(std::string(parsed->rest)));
  }
  return absl::InvalidArgumentError(internal::str_cat("unsupported blob URL \"", url,
                                                      "\": expected file:///DIR or mem://[NAME]"));
}

}  // namespace weir::persist
