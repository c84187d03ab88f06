// Views over shards that ingest writes. Through the real binaries (`weir view`, `weir ingest`):
// both views equal a recomputation from their input shards at every time, and ten SIGKILLs while
// ingest writes the inputs leave the same output as an uninterrupted run. Through the library
// (run_view, run_ingest on in-memory stores): a stopped run resumes exactly, and a second run of
// the same view fences the first out.

#include "weir/ingest/view.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "ingest_test_util.h"
#include "tool_process.h"
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "weir/ingest/ingest.h"
#include "weir/persist/client.h"
#include "weir/persist/fence.h"

namespace weir::ingest {
namespace {

namespace fs = std::filesystem;
using Contents = std::map<std::string, int64_t>;

using testing::read_file;
using testing::run_tool;
using testing::spawn_tool;

std::vector<std::string> fields(const std::string& row) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t comma; (comma = row.find(',', start)) != std::string::npos; start = comma + 1) {
    out.push_back(row.substr(start, comma - start));
  }
  out.push_back(row.substr(start));
  return out;
}

// The views recomputed from the inputs' contents at one time.
Contents bids_per_auction(const Contents& bids) {
  std::map<uint64_t, int64_t> counts;
  for (const auto& [row, n] : bids) counts[std::stoull(fields(row)[2])] += n;
  Contents out;
  for (const auto& [auction, n] : counts) {
    if (n != 0) out[std::to_string(auction) + "," + std::to_string(n)] = 1;
  }
  return out;
}

Contents max_bid(const Contents& bids, const Contents& users) {
  std::map<uint64_t, std::string> region;
  for (const auto& [row, n] : users) {
    if (n > 0) region[std::stoull(fields(row)[0])] = fields(row)[2];
  }
  // auction -> the highest (amount, bid id, buyer, region).
  std::map<uint64_t, std::tuple<uint64_t, uint64_t, uint64_t, std::string>> best;
  for (const auto& [row, n] : bids) {
    if (n <= 0) continue;
    const auto f = fields(row);
    const uint64_t buyer = std::stoull(f[1]);
    auto r = region.find(buyer);
    if (r == region.end()) continue;
    const auto candidate = std::tuple(std::stoull(f[3]), std::stoull(f[0]), buyer, r->second);
    auto [it, fresh] = best.try_emplace(std::stoull(f[2]), candidate);
    if (!fresh && it->second < candidate) it->second = candidate;
  }
  Contents out;
  for (const auto& [auction, b] : best) {
    const auto& [amount, bid, buyer, where] = b;
    out[std::to_string(auction) + "," + std::to_string(amount) + "," + std::to_string(bid) + "," +
        std::to_string(buyer) + "," + where] = 1;
  }
  return out;
}

std::vector<std::string> ingest_args(const fs::path& dir, uint64_t until, uint64_t rate) {
  return {WEIR_TOOL_PATH,
          "ingest",
          "--source",
          "loadgen:auction",
          "--scale",
          "2",
          "--persist",
          dir.string(),
          "-w",
          "2",
          "--until",
          std::to_string(until),
          "--rate",
          std::to_string(rate),
          "--quiet",
          "--compaction-window",
          "18446744073709551615"};
}

std::vector<std::string> view_args(const fs::path& dir, const std::string& view,
                                   const std::vector<std::string>& more) {
  std::vector<std::string> args = {WEIR_TOOL_PATH, "view", "--persist", dir.string(),
                                   view,           "-w",   "2"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(ViewTest, BothViewsEqualARecomputationFromTheirInputsAtEveryTime) {
  const fs::path dir = testing::fresh_dir("view");
  constexpr uint64_t kUntil = 1500;
  ASSERT_EQ(run_tool(ingest_args(dir, kUntil, 0), dir / "ingest.log"), 0)
      << read_file(dir / "ingest.log");
  for (const std::string view : {"bids-per-auction", "max-bid"}) {
    ASSERT_EQ(
        run_tool(view_args(dir, view, {"--until", std::to_string(kUntil + 1)}), dir / "view.log"),
        0)
        << read_file(dir / "view.log");
  }
  auto client =
      persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string())).value();
  for (uint64_t t = 0; t <= kUntil; t += (t < 20 ? 1 : 37)) {
    const Contents bids = testing::shard_at(*client, "auction.bids", t);
    const Contents users = testing::shard_at(*client, "auction.users", t);
    ASSERT_EQ(testing::shard_at(*client, "view.bids-per-auction", t), bids_per_auction(bids))
        << "bids-per-auction at " << t;
    ASSERT_EQ(testing::shard_at(*client, "view.max-bid", t), max_bid(bids, users))
        << "max-bid at " << t;
  }
  EXPECT_FALSE(testing::shard_at(*client, "view.max-bid", kUntil).empty());
  fs::remove_all(dir);
}

