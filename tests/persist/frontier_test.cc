#include "weir/persist/frontier.h"

#include "gtest/gtest.h"

#include "weir/persist/ids.h"

namespace weir::persist {
namespace {

TEST(FrontierTest, TimesBeforeTheFrontierAreFinal) {
  const Frontier upper(10);
  EXPECT_TRUE(upper.less_equal(10));
  EXPECT_TRUE(upper.less_equal(11));
  EXPECT_FALSE(upper.less_equal(9));
  EXPECT_TRUE(upper.less_than(11));
  EXPECT_FALSE(upper.less_than(10));
  EXPECT_FALSE(Frontier::empty().less_equal(UINT64_MAX)) << "every time is final";
  EXPECT_TRUE(Frontier().less_equal(0));
}

TEST(FrontierTest, TheEmptyFrontierIsTheGreatest) {
  EXPECT_LT(Frontier(3), Frontier(4));
  EXPECT_LT(Frontier(UINT64_MAX), Frontier::empty());
  EXPECT_EQ(Frontier::empty(), Frontier::empty());
  EXPECT_NE(Frontier(0), Frontier::empty());
  EXPECT_EQ(Frontier(5).to_string(), "[5]");
  EXPECT_EQ(Frontier::empty().to_string(), "[]");
}

TEST(IdsTest, RandomIdsParseAndDiffer) {
  const ShardId a = ShardId::random();
  const ShardId b = ShardId::random();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.str().size(), 37u);
  EXPECT_EQ(a.str()[0], 's');
  EXPECT_EQ(ShardId::parse(a.str()).value(), a);
  EXPECT_FALSE(ShardId::parse("c" + a.str().substr(1)).ok()) << "wrong kind";
  EXPECT_FALSE(ShardId::parse("s-not-a-uuid").ok());
  EXPECT_TRUE(CriticalReaderId::parse(CriticalReaderId::random().str()).ok());
}

}  // namespace
}  // namespace weir::persist
