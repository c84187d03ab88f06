// placement(): which process of a replica of N runs an object.

#include "weir/control/placement.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include <gtest/gtest.h>

namespace weir::control {
namespace {

TEST(PlacementTest, OneProcessRunsEverything) {
  for (int i = 0; i < 100; ++i) EXPECT_EQ(placement(absl::StrCat("o", i), 1), 0u);
}

TEST(PlacementTest, EachObjectHasOneProcessInRangeTheSameEveryTime) {
  for (size_t n : {2u, 3u, 7u}) {
    std::set<size_t> used;
    for (int i = 0; i < 200; ++i) {
      const std::string id = absl::StrCat("o", i, "-5c1d");
      const size_t p = placement(id, n);
      EXPECT_LT(p, n);
      EXPECT_EQ(placement(id, n), p) << "deterministic";
      used.insert(p);
    }
    EXPECT_EQ(used.size(), n) << "200 objects spread over every one of " << n << " processes";
  }
}

// The function is part of the stored contract (every process of a cluster, of any build, must
// agree): FNV-1a 64 of the id, mod N. These values pin it.
TEST(PlacementTest, IsFnv1aOfTheObjectIdModN) {
  EXPECT_EQ(placement("", 1000), 14695981039346656037ull % 1000);
  EXPECT_EQ(placement("a", 1000), 0xaf63dc4c8601ec8cull % 1000);
  EXPECT_EQ(placement("foobar", 1000), 0x85944171f73967e8ull % 1000);
}

}  // namespace
}  // namespace weir::control
