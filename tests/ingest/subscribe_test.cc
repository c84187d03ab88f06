// `weir subscribe` through the real binary, on a shard that `weir ingest` is writing: each change
// once, in time order, equal to the shard at every progress line; SIGINT ends it cleanly with its
// lease released.

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ingest_test_util.h"
#include "tool_process.h"
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "weir/persist/client.h"
#include "weir/sources/postgres/value.h"

namespace weir::ingest {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using testing::read_file;

// Starts `args` with stdout in `out` and stderr in `out`.err; returns its pid.
pid_t spawn(const std::vector<std::string>& args, const fs::path& out) {
  return testing::spawn_tool(args, out, out.string() + ".err");
}

struct Printed {
  std::vector<std::tuple<uint64_t, int64_t, std::string>> changes;  // In printed order.
  std::vector<uint64_t> progress;
};

// Parses complete lines (a last line without its newline is still being written).
Printed parse(const std::string& text) {
  Printed printed;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;
    const size_t tab = line.find('\t');
    const uint64_t time = std::stoull(line.substr(0, tab));
    const std::string rest = line.substr(tab + 1);
    if (rest == "progress") {
      printed.progress.push_back(time);
      continue;
    }
    const size_t tab2 = rest.find('\t');
    printed.changes.emplace_back(time, std::stoll(rest.substr(0, tab2)), rest.substr(tab2 + 1));
  }
  return printed;
}