TEST(ViewTest, TenKillsWhileIngestWritesLeaveTheSameOutputAsAnUninterruptedRun) {
  const fs::path dir = testing::fresh_dir("view-kills");
  constexpr uint64_t kUntil = 4000;
  const pid_t ingest = spawn_tool(ingest_args(dir, kUntil, 500), dir / "ingest.log");
  auto client_ready = [&] { return fs::exists(dir / "consensus.db"); };
  while (!client_ready()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto client =
      persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string())).value();
  auto upper_of = [&](const std::string& shard) -> uint64_t {
    auto d = client->describe(shard);
    return !d.ok() ? 0 : d->upper.is_empty() ? UINT64_MAX : d->upper.time();
  };
  auto output_upper = [&] { return upper_of("view.max-bid"); };
  // Where the view's output stands once it has caught up with its inputs.
  auto inputs_upper = [&] { return std::min(upper_of("auction.bids"), upper_of("auction.users")); };
  std::mt19937_64 random(7);
  int killed = 0, progressed = 0;
  uint64_t last = 0;
  for (int round = 0; round < 10; ++round) {
    const pid_t view = spawn_tool(view_args(dir, "max-bid", {}), dir / "view.log");
    // Killed at a random moment after it appended once (or after 15 s): every restart resumes
    // from an output upper a killed run left, however loaded the machine.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (output_upper() <= last && output_upper() < inputs_upper() &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(random() % 400));
    if (kill(view, SIGKILL) == 0) ++killed;
    waitpid(view, nullptr, 0);
    const uint64_t upper = output_upper();
    // A run that started with its output caught up with inputs that had ended (ingest done) had
    // nothing to move: under ASan on a loaded machine a run could catch up with the whole input
    // before the kill, and the rounds after it failed this count (2 of 10 moved).
    if (upper > last || upper >= inputs_upper()) ++progressed;
    last = upper;
  }
  // Runs appended before they were killed: their restarts resumed from the output's upper.
  EXPECT_GE(progressed, 5) << "runs that moved the output's upper (or had nothing to move)";
  int status = 0;
  waitpid(ingest, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(dir / "ingest.log");
  EXPECT_EQ(killed, 10);
  // The last run finishes; then an uninterrupted one into another shard.
  ASSERT_EQ(run_tool(view_args(dir, "max-bid", {"--until", std::to_string(kUntil + 1)}),
                     dir / "view.log"),
            0)
      << read_file(dir / "view.log");
  ASSERT_EQ(run_tool(view_args(dir, "max-bid",
                               {"--output", "reference", "--until", std::to_string(kUntil + 1)}),
                     dir / "view.log"),
            0)
      << read_file(dir / "view.log");
  // (That the killed runs appended is `progressed` above: the output's batches cannot tell, as
  // the view's maintenance may have compacted them into one.)
  for (uint64_t t = 0; t <= kUntil; t += 97) {
    ASSERT_EQ(testing::shard_at(*client, "view.max-bid", t),
              testing::shard_at(*client, "reference", t))
        << "at " << t;
  }
  ASSERT_EQ(testing::shard_at(*client, "view.max-bid", kUntil),
            testing::shard_at(*client, "reference", kUntil));
  fs::remove_all(dir);
}

