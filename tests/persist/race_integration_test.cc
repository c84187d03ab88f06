// Two writer processes race appends on one shard: exactly one wins each upper, and the loser
// gets UpperMismatch with the winner's upper.

#include "gtest/gtest.h"
#include "persist_test_util.h"
#include "subprocess.h"
#include "test_stores.h"

#include "weir/persist/client.h"

namespace weir::persist {
namespace {

class RaceIntegrationTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RaceIntegrationTest, TwoProcessesExactlyOneWinsEachUpper) {
  const PersistLocation location = testing::fresh_location(GetParam());
  ASSERT_FALSE(location.consensus_url.empty());
  constexpr uint64_t kRounds = 60;
  std::vector<std::unique_ptr<testing::Child>> children;
  for (const char* id : {"0", "1"}) {
    children.push_back(std::make_unique<testing::Child>(std::vector<std::string>{
        WEIR_PERSIST_TEST_CHILD, "race", location.blob_url, location.consensus_url, "race", id}));
  }
  std::vector<int> winners;
  for (uint64_t round = 0; round < kRounds; ++round) {
    // Both get the round at once and append [round, round + 1) expecting upper `round`.
    for (auto& child : children) {
      child->write_line("round " + std::to_string(round));
    }
    int won = 0;
    int winner = -1;
    for (int c = 0; c < 2; ++c) {
      const std::optional<std::string> line = children[c]->read_line();
      ASSERT_TRUE(line.has_value()) << "child " << c << " died";
      if (*line == "won " + std::to_string(round)) {
        ++won;
        winner = c;
      } else {
        EXPECT_EQ(*line, "lost " + std::to_string(round) + " [" + std::to_string(round + 1) + "]")
            << "the loser sees the winner's upper";
      }
    }
    ASSERT_EQ(won, 1) << "round " << round;
    winners.push_back(winner);
  }
  for (auto& child : children) {
    child->close_stdin();
    const int status = child->wait();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  // The shard holds exactly the winners' updates.
  std::unique_ptr<PersistClient> client = PersistClient::open(location).value();
  ReadHandle reader = client->open_reader("race").value();
  std::vector<Update> expected;
  for (uint64_t round = 0; round < kRounds; ++round) {
    expected.push_back(
        {"p" + std::to_string(winners[round]) + "-r" + std::to_string(round), round, 1});
  }
  EXPECT_EQ(testing::as_map(reader.snapshot(kRounds - 1).value()),
            testing::consolidate(expected, kRounds - 1));
  EXPECT_EQ(reader.fetch_recent_upper().value(), Frontier(kRounds));
}

INSTANTIATE_TEST_SUITE_P(Sqlite, RaceIntegrationTest, ::testing::Values("sqlite"));
INSTANTIATE_TEST_SUITE_P(Postgres, RaceIntegrationTest, ::testing::Values("postgres"));

}  // namespace
}  // namespace weir::persist
