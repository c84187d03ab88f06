// weir::collections: collections of (data, time, diff) updates and the operators that keep their
// results right under retractions, in one include. See collection.h and docs/guide.md
// ("Collections").

#pragma once

#include "weir/collections/collection.h"
#include "weir/collections/consolidate.h"
#include "weir/collections/join.h"
#include "weir/collections/linear.h"
#include "weir/collections/reduce.h"
#include "weir/collections/stable_hash.h"
