// The catalog's rows: CatalogObject <-> catalog.proto bytes.

#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "weir/control/catalog.h"

namespace weir::control::internal {

inline constexpr uint32_t kCatalogFormatVersion = 1;

// `spec` as it is stored: a source's options sorted by key (equal keys keep their order).
ObjectSpec canonical(ObjectSpec spec);

// The row of `object` (its `encoded` is ignored), options sorted by key.
std::string encode(const CatalogObject& object);

// The object a row holds, with `encoded` set to `row`. DataLoss saying why (without the version,
// which the caller adds) if the row does not parse, has another format version, no name or no spec.
absl::StatusOr<CatalogObject> decode(std::string_view row);

}  // namespace weir::control::internal
