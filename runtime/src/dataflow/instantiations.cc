// The explicit instantiations that scope.h and reachability.h declare `extern`: the progress
// tracker and the scope for the common timestamps are compiled here once, not in every file that
// builds a dataflow.

#include <cstdint>

#include "weir/dataflow/scope.h"
#include "weir/progress/reachability.h"
#include "weir/progress/timestamp.h"

namespace weir {

template class ReachabilityBuilder<uint64_t>;
template class Tracker<uint64_t>;
template class ReachabilityBuilder<Product<uint64_t, uint64_t>>;
template class Tracker<Product<uint64_t, uint64_t>>;

template class Scope<uint64_t>;
template class Scope<Product<uint64_t, uint64_t>>;

}  // namespace weir
