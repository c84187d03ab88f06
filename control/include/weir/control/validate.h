// Validation of catalog changes: what commit() checks against the catalog it read before it
// appends, and again after losing a race.
//
// Today: names, and whether the name is live. Later commits add the checks of each kind of object
// here (source options parsed as `weir ingest` parses them, view inputs that exist, holds on
// shards that exist), so that a controller and a replica agree on what may be committed.
//
// Thread safety: pure functions.

#pragma once

#include <string_view>

#include "absl/status/status.h"

#include "weir/control/catalog.h"

namespace weir::control {

inline constexpr size_t kMaxNameLength = 128;

// InvalidArgument, naming `name`, unless it matches [a-z0-9][a-z0-9_.-]*, has at most
// kMaxNameLength characters and does not start with "weir." (reserved for weir's own shards).
absl::Status validate_name(std::string_view name);

// Whether `change` may be applied to `catalog`: a valid name and spec; a create's name not live
// (AlreadyExists, naming the version that created it); a drop's or replace's name live (NotFound);
// a replace that changes the spec (InvalidArgument otherwise).
absl::Status validate(const Change& change, const CatalogSnapshot& catalog);

}  // namespace weir::control
