// Placement: which process of a replica of N processes runs a catalog object.
//
// Every process follows the catalog itself and runs the objects placed on it: process
// `placement(object_id, N)`. A pure function of the object's id (FNV-1a, 64 bits, of its bytes,
// mod N), the same on every host and in every build, so at any catalog version each object runs
// on exactly one process of the cluster, and the processes need not agree on anything but N.
// The id is fresh per create (a name created again may land elsewhere); a replace keeps it (the
// object stays where it ran). When N changes (a restart with another -n), objects move: the new
// cluster is a new execution, which fences every process of the old one (docs/control.md).
//
// Thread safety: a pure function.

#pragma once

#include <cstddef>
#include <string_view>

namespace weir::control {

// The process (0 .. processes-1) that runs the object `object_id`. REQUIRES: processes >= 1.
size_t placement(std::string_view object_id, size_t processes);

}  // namespace weir::control