// In-memory stores that ingest, the views and the test's client share.
struct Stores {
  std::shared_ptr<persist::Blob> blob = persist::Blob::open("mem://").value();
  std::shared_ptr<persist::Consensus> consensus = persist::Consensus::open("mem://").value();
};

// Ingests the auction generator at scale 2 up to `until`, as fast as it goes (a later call
// resumes from the shards).
void ingest_to(const Stores& stores, uint64_t until) {
  IngestOptions options;
  options.blob = stores.blob;
  options.consensus = stores.consensus;
  options.workers.workers = 1;
  options.source.generator.kind = "auction";
  options.source.generator.scale = 2;
  options.source.rate = 0;
  options.source.until = until;
  options.compaction_window = std::numeric_limits<uint64_t>::max();
  const auto report = run_ingest(options);
  ASSERT_TRUE(report.ok()) << report.status();
}

ViewOptions view_options(const Stores& stores, const std::string& view, const std::string& output,
                         std::optional<uint64_t> until) {
  ViewOptions options;
  options.view = view;
  options.output = output;
  options.until = until;
  options.workers = 2;
  options.blob = stores.blob;
  options.consensus = stores.consensus;
  options.stop = std::make_shared<std::atomic<bool>>(false);
  return options;
}

// Stops runs when the test ends, failed or not, before their futures wait for them.
struct StopAtExit {
  std::vector<std::shared_ptr<std::atomic<bool>>> stops;
  ~StopAtExit() {
    for (const auto& stop : stops) stop->store(true);
  }
};

