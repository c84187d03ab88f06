#include "weir/control/placement.h"

#include <cstdint>

#include "weir/check.h"

namespace weir::control {

size_t placement(std::string_view object_id, size_t processes) {
  WEIR_CHECK(processes >= 1) << "placement over no process";
  // FNV-1a: fixed here, never std::hash (which may differ between builds and hosts).
  uint64_t hash = 14695981039346656037ull;
  for (const char c : object_id) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return static_cast<size_t>(hash % processes);
}

}  // namespace weir::control