TEST(SubscribeTest, ShowsEachChangeOnceInTimeOrderAndExitsCleanlyOnSigint) {
  const fs::path dir = testing::fresh_dir("subscribe");
  const std::string weir = WEIR_TOOL_PATH;
  const pid_t ingest = spawn(
      {weir, "ingest", "--source", "loadgen:auction", "--scale", "4", "--persist", dir.string(),
       "-w", "2", "--rate", "3000", "--quiet", "--compaction-window", "18446744073709551615"},
      dir / "ingest.out");
  auto client =
      persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string())).value();
  const std::string shard = "auction.bids";
  // Once the shard holds its snapshot, subscribe from time 0 while ingest goes on.
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  for (;;) {
    ASSERT_LT(Clock::now(), deadline) << read_file(dir / "ingest.out.err");
    auto d = client->describe(shard);
    if (d.ok() && d->upper.less_than(UINT64_MAX) && !d->upper.less_equal(0)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const pid_t subscribe = spawn({weir, "subscribe", "--persist", dir.string(), shard, "--as-of",
                                 "0", "--progress", "-w", "2"},
                                dir / "subscribe.out");
  // Until it has printed progress past 20 more offsets than the snapshot's.
  for (;;) {
    ASSERT_LT(Clock::now(), deadline) << read_file(dir / "subscribe.out.err");
    const Printed printed = parse(read_file(dir / "subscribe.out"));
    if (!printed.progress.empty() && printed.progress.back() > 20) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto readers = client->describe(shard)->leased_readers;
  EXPECT_TRUE(std::any_of(readers.begin(), readers.end(), [](const auto& r) {
    return r.purpose == "weir subscribe";
  })) << "subscribe reads through a leased reader";
  ASSERT_EQ(kill(subscribe, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(waitpid(subscribe, &status, 0), subscribe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << status << ": " << read_file(dir / "subscribe.out.err");
  readers = client->describe(shard)->leased_readers;
  EXPECT_FALSE(std::any_of(readers.begin(), readers.end(), [](const auto& r) {
    return r.purpose == "weir subscribe";
  })) << "its lease was released on SIGINT";
  kill(ingest, SIGINT);
  waitpid(ingest, &status, 0);

  const Printed printed = parse(read_file(dir / "subscribe.out"));
  ASSERT_FALSE(printed.progress.empty());
  // Times in order, each printed whole: its rows consolidated and sorted (so each row once).
  uint64_t last = 0;
  const std::string* previous = nullptr;
  for (const auto& [time, diff, row] : printed.changes) {
    ASSERT_GE(time, last) << row;
    if (time == last && previous != nullptr) {
      ASSERT_LT(*previous, row) << "at time " << time << ", not sorted or printed in pieces";
    }
    last = time;
    previous = &row;
    ASSERT_NE(diff, 0) << row;
  }
  // At every 5th progress line (and the last), what was printed before it is the shard there.
  for (size_t i = 0; i < printed.progress.size(); ++i) {
    if (i % 5 != 0 && i + 1 != printed.progress.size()) continue;
    const uint64_t upper = printed.progress[i];
    std::map<std::string, int64_t> sums;
    for (const auto& [time, diff, row] : printed.changes) {
      if (time >= upper) continue;
      int64_t& sum = sums[row];
      sum += diff;
      if (sum == 0) sums.erase(row);
    }
    EXPECT_EQ(sums, testing::shard_at(*client, shard, upper - 1)) << "at progress " << upper;
  }
  fs::remove_all(dir);
}

// ---- Adversarial review (issue 17): reproductions. ----

// Waits up to `limit` for `pid` to exit; SIGKILLs it after that. Returns its status, or -1 if it
// had to be killed.
int wait_or_kill(pid_t pid, std::chrono::seconds limit) {
  const auto until = Clock::now() + limit;
  int status = 0;
  while (Clock::now() < until) {
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

// A sealed shard (upper []) is readable at every time: subscribe's default as_of there is
// UINT64_MAX, and the contents must be printed.
TEST(SubscribeReviewTest, ASealedShardPrintsItsContents) {
  const fs::path dir = testing::fresh_dir("subscribe-sealed");
  {
    auto client =
        persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string())).value();
    auto writer = client->open_writer("plain").value();
    const std::vector<persist::Update> rows = {{"a", 1, 1}, {"b", 3, 1}};
    ASSERT_TRUE(writer.compare_and_append(rows, persist::Frontier(0), persist::Frontier::empty())
                    ->is_appended());
    (void)writer.expire();
    auto cat = client->inspect_snapshot("plain");
    ASSERT_TRUE(cat.ok()) << cat.status();
  }
  const pid_t pid =
      spawn({WEIR_TOOL_PATH, "subscribe", "--persist", dir.string(), "plain"}, dir / "out");
  const int status = wait_or_kill(pid, std::chrono::seconds(20));
  ASSERT_NE(status, -1) << "did not end";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(dir / "out.err");
  const Printed printed = parse(read_file(dir / "out"));
  EXPECT_EQ(printed.changes.size(), 2u) << "printed: \"" << read_file(dir / "out") << "\"";
  fs::remove_all(dir);
}

// Issue 18: an ad hoc reader killed without a chance to expire its hold (SIGKILL) held the
// shard's since and its consensus versions back for persist's default lease, 15 minutes. Its
// lease is --reader-lease (60 s by default): GC expires it once that passes without a heartbeat.
TEST(SubscribeReviewTest, AKilledSubscriberStopsHoldingOnceItsLeaseRunsOut) {
  const fs::path dir = testing::fresh_dir("subscribe-lease");
  auto client =
      persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string())).value();
  auto writer = client->open_writer("open").value();
  ASSERT_TRUE(writer
                  .compare_and_append(std::vector<persist::Update>{{"a", 0, 1}},
                                      persist::Frontier(0), persist::Frontier(1))
                  ->is_appended());
  const pid_t pid =
      spawn({WEIR_TOOL_PATH, "subscribe", "--persist", dir.string(), "open", "--reader-lease", "2"},
            dir / "out");
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (parse(read_file(dir / "out")).changes.empty() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(parse(read_file(dir / "out")).changes.size(), 1u) << read_file(dir / "out.err");
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  ASSERT_TRUE(WIFSIGNALED(wait_or_kill(pid, std::chrono::seconds(5))));
  auto held = client->describe("open").value();
  ASSERT_EQ(held.leased_readers.size(), 1u);
  EXPECT_EQ(held.leased_readers[0].lease, absl::Seconds(2));
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  const persist::GcResult gc = client->gc("open").value();
  EXPECT_EQ(gc.expired_readers, 1u);
  EXPECT_TRUE(client->describe("open").value().leased_readers.empty());
  (void)writer.expire();
  fs::remove_all(dir);
}

// A typed row that does not decode fails subscribe (DataLoss) with any number of workers.
TEST(SubscribeReviewTest, AnUndecodableTypedRowEndsSubscribeWithTwoWorkers) {
  const fs::path dir = testing::fresh_dir("subscribe-undecodable");
  {
    auto client =
        persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string())).value();
    sources::postgres::RelationDesc desc;
    desc.schema = "public";
    desc.table = "t";
    desc.columns = {{"id", 23, -1, true, sources::postgres::builtin_column_type(23), "integer"}};
    auto schemas = client->open_writer("pg.schemas").value();
    const std::vector<persist::Update> schema_rows = {{"t\t" + desc.encode(), 0, 1}};
    ASSERT_TRUE(schemas.compare_and_append(schema_rows, persist::Frontier(0), persist::Frontier(1))
                    ->is_appended());
    (void)schemas.expire();
    auto writer = client->open_writer("pg.t").value();
    const std::vector<persist::Update> rows = {{std::string("\x00\xff", 2), 0, 1}};
    ASSERT_TRUE(
        writer.compare_and_append(rows, persist::Frontier(0), persist::Frontier(1))->is_appended());
    (void)writer.expire();
  }
  for (const std::string workers : {"1", "2"}) {
    const pid_t pid = spawn({WEIR_TOOL_PATH, "subscribe", "--persist", dir.string(), "pg.t",
                             "--as-of", "0", "-w", workers},
                            dir / "out");
    const int status = wait_or_kill(pid, std::chrono::seconds(20));
    EXPECT_NE(status, -1) << "-w " << workers << ": still running after 20 s, "
                          << read_file(dir / "out.err");
    if (status != -1) {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1)
          << "-w " << workers << ": " << status;
    }
    std::cerr << "-w " << workers << " stderr: " << read_file(dir / "out.err");
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace weir::ingest