// Steps of 10 ms until `done`, for at most a minute (then a failure).
template <class F>
bool wait_for(F done, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "waited a minute for " << what;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

uint64_t upper_of(persist::PersistClient& client, const std::string& shard) {
  auto d = client.describe(shard);
  return !d.ok() ? 0 : d->upper.is_empty() ? UINT64_MAX : d->upper.time();
}

// A run that is following its inputs is stopped; another run takes it up where it stopped, after
// the inputs have grown, and ends with the output of one uninterrupted run.
TEST(ViewTest, AStoppedViewResumesExactly) {
  const Stores stores;
  constexpr uint64_t kHalf = 600, kUntil = 1500;
  ASSERT_NO_FATAL_FAILURE(ingest_to(stores, kHalf));
  auto client = persist::PersistClient::create(stores.blob, stores.consensus);

  const ViewOptions following = view_options(stores, "max-bid", "view.max-bid", std::nullopt);
  auto first = std::async(std::launch::async, [following] { return run_view(following); });
  const StopAtExit stops{{following.stop}};
  // Caught up with the inputs, and waiting for more.
  wait_for([&] { return upper_of(*client, "view.max-bid") == kHalf + 1; }, "the first run");
  following.stop->store(true);
  ASSERT_EQ(first.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  ASSERT_TRUE(first.get().ok());
  EXPECT_EQ(upper_of(*client, "view.max-bid"), kHalf + 1);

  ASSERT_NO_FATAL_FAILURE(ingest_to(stores, kUntil));
  absl::Status resumed = run_view(view_options(stores, "max-bid", "view.max-bid", kUntil + 1));
  ASSERT_TRUE(resumed.ok()) << resumed;
  absl::Status reference = run_view(view_options(stores, "max-bid", "reference", kUntil + 1));
  ASSERT_TRUE(reference.ok()) << reference;
  EXPECT_EQ(upper_of(*client, "view.max-bid"), kUntil + 1);
  for (uint64_t t = 0; t <= kUntil; t += 37) {
    ASSERT_EQ(testing::shard_at(*client, "view.max-bid", t),
              testing::shard_at(*client, "reference", t))
        << "at " << t;
  }
  const uint64_t t = kUntil;
  EXPECT_EQ(testing::shard_at(*client, "view.max-bid", t),
            max_bid(testing::shard_at(*client, "auction.bids", t),
                    testing::shard_at(*client, "auction.users", t)));
}

// An output another view wrote is not taken over: resuming bids-per-auction from what max-bid
// left would add counts on top of rows it never wrote (found by helper-55's review).
TEST(ViewTest, AnotherViewsOutputIsRefused) {
  const Stores stores;
  ASSERT_NO_FATAL_FAILURE(ingest_to(stores, 300));
  ASSERT_TRUE(run_view(view_options(stores, "max-bid", "shared", 200)).ok());
  const absl::Status reused = run_view(view_options(stores, "bids-per-auction", "shared", 300));
  EXPECT_EQ(reused.code(), absl::StatusCode::kFailedPrecondition) << reused;
  EXPECT_NE(reused.message().find("weir view max-bid -> shared"), std::string_view::npos) << reused;
  auto client = persist::PersistClient::create(stores.blob, stores.consensus);
  EXPECT_EQ(upper_of(*client, "shared"), 200u);
  // The same view resumes it.
  EXPECT_TRUE(run_view(view_options(stores, "max-bid", "shared", 300)).ok());
  EXPECT_EQ(upper_of(*client, "shared"), 300u);
}

// Two runs of one view at once: the later one fences the earlier out of the output shard, whose
// next append is refused and which ends with that error, naming the later run. The output is
// that of one uninterrupted run.
TEST(ViewTest, ASecondRunFencesTheFirst) {
  const Stores stores;
  constexpr uint64_t kHalf = 600, kUntil = 1500;
  ASSERT_NO_FATAL_FAILURE(ingest_to(stores, kHalf));
  auto client = persist::PersistClient::create(stores.blob, stores.consensus);

  const ViewOptions earlier = view_options(stores, "bids-per-auction", "", std::nullopt);
  auto first = std::async(std::launch::async, [earlier] { return run_view(earlier); });
  wait_for([&] { return upper_of(*client, "view.bids-per-auction") == kHalf + 1; },
           "the first run");
  const ViewOptions later = view_options(stores, "bids-per-auction", "", kUntil + 1);
  auto second = std::async(std::launch::async, [later] { return run_view(later); });
  const StopAtExit stops{{earlier.stop, later.stop}};
  // The second run's epoch is above the first's (fresh stores: 1, then 2).
  wait_for(
      [&] {
        auto d = client->describe("view.bids-per-auction");
        return d.ok() && d->fence_epoch == 2;
      },
      "the second run's fence");
  const auto described = client->describe("view.bids-per-auction");
  ASSERT_TRUE(described.ok()) << described.status();
  EXPECT_NE(
      described->fence_owner.find("weir view bids-per-auction -> view.bids-per-auction epoch 2 ("),
      std::string::npos)
      << described->fence_owner;

  // New input: both runs have something to append, and the first is refused.
  ASSERT_NO_FATAL_FAILURE(ingest_to(stores, kUntil));
  if (first.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    earlier.stop->store(true);
    FAIL() << "the first run goes on after the second fenced it";
  }
  const absl::Status fenced = first.get();
  EXPECT_TRUE(persist::is_fenced(fenced)) << fenced;
  EXPECT_NE(fenced.message().find("view.bids-per-auction epoch 2"), std::string::npos) << fenced;
  ASSERT_EQ(second.wait_for(std::chrono::seconds(120)), std::future_status::ready);
  const absl::Status finished = second.get();
  ASSERT_TRUE(finished.ok()) << finished;

  absl::Status reference =
      run_view(view_options(stores, "bids-per-auction", "reference", kUntil + 1));
  ASSERT_TRUE(reference.ok()) << reference;
  EXPECT_EQ(upper_of(*client, "view.bids-per-auction"), kUntil + 1);
  for (uint64_t t = 0; t <= kUntil; t += 37) {
    ASSERT_EQ(testing::shard_at(*client, "view.bids-per-auction", t),
              testing::shard_at(*client, "reference", t))
        << "at " << t;
  }
  EXPECT_EQ(testing::shard_at(*client, "view.bids-per-auction", kUntil),
            bids_per_auction(testing::shard_at(*client, "auction.bids", kUntil)));
}

}  // namespace
}  // namespace weir::ingest
