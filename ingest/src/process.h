// This process as the owners of its fences name it (weir/persist/fence.h).

#pragma once

#include <string>

namespace weir::ingest::internal {

// "host:pid".
std::string process_name();

}  // namespace weir::ingest::internal
