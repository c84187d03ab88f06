#include "weir/persist/consensus.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"
#include "test_stores.h"

namespace weir::persist {
namespace {

// The behaviour every Consensus shares. The "postgres" instantiation runs against the PostgreSQL
// of the CTest fixture.
class ConsensusTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string url;
    if (GetParam() == "mem") {
      url = testing::fresh_location("mem").consensus_url;
    } else if (GetParam() == "sqlite") {
      url = "sqlite://" + testing::temp_dir() + "/consensus.db";
    } else {
      url = testing::fresh_postgres_consensus_url();
      ASSERT_FALSE(url.empty());
    }
    url_ = url;
    absl::StatusOr<std::unique_ptr<Consensus>> consensus = Consensus::open(url);
    ASSERT_TRUE(consensus.ok()) << consensus.status();
    consensus_ = *std::move(consensus);
  }

  std::string url_;
  std::unique_ptr<Consensus> consensus_;
};

TEST_P(ConsensusTest, CompareAndSetFollowsTheHead) {
  EXPECT_EQ(consensus_->head("k").value(), std::nullopt);
  EXPECT_EQ(consensus_->compare_and_set("k", std::nullopt, {1, "one"}).value(),
            CasResult::kCommitted);
  EXPECT_EQ(consensus_->compare_and_set("k", std::nullopt, {1, "again"}).value(),
            CasResult::kExpectationMismatch);
  EXPECT_EQ(consensus_->compare_and_set("k", 1, {2, std::string("t\0o", 3)}).value(),
            CasResult::kCommitted);
  EXPECT_EQ(consensus_->compare_and_set("k", 1, {2, "stale"}).value(),
            CasResult::kExpectationMismatch);
  const std::optional<VersionedData> head = consensus_->head("k").value();
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->seqno, 2u);
  EXPECT_EQ(head->data, std::string("t\0o", 3));
  EXPECT_EQ(consensus_->head("other").value(), std::nullopt) << "keys are independent";
}

TEST_P(ConsensusTest, RejectsASeqnoThatDoesNotFollow) {
  EXPECT_EQ(consensus_->compare_and_set("k", std::nullopt, {5, "x"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_EQ(consensus_->compare_and_set("k", std::nullopt, {1, "x"}).value(),
            CasResult::kCommitted);
  EXPECT_EQ(consensus_->compare_and_set("k", 1, {3, "x"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(ConsensusTest, ScanAndTruncate) {
  for (uint64_t seqno = 1; seqno <= 5; ++seqno) {
    ASSERT_EQ(consensus_
                  ->compare_and_set("k", seqno == 1 ? std::nullopt : std::optional(seqno - 1),
                                    {seqno, "v" + std::to_string(seqno)})
                  .value(),
              CasResult::kCommitted);
  }
  std::vector<VersionedData> versions = consensus_->scan("k", 2, 2).value();
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_EQ(versions[0].seqno, 2u);
  EXPECT_EQ(versions[1].data, "v3");
  EXPECT_EQ(consensus_->truncate("k", 4).value(), 3u);
  versions = consensus_->scan("k", 0, 100).value();
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_EQ(versions[0].seqno, 4u);
  EXPECT_EQ(consensus_->truncate("k", 4).value(), 0u);
  EXPECT_EQ(consensus_->truncate("k", 6).status().code(), absl::StatusCode::kFailedPrecondition)
      << "the head is never truncated";
  EXPECT_EQ(consensus_->head("k").value()->seqno, 5u);
}

TEST_P(ConsensusTest, ExactlyOneOfManyRacersWinsEachSeqno) {
  constexpr int kThreads = 4;
  constexpr uint64_t kVersions = 40;
  std::atomic<int> wins[kVersions + 1] = {};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each thread has its own connection, as separate processes would.
      std::unique_ptr<Consensus> consensus = Consensus::open(url_).value();
      while (true) {
        const std::optional<VersionedData> head = consensus->head("race").value();
        const uint64_t seqno = head ? head->seqno : 0;
        if (seqno >= kVersions) {
          return;
        }
        const absl::StatusOr<CasResult> result =
            consensus->compare_and_set("race", head ? std::optional(seqno) : std::nullopt,
                                       {seqno + 1, "thread " + std::to_string(t)});
        ASSERT_TRUE(result.ok()) << result.status();
        if (*result == CasResult::kCommitted) {
          ++wins[seqno + 1];
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  for (uint64_t seqno = 1; seqno <= kVersions; ++seqno) {
    EXPECT_EQ(wins[seqno].load(), 1) << "seqno " << seqno;
  }
  EXPECT_EQ(consensus_->scan("race", 0, 1000).value().size(), kVersions);
}

INSTANTIATE_TEST_SUITE_P(Stores, ConsensusTest, ::testing::Values("mem", "sqlite"));
INSTANTIATE_TEST_SUITE_P(Postgres, ConsensusTest, ::testing::Values("postgres"));

TEST(ConsensusOpenTest, RejectsUnknownUrls) {
  EXPECT_EQ(Consensus::open("etcd://x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Consensus::open("sqlite://").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ConsensusOpenTest, UnreachableServerIsUnavailable) {
  // Port 1 on loopback: nothing listens there.
  const absl::StatusOr<std::unique_ptr<Consensus>> consensus =
      Consensus::open("postgres://nobody:secret@127.0.0.1:1/db?connect_timeout=2");
  ASSERT_FALSE(consensus.ok());
  EXPECT_EQ(consensus.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(std::string(consensus.status().message()).find("secret"), std::string::npos)
      << "errors do not show passwords: " << consensus.status();
}

}  // namespace
}  // namespace weir::persist
