// `weir persist`: ls, describe and cat through the real binary.

#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "test_stores.h"

#include "weir/persist/client.h"

namespace weir::persist {
namespace {

struct ToolRun {
  int exit_code = -1;
  std::string out;  // stdout and stderr.
};

ToolRun run_tool(const std::string& args) {
  ToolRun run;
  FILE* pipe = popen((std::string(WEIR_TOOL) + " " + args + " 2>&1").c_str(), "r");
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    run.out.append(buffer, n);
  }
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

class ToolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::temp_dir();
    client_ = PersistClient::open(PersistLocation::in_directory(dir_)).value();
    WriteHandle orders = client_->open_writer("orders").value();
    std::vector<Update> first = {
        {"apple", 0, 2}, {"pear", 1, 1}, {std::string("b\0\n\t\\", 5), 1, 1}};
    ASSERT_TRUE(orders.compare_and_append(first, Frontier(0), Frontier(2)).value().is_appended());
    std::vector<Update> second = {{"apple", 2, -2}, {"plum", 3, 1}};
    ASSERT_TRUE(orders.compare_and_append(second, Frontier(2), Frontier(4)).value().is_appended());
    ASSERT_TRUE(client_->open_reader("customers", "a dashboard").ok());
  }

  std::string dir_;
  std::unique_ptr<PersistClient> client_;
};

TEST_F(ToolTest, ListsShardNames) {
  const ToolRun run = run_tool("persist --persist " + dir_ + " ls");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(run.out, "customers\norders\n");
}

TEST_F(ToolTest, CatPrintsConsolidatedRows) {
  ToolRun run = run_tool("persist --persist " + dir_ + " cat orders");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(run.out, "b\\x00\\n\\t\\\\\t3\t1\npear\t3\t1\nplum\t3\t1\n");
  run = run_tool("persist --blob file://" + dir_ + "/blob --consensus sqlite://" + dir_ +
                 "/consensus.db cat orders --as-of 1");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(run.out, "apple\t1\t2\nb\\x00\\n\\t\\\\\t1\t1\npear\t1\t1\n");
  // cat reads through a leased reader (a hold against compaction and GC) and leaves none behind
  // (that it holds one while it reads is not visible from here).
  EXPECT_TRUE(client_->describe("orders")->leased_readers.empty());
}

TEST_F(ToolTest, DescribePrintsUpperSinceBatchesAndHandles) {
  const ToolRun run = run_tool("persist --persist " + dir_ + " describe orders");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  for (const char* expected :
       {"shard           orders\n", "upper           [4]\n", "since           [0]\n",
        "batches         2 (5 updates", "  [0, 2)  since [0]  parts 1  runs 1  updates 3",
        "writers         1\n", "leased readers  0\n", "critical readers 0\n"}) {
    EXPECT_NE(run.out.find(expected), std::string::npos) << expected << " in\n" << run.out;
  }
  const ToolRun customers = run_tool("persist --persist " + dir_ + " describe customers");
  EXPECT_NE(customers.out.find("leased readers  1\n"), std::string::npos) << customers.out;
  EXPECT_NE(customers.out.find("\"a dashboard\""), std::string::npos) << customers.out;
}

// Issue 15: describe shows how old each hold is (a stuck holder is seen at a glance) and the
// source identity recorded next to the shards (PREFIX.source, as `weir ingest` writes it).
TEST_F(ToolTest, DescribeShowsHoldAgesAndTheSourceIdentity) {
  WriteHandle source = client_->open_writer("shop.source").value();
  ASSERT_TRUE(source
                  .compare_and_append(std::vector<Update>{{"kind=shop", 0, 1}, {"seed=7", 0, 1}},
                                      Frontier(0), Frontier(1))
                  ->is_appended());
  ASSERT_TRUE(client_->open_writer("shop.orders").ok());
  SinceHandle hold =
      client_->open_critical_since("shop.orders", CriticalReaderId::random(), "a sink").value();
  ASSERT_FALSE(hold.compare_and_downgrade_since(0, 3, Frontier(0))->mismatch);
  const ToolRun run = run_tool("persist --persist " + dir_ + " describe shop.orders");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("source          kind=shop seed=7  (from shop.source)\n"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("\"a sink\"  since [0]  epoch 3  moved 20"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find(" ago)"), std::string::npos) << run.out;
  const ToolRun orders = run_tool("persist --persist " + dir_ + " describe orders");
  EXPECT_EQ(orders.out.find("source "), std::string::npos) << "no orders.source: " << orders.out;
  EXPECT_NE(orders.out.find("heartbeat 20"), std::string::npos) << orders.out;
  EXPECT_NE(orders.out.find(" ago)  lease"), std::string::npos) << orders.out;
}

TEST_F(ToolTest, ErrorsAreReportedWithAnExitCode) {
  ToolRun run = run_tool("persist --persist " + dir_ + " cat nosuchshard");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("no shard named \"nosuchshard\""), std::string::npos) << run.out;
  run = run_tool("persist --persist " + dir_ + " cat orders --as-of 4");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("not final"), std::string::npos) << run.out;
  run = run_tool("persist ls");
  EXPECT_NE(run.exit_code, 0);
  run = run_tool("persist --persist " + dir_ + " --blob mem:// --consensus mem:// ls");
  EXPECT_NE(run.exit_code, 0) << "--persist excludes --blob";
}

}  // namespace
}  // namespace weir::persist
