// The model: snapshots, listens, appends, holds and compaction against brute-force answers.

#include <algorithm>
#include <atomic>
#include <map>
#include <random>
#include <set>

#include "gtest/gtest.h"
#include "persist_test_util.h"
#include "test_stores.h"

#include "weir/persist/client.h"
#include "weir/persist/faults.h"

namespace weir::persist {
namespace {

using testing::as_map;
using testing::consolidate;

// Small parts and a small merge fan-in, so that batches have many parts and runs and compaction
// takes several steps.
PersistConfig small_config() {
  PersistConfig config;
  config.part_target_bytes = 300;
  config.compaction_max_runs = 3;
  config.io_threads = 2;
  return config;
}

// The number of parts the batches of shard `name` reference.
size_t parts_in(PersistClient& client, std::string_view name) {
  const ShardDescription description = client.describe(name).value();
  size_t parts = 0;
  for (const auto& batch : description.batches) {
    parts += batch.num_parts;
  }
  return parts;
}

// A batch of one row, "row" at time 0, for [0, 1).
Batch one_row(WriteHandle& writer) {
  BatchBuilder builder = writer.builder(Frontier(0));
  EXPECT_TRUE(builder.add("row", 0, 1).ok());
  return builder.finish(Frontier(1)).value();
}

class ShardTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    location_ = testing::fresh_location(GetParam());
    client_ = open_client();
  }

  std::unique_ptr<PersistClient> open_client(PersistConfig config = small_config()) {
    absl::StatusOr<std::unique_ptr<PersistClient>> client = PersistClient::open(location_, config);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  PersistLocation location_;
  std::unique_ptr<PersistClient> client_;
};

TEST_P(ShardTest, SnapshotIsTheConsolidatedHistoryBeforeAndAfterCompaction) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const std::string name = "model-" + std::to_string(seed);
    WriteHandle writer = client_->open_writer(name).value();
    ReadHandle reader = client_->open_reader(name).value();
    std::vector<Update> history;
    uint64_t upper = 0;
    const auto check = [&](const char* when) {
      const uint64_t since = reader.since().time();
      for (uint64_t as_of = since; as_of < upper; as_of += 1 + rng() % 3) {
        absl::StatusOr<std::vector<Update>> snapshot = reader.snapshot(as_of);
        ASSERT_TRUE(snapshot.ok()) << snapshot.status();
        ASSERT_EQ(as_map(*snapshot), consolidate(history, as_of)) << when << " as_of " << as_of;
        for (const Update& update : *snapshot) {
          ASSERT_EQ(update.time, as_of);
        }
        ASSERT_TRUE(
            std::is_sorted(snapshot->begin(), snapshot->end(),
                           [](const Update& a, const Update& b) { return a.data < b.data; }));
      }
    };
    for (int step = 0; step < 30; ++step) {
      const uint64_t new_upper = upper + 1 + rng() % 4;
      std::vector<Update> batch;
      const int count = static_cast<int>(rng() % 40);
      for (int i = 0; i < count; ++i) {
        batch.push_back({"key" + std::to_string(rng() % 25) + std::string(rng() % 20, 'x'),
                         upper + rng() % (new_upper - upper), rng() % 3 == 0 ? -1 : 1});
      }
      AppendResult result =
          writer.compare_and_append(batch, Frontier(upper), Frontier(new_upper)).value();
      ASSERT_TRUE(result.is_appended());
      history.insert(history.end(), batch.begin(), batch.end());
      upper = new_upper;
      if (rng() % 4 == 0) {
        ASSERT_TRUE(reader
                        .downgrade_since(Frontier(reader.since().time() +
                                                  rng() % (upper - reader.since().time())))
                        .ok());
      }
      check("after append");
      if (rng() % 5 == 0) {
        ASSERT_TRUE(client_->compact(name).ok());
        check("after compaction");
      }
    }
    absl::StatusOr<CompactionResult> compacted = client_->compact(name, {.full = true});
    ASSERT_TRUE(compacted.ok()) << compacted.status();
    EXPECT_GT(compacted->merges, 0u);
    const ShardDescription description = client_->describe(name).value();
    size_t batches_with_parts = 0;
    for (const auto& batch : description.batches) {
      batches_with_parts += batch.num_parts > 0;
      EXPECT_LE(batch.num_runs, 1u);
    }
    EXPECT_LE(batches_with_parts, 1u);
    check("after full compaction");
    ASSERT_TRUE(client_->gc(name).ok());
    check("after gc");
  }
}

// The merge compares cached 8-byte prefixes of the data before the data itself: binary data,
// short data, data equal in its first 8 bytes and an empty data must still merge in byte order.
TEST_P(ShardTest, SnapshotMergesBinaryDataInByteOrder) {
  WriteHandle writer = client_->open_writer("binary").value();
  ReadHandle reader = client_->open_reader("binary").value();
  std::mt19937_64 rng(11);
  const std::string alphabet("\x00\x01\x7f\x80\xff", 5);
  std::vector<Update> history;
  uint64_t upper = 0;
  for (int step = 0; step < 12; ++step) {
    std::vector<Update> batch;
    for (int i = 0; i < 60; ++i) {
      std::string data(rng() % 3 == 0 ? 8 : 0, '\xff');  // A shared 8-byte prefix, often.
      for (size_t n = rng() % 11; n > 0; --n) {
        data.push_back(alphabet[rng() % alphabet.size()]);
      }
      batch.push_back({std::move(data), upper, rng() % 3 == 0 ? -1 : 1});
    }
    ASSERT_TRUE(writer.compare_and_append(batch, Frontier(upper), Frontier(upper + 1))
                    .value()
                    .is_appended());
    history.insert(history.end(), batch.begin(), batch.end());
    ++upper;
  }
  absl::StatusOr<std::vector<Update>> snapshot = reader.snapshot(upper - 1);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(as_map(*snapshot), consolidate(history, upper - 1));
  EXPECT_TRUE(std::is_sorted(snapshot->begin(), snapshot->end(),
                             [](const Update& a, const Update& b) { return a.data < b.data; }));
  EXPECT_TRUE(
      std::adjacent_find(snapshot->begin(), snapshot->end(), [](const Update& a, const Update& b) {
        return a.data == b.data;
      }) == snapshot->end());
}

// A key whose updates fill several parts of one run (after compaction): the merge lets go of the
// parts behind it while the key is still being read, and must keep the key's own part alive.
TEST_P(ShardTest, AKeySpanningPartsOfARunStaysIntact) {
  WriteHandle writer = client_->open_writer("span").value();
  ReadHandle reader = client_->open_reader("span").value();
  const std::string long_key(40, 'k');
  std::vector<Update> history;
  uint64_t upper = 0;
  for (int step = 0; step < 6; ++step) {
    std::vector<Update> batch;
    for (int i = 0; i < 40; ++i) {
      batch.push_back({long_key, upper, 1});  // 40 updates at distinct times: no consolidation.
      batch.push_back({"a" + std::to_string(step * 40 + i), upper, 1});
      batch.push_back({"z" + std::to_string(step * 40 + i), upper, 1});
      ++upper;
    }
    ASSERT_TRUE(writer.compare_and_append(batch, Frontier(upper - 40), Frontier(upper))
                    .value()
                    .is_appended());
    history.insert(history.end(), batch.begin(), batch.end());
  }
  ASSERT_TRUE(client_->compact("span", {.full = true}).ok());
  ASSERT_GT(parts_in(*client_, "span"), 10u);
  for (int round = 0; round < 3; ++round) {  // Parts decoded later reuse the buffers let go of.
    SnapshotCursor cursor = reader.snapshot_cursor(upper - 1).value();
    std::map<std::string, int64_t> seen;
    while (cursor.next()) {
      seen[std::string(cursor.data())] += cursor.diff();
    }
    ASSERT_TRUE(cursor.status().ok()) << cursor.status();
    EXPECT_EQ(seen, consolidate(history, upper - 1));
    EXPECT_EQ(seen[long_key], 240);
  }
}

// Enough runs that a snapshot merges half of them on a thread of its own, and enough data that
// its blocks go round the queue many times (each block is reused once the reader is done with it).
TEST_P(ShardTest, ASnapshotOfManyRunsMergesItsTwoHalvesExactly) {
  PersistConfig config = small_config();
  config.part_target_bytes = 64 << 10;
  std::unique_ptr<PersistClient> client = open_client(config);
  WriteHandle writer = client->open_writer("halves").value();
  ReadHandle reader = client->open_reader("halves").value();
  std::mt19937_64 rng(5);
  std::vector<Update> history;
  for (uint64_t step = 0; step < 4; ++step) {
    std::vector<Update> batch;
    for (int i = 0; i < 40000; ++i) {
      // Keys repeat across batches (and so across the halves), with diffs that sometimes cancel.
      std::string data = "key-" + std::to_string(rng() % 100000) + std::string(40, 'x');
      batch.push_back({std::move(data), step, rng() % 4 == 0 ? -1 : 1});
    }
    ASSERT_TRUE(
        writer.compare_and_append(batch, Frontier(step), Frontier(step + 1)).value().is_appended());
    history.insert(history.end(), batch.begin(), batch.end());
  }
  size_t runs = 0;
  const ShardDescription description = client->describe("halves").value();
  for (const auto& batch : description.batches) {
    runs += batch.num_runs;
  }
  ASSERT_GE(runs, 16u);
  SnapshotCursor cursor = reader.snapshot_cursor(3).value();
  std::map<std::string, int64_t> seen;
  std::string previous;
  while (cursor.next()) {
    const std::string data(cursor.data());
    ASSERT_TRUE(seen.empty() || previous < data) << "out of order or repeated: " << data;
    seen[data] = cursor.diff();
    previous = data;
  }
  ASSERT_TRUE(cursor.status().ok()) << cursor.status();
  EXPECT_EQ(seen, consolidate(history, 3));
}

TEST_P(ShardTest, ListenSeesEveryBatchOnceInOrder) {
  WriteHandle writer = client_->open_writer("listen").value();
  ReadHandle reader = client_->open_reader("listen").value();
  std::mt19937_64 rng(7);
  std::vector<Update> history;
  std::vector<uint64_t> uppers;
  uint64_t upper = 0;
  const auto append = [&](int batches) {
    for (int b = 0; b < batches; ++b) {
      const uint64_t new_upper = upper + 1 + rng() % 3;
      std::vector<Update> batch;
      const int count = static_cast<int>(rng() % 30);  // Some batches are empty.
      for (int i = 0; i < count; ++i) {
        batch.push_back({"k" + std::to_string(rng() % 50), upper + rng() % (new_upper - upper), 1});
      }
      ASSERT_TRUE(writer.compare_and_append(batch, Frontier(upper), Frontier(new_upper))
                      .value()
                      .is_appended());
      history.insert(history.end(), batch.begin(), batch.end());
      upper = new_upper;
      uppers.push_back(upper);
    }
  };
  append(5);
  const uint64_t as_of = 3;
  Listen listen = reader.listen(as_of).value();
  std::vector<Update> seen;
  std::vector<Update> pending;  // Yielded since the last progress.
  std::vector<uint64_t> progress;
  const auto drain = [&] {
    while (true) {
      absl::StatusOr<std::optional<ListenEvent>> event = listen.next();
      ASSERT_TRUE(event.ok()) << event.status();
      if (!event->has_value()) {
        return;
      }
      const uint64_t before = progress.empty() ? as_of + 1 : progress.back();
      for (const Update& update : (*event)->updates) {
        EXPECT_GE(update.time, before) << "an update before the listen's frontier";
      }
      pending.insert(pending.end(), (*event)->updates.begin(), (*event)->updates.end());
      if ((*event)->progress.time() != before) {
        // A batch is complete: its updates are all before the new frontier.
        for (const Update& update : pending) {
          EXPECT_LT(update.time, (*event)->progress.time());
        }
        seen.insert(seen.end(), pending.begin(), pending.end());
        pending.clear();
        progress.push_back((*event)->progress.time());
      }
    }
  };
  drain();
  append(4);
  drain();
  append(6);
  drain();
  EXPECT_EQ(listen.frontier(), Frontier(upper));
  // Each batch's upper is a progress step, in order (the batches before as_of + 1 are skipped).
  std::vector<uint64_t> expected_progress;
  for (uint64_t u : uppers) {
    if (u > as_of + 1) {
      expected_progress.push_back(u);
    }
  }
  EXPECT_EQ(progress, expected_progress);
  // Compaction merges batches already yielded with batches not yet yielded: their updates still
  // come exactly once, now as fewer, larger batches.
  append(4);
  const absl::StatusOr<CompactionResult> compacted = client_->compact("listen", {.full = true});
  ASSERT_TRUE(compacted.ok()) << compacted.status();
  append(3);
  drain();
  EXPECT_EQ(listen.frontier(), Frontier(upper));
  EXPECT_TRUE(std::is_sorted(progress.begin(), progress.end()));
  EXPECT_EQ(std::adjacent_find(progress.begin(), progress.end()), progress.end());
  // Exactly the updates after as_of, each once (compare as consolidated multisets).
  std::vector<Update> after;
  for (const Update& update : history) {
    if (update.time > as_of) {
      after.push_back(update);
    }
  }
  std::map<std::pair<std::string, uint64_t>, int64_t> want, got;
  for (const Update& u : after) {
    want[{u.data, u.time}] += u.diff;
  }
  for (const Update& u : seen) {
    got[{u.data, u.time}] += u.diff;
  }
  EXPECT_EQ(got, want);
  // snapshot(as_of) + listen(as_of) is the whole collection.
  std::vector<Update> all = reader.snapshot(as_of).value();
  all.insert(all.end(), seen.begin(), seen.end());
  EXPECT_EQ(consolidate(all, upper), consolidate(history, upper));
}

// A reader behind by several batches gets the parts of all of them from one next_parts(), each
// with its own batch's lower, and progress at the last one's upper (stop 24: it got one batch per
// state read, so a view that fell behind an ingest appending 100 batches/s never caught up).
TEST_P(ShardTest, NextPartsCatchesUpOnEveryBatchBelowTheUpperAtOnce) {
  std::shared_ptr<PersistClient> client = open_client();
  WriteHandle writer = client->open_writer("behind").value();
  ReadHandle reader = client->open_reader("behind").value();
  std::vector<Update> history;
  for (uint64_t b = 0; b < 6; ++b) {
    std::vector<Update> batch = {{"k" + std::to_string(b), b * 10 + 3, 1},
                                 {"j" + std::to_string(b), b * 10 + 9, 2}};
    ASSERT_TRUE(writer.compare_and_append(batch, Frontier(b * 10), Frontier(b * 10 + 10))
                    .value()
                    .is_appended());
    if (b > 0) history.insert(history.end(), batch.begin(), batch.end());
  }
  Listen listen = reader.listen(9).value();  // Everything from time 10.
  absl::StatusOr<std::optional<PartsBatch>> parts = listen.next_parts();
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_TRUE(parts->has_value());
  EXPECT_EQ((*parts)->progress, Frontier(60));
  EXPECT_EQ(listen.frontier(), Frontier(60));
  std::vector<Update> fetched;
  for (const LeasedPart& part : (*parts)->parts) {
    EXPECT_EQ(part.lower % 10, 0u);
    ASSERT_TRUE(client
                    ->fetch_part(part,
                                 [&](std::string_view data, uint64_t time, int64_t diff) {
                                   EXPECT_GE(time, part.lower) << data;
                                   fetched.push_back({std::string(data), time, diff});
                                 })
                    .ok());
  }
  EXPECT_EQ(as_map(fetched), as_map(history));
  EXPECT_FALSE(listen.next_parts().value().has_value()) << "nothing more below the upper";
  std::vector<Update> more = {{"late", 61, 1}};
  ASSERT_TRUE(writer.compare_and_append(more, Frontier(60), Frontier(70)).value().is_appended());
  parts = listen.next_parts();
  ASSERT_TRUE(parts.ok() && parts->has_value());
  EXPECT_EQ((*parts)->progress, Frontier(70));
  ASSERT_EQ((*parts)->parts.size(), 1u);
  EXPECT_EQ((*parts)->parts[0].lower, 60u);
}

TEST_P(ShardTest, ListenRefusesToContinueWhenCompactedPastItsFrontier) {
  WriteHandle writer = client_->open_writer("listen-since").value();
  ReadHandle reader = client_->open_reader("listen-since").value();
  std::vector<Update> first = {{"a", 0, 1}, {"b", 1, 1}};
  ASSERT_TRUE(writer.compare_and_append(first, Frontier(0), Frontier(2)).value().is_appended());
  Listen listen = reader.listen(0).value();
  absl::StatusOr<std::optional<ListenEvent>> event = listen.next();
  ASSERT_TRUE(event.ok() && event->has_value());
  ASSERT_EQ(listen.frontier(), Frontier(2));
  std::vector<Update> second = {{"c", 2, 1}};
  ASSERT_TRUE(writer.compare_and_append(second, Frontier(2), Frontier(3)).value().is_appended());
  // The reader lets go of times the listen still needs, and compaction moves "b" to time 2.
  ASSERT_TRUE(reader.downgrade_since(Frontier(2)).ok());
  ASSERT_TRUE(client_->compact("listen-since", {.full = true}).ok());
  event = listen.next();
  EXPECT_EQ(event.status().code(), absl::StatusCode::kFailedPrecondition) << event.status();
}

TEST_P(ShardTest, LoserOfARaceGetsUpperMismatchAndTheShardKeepsTheWinner) {
  std::unique_ptr<PersistClient> other = open_client();
  WriteHandle a = client_->open_writer("race").value();
  WriteHandle b = other->open_writer("race").value();
  std::vector<Update> from_a = {{"from a", 0, 1}};
  std::vector<Update> from_b = {{"from b", 0, 1}};
  ASSERT_TRUE(a.compare_and_append(from_a, Frontier(0), Frontier(5)).value().is_appended());
  const AppendResult lost = b.compare_and_append(from_b, Frontier(0), Frontier(5)).value();
  ASSERT_FALSE(lost.is_appended());
  EXPECT_EQ(lost.mismatch->current, Frontier(5));
  EXPECT_EQ(b.upper(), Frontier(5)) << "the loser learns the upper";
  ReadHandle reader = client_->open_reader("race").value();
  EXPECT_EQ(reader.snapshot(4).value(), (std::vector<Update>{{"from a", 4, 1}}));
  // The loser's parts were removed: every blob of the shard is referenced by a batch.
  const size_t referenced = parts_in(*client_, "race");
  auto blob = Blob::open(location_.blob_url).value();
  EXPECT_EQ(blob->list_keys(a.shard_id().str() + "/").value().size(), referenced);
}

TEST_P(ShardTest, ConcurrentWritersInThreadsNeverBothWinAnUpper) {
  constexpr int kWriters = 3;
  constexpr uint64_t kUpper = 30;
  std::vector<std::thread> threads;
  std::vector<std::vector<uint64_t>> won(kWriters);
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      WriteHandle writer = client_->open_writer("threads").value();
      Frontier upper = writer.upper();
      while (upper.time() < kUpper) {
        std::vector<Update> updates = {{"w" + std::to_string(w), upper.time(), 1}};
        const AppendResult result =
            writer.compare_and_append(updates, upper, Frontier(upper.time() + 1)).value();
        if (result.is_appended()) {
          won[w].push_back(upper.time());
          upper = Frontier(upper.time() + 1);
        } else {
          ASSERT_LT(upper, result.mismatch->current);
          upper = result.mismatch->current;
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  std::map<uint64_t, int> winners;
  for (int w = 0; w < kWriters; ++w) {
    for (uint64_t t : won[w]) {
      EXPECT_EQ(winners.count(t), 0u) << "two winners at " << t;
      winners[t] = w;
    }
  }
  EXPECT_EQ(winners.size(), kUpper);
  ReadHandle reader = client_->open_reader("threads").value();
  std::map<std::string, int64_t> expected;
  for (const auto& [t, w] : winners) {
    ++expected["w" + std::to_string(w)];
  }
  EXPECT_EQ(as_map(reader.snapshot(kUpper - 1).value()), expected);
}

TEST_P(ShardTest, BatchesAreTransmittable) {
  std::unique_ptr<PersistClient> worker_client = open_client();
  WriteHandle worker = worker_client->open_writer("transmit", "worker").value();
  WriteHandle appender = client_->open_writer("transmit", "appender").value();
  BatchBuilder builder = worker.builder(Frontier(0));
  std::vector<Update> updates;
  for (int i = 0; i < 200; ++i) {
    updates.push_back({"row " + std::to_string(i % 70), static_cast<uint64_t>(i % 9), 1});
    ASSERT_TRUE(builder.add(updates.back().data, updates.back().time, 1).ok());
  }
  const Batch batch = builder.finish(Frontier(10)).value();
  EXPECT_GT(batch.parts.size(), 1u);
  const std::string wire = batch.encode();
  const Batch received = Batch::decode(wire).value();
  EXPECT_EQ(received.description, batch.description);
  EXPECT_EQ(received.num_updates(), batch.num_updates());
  ASSERT_TRUE(
      appender.compare_and_append(received, Frontier(0), Frontier(10)).value().is_appended());
  // A retry of the same append (say, after a lost connection) is recognized, not refused.
  EXPECT_TRUE(
      appender.compare_and_append(received, Frontier(0), Frontier(10)).value().is_appended());
  ReadHandle reader = client_->open_reader("transmit").value();
  EXPECT_EQ(as_map(reader.snapshot(9).value()), consolidate(updates, 9));
  EXPECT_EQ(Batch::decode("garbage").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(ShardTest, BatchBuilderUploadsPartsAsTheyFill) {
  WriteHandle writer = client_->open_writer("streaming").value();
  BatchBuilder builder = writer.builder(Frontier(0));
  auto blob = Blob::open(location_.blob_url).value();
  const std::string prefix = writer.shard_id().str() + "/";
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(builder.add("update number " + std::to_string(i), 0, 1).ok());
  }
  // ~3 KB added with 300-byte parts: most are uploaded before finish, at most
  // max_parts_in_flight are pending, and one buffer is filling.
  EXPECT_GE(blob->list_keys(prefix).value().size(), 5u);
  const Batch batch = builder.finish(Frontier(1)).value();
  EXPECT_EQ(batch.num_updates(), 100u);
  ASSERT_TRUE(writer.discard(batch).ok());
  EXPECT_TRUE(blob->list_keys(prefix).value().empty());
}

TEST_P(ShardTest, WaitForRoomLetsTheNextAddUploadWithoutWaiting) {
  PersistConfig config = small_config();
  config.max_parts_in_flight = 2;
  auto client = open_client(config);
  WriteHandle writer = client->open_writer("room").value();
  BatchBuilder builder = writer.builder(Frontier(0));
  bool was_full = false;
  for (int i = 0; i < 200; ++i) {
    if (builder.uploads_full()) {
      was_full = true;
      ASSERT_TRUE(builder.wait_for_room().ok());
      EXPECT_FALSE(builder.uploads_full());
    }
    ASSERT_TRUE(builder.add("update number " + std::to_string(i), 0, 1).ok());
  }
  EXPECT_TRUE(was_full) << "with 300-byte parts, two uploads in flight fill up";
  const Batch batch = builder.finish(Frontier(1)).value();
  EXPECT_EQ(batch.num_updates(), 200u);
  ASSERT_TRUE(writer.compare_and_append(batch, Frontier(0), Frontier(1)).value().is_appended());
  ReadHandle reader = client->open_reader("room").value();
  EXPECT_EQ(reader.snapshot(0).value().size(), 200u);
}

TEST_P(ShardTest, InvalidAppendsAreRefused) {
  WriteHandle writer = client_->open_writer("invalid").value();
  BatchBuilder builder = writer.builder(Frontier(10));
  EXPECT_EQ(builder.add("early", 9, 1).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(builder.add("late", 15, 1).ok());
  EXPECT_EQ(builder.finish(Frontier(15)).status().code(), absl::StatusCode::kInvalidArgument);
  BatchBuilder good = writer.builder(Frontier(0));
  ASSERT_TRUE(good.add("x", 1, 1).ok());
  const Batch batch = good.finish(Frontier(5)).value();
  EXPECT_EQ(writer.compare_and_append(batch, Frontier(0), Frontier(6)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(writer.compare_and_append(batch, Frontier(1), Frontier(5)).status().code(),
            absl::StatusCode::kInvalidArgument);
  ReadHandle reader = client_->open_reader("invalid").value();
  EXPECT_EQ(reader.snapshot(0).status().code(), absl::StatusCode::kFailedPrecondition)
      << "nothing is final yet";
}

TEST_P(ShardTest, LeasedAndCriticalHoldsKeepTheSinceBack) {
  WriteHandle writer = client_->open_writer("holds").value();
  std::vector<Update> updates = {{"a", 0, 1}, {"a", 5, 1}, {"b", 7, 1}};
  ASSERT_TRUE(writer.compare_and_append(updates, Frontier(0), Frontier(10)).value().is_appended());
  ReadHandle leased = client_->open_reader("holds").value();
  const CriticalReaderId id = CriticalReaderId::random();
  SinceHandle critical = client_->open_critical_since("holds", id).value();
  EXPECT_EQ(critical.epoch(), 0u);
  ASSERT_TRUE(leased.downgrade_since(Frontier(8)).ok());
  EXPECT_EQ(client_->describe("holds").value().since, Frontier(0)) << "held by the critical";
  SinceResult moved = critical.compare_and_downgrade_since(0, 1, Frontier(6)).value();
  EXPECT_FALSE(moved.mismatch);
  EXPECT_EQ(moved.since, Frontier(6));
  EXPECT_EQ(client_->describe("holds").value().since, Frontier(6));
  // A stale incarnation is fenced out.
  SinceResult fenced = critical.compare_and_downgrade_since(0, 2, Frontier(9)).value();
  ASSERT_TRUE(fenced.mismatch);
  EXPECT_EQ(fenced.mismatch->current, 1u);
  EXPECT_EQ(fenced.since, Frontier(6));
  // The hold is durable: another client opening the same id finds it.
  std::unique_ptr<PersistClient> restarted = open_client();
  SinceHandle reopened = restarted->open_critical_since("holds", id).value();
  EXPECT_EQ(reopened.epoch(), 1u);
  EXPECT_EQ(reopened.since(), Frontier(6));
  ASSERT_TRUE(client_->compact("holds", {.full = true}).ok());
  EXPECT_EQ(leased.snapshot(6).value(), (std::vector<Update>{{"a", 6, 2}}));
  EXPECT_EQ(leased.snapshot(5).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_FALSE(reopened.expire(1).value().has_value());
  EXPECT_EQ(client_->describe("holds").value().since, Frontier(8)) << "only the leased hold left";
}

TEST_P(ShardTest, ExpiredWritersAndReadersAreFencedOut) {
  absl::Time now = absl::Now();
  PersistConfig config = small_config();
  config.clock = [&now] { return now; };
  std::unique_ptr<PersistClient> client = open_client(config);
  WriteHandle writer = client->open_writer("leases").value();
  ReadHandle reader = client->open_reader("leases").value();
  BatchBuilder abandoned = writer.builder(Frontier(0));
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(abandoned.add("orphan part " + std::to_string(i), 0, 1).ok());
  }
  const Batch batch = abandoned.finish(Frontier(1)).value();
  // Time passes without heartbeats.
  now += config.writer_lease + absl::Minutes(1);
  const GcResult gc = client->gc("leases").value();
  EXPECT_EQ(gc.expired_writers, 1u);
  EXPECT_EQ(gc.expired_readers, 1u);
  EXPECT_EQ(gc.blobs_deleted, batch.parts.size());
  EXPECT_EQ(writer.compare_and_append(batch, Frontier(0), Frontier(1)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(reader.snapshot(0).status().code(), absl::StatusCode::kFailedPrecondition);
  // Another writer cannot append the expired writer's batch either: its parts are gone.
  WriteHandle other = client->open_writer("leases").value();
  EXPECT_EQ(other.compare_and_append(batch, Frontier(0), Frontier(1)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// A later process fences a shard by opening its writer with a higher epoch: the predecessor's
// writers and leased readers are gone at once (they no longer hold the since or the versions
// back), and whatever they try next is refused, naming the successor.
TEST_P(ShardTest, AWriterOfAHigherFenceRemovesTheLowerEpochsHandles) {
  const Fence first{1, "incarnation 1"};
  const Fence second{2, "incarnation 2 (host:42)"};
  WriteHandle old_writer = client_->open_writer("fenced", "old", first).value();
  ReadHandle old_reader = client_->open_reader("fenced", "old plan", first).value();
  ReadHandle ad_hoc = client_->open_reader("fenced", "weir persist cat").value();
  BatchBuilder builder = old_writer.builder(Frontier(0));
  ASSERT_TRUE(builder.add("old row", 0, 1).ok());
  const Batch late = builder.finish(Frontier(1)).value();

  WriteHandle writer = client_->open_writer("fenced", "new", second).value();
  ShardDescription d = client_->describe("fenced").value();
  EXPECT_EQ(d.fence_epoch, 2u);
  EXPECT_EQ(d.fence_owner, second.owner);
  ASSERT_EQ(d.writers.size(), 1u);
  EXPECT_EQ(d.writers[0].writer_id, writer.writer_id());
  EXPECT_EQ(d.writers[0].fence_epoch, 2u);
  ASSERT_EQ(d.leased_readers.size(), 1u) << "an unfenced reader is not the fence's business";
  EXPECT_EQ(d.leased_readers[0].purpose, "weir persist cat");

  const absl::StatusOr<AppendResult> appended =
      old_writer.compare_and_append(late, Frontier(0), Frontier(1));
  ASSERT_FALSE(appended.ok());
  EXPECT_TRUE(is_fenced(appended.status())) << appended.status();
  EXPECT_FALSE(is_writer_expired(appended.status())) << "a fence is not an expiry to reopen from";
  EXPECT_NE(appended.status().message().find("incarnation 2 (host:42)"), std::string_view::npos)
      << appended.status();
  // Review: "(fence epoch 2 > 1)" read as a comparison of incarnations when the owner names one.
  EXPECT_NE(appended.status().message().find("(the shard's fence epoch is 2, this one's 1)"),
            std::string_view::npos)
      << appended.status();
  EXPECT_TRUE(is_fenced(old_writer.heartbeat()));
  EXPECT_TRUE(is_fenced(old_reader.snapshot(0).status()));
  EXPECT_TRUE(is_fenced(old_reader.heartbeat())) << old_reader.heartbeat();
  // Nor can the predecessor come back: a handle below the fence is refused.
  EXPECT_TRUE(is_fenced(client_->open_writer("fenced", "old again", first).status()));
  EXPECT_TRUE(is_fenced(client_->open_reader("fenced", "old again", first).status()));
  const absl::Status compacted = client_->compact("fenced", {.fence = first}).status();
  EXPECT_TRUE(is_fenced(compacted));
  // Review: the refusal named "reader r…" only; what it refused is the compaction's.
  EXPECT_NE(compacted.message().find("\"compaction\""), std::string_view::npos) << compacted;
  EXPECT_EQ(client_->describe("fenced").value().writers.size(), 1u) << "refusals register nothing";

  // The successor's appends go on; so do an equal epoch's handles and unfenced ones.
  BatchBuilder next = writer.builder(Frontier(0));
  ASSERT_TRUE(next.add("new row", 0, 1).ok());
  ASSERT_TRUE(writer.compare_and_append(next.finish(Frontier(1)).value(), Frontier(0), Frontier(1))
                  ->is_appended());
  ASSERT_TRUE(client_->open_reader("fenced", "new plan", second).ok());
  ASSERT_TRUE(client_->compact("fenced", {.fence = second}).ok());
  WriteHandle tool = client_->open_writer("fenced", "tool").value();
  ASSERT_TRUE(
      tool.compare_and_append(std::vector<Update>{{"tool row", 1, 1}}, Frontier(1), Frontier(2))
          ->is_appended());
  EXPECT_EQ(client_->describe("fenced").value().fence_epoch, 2u) << "epoch 0 does not fence";
  EXPECT_EQ(as_map(ad_hoc.snapshot(1).value()),
            (std::map<std::string, int64_t>{{"new row", 1}, {"tool row", 1}}));
  ASSERT_TRUE(old_writer.discard(late).ok());
}

// PersistClient::fence raises the fence without a writer: a replica fences every shard of what
// it is about to run before it renders anything.
TEST_P(ShardTest, FencingWithoutAWriterRefusesTheLowerEpochs) {
  WriteHandle old_writer = client_->open_writer("claimed", "old", {3, "three"}).value();
  ASSERT_TRUE(client_->fence("claimed", {5, "five"}).ok());
  ASSERT_TRUE(client_->fence("claimed", {5, "five"}).ok()) << "fencing again is a no-op";
  const absl::Status lower = client_->fence("claimed", {4, "four"});
  EXPECT_TRUE(is_fenced(lower)) << lower;
  EXPECT_NE(lower.message().find("five"), std::string_view::npos) << lower;
  // Review: it read "a fence is fenced out"; it names the refused fence now.
  EXPECT_NE(lower.message().find("a fence of epoch 4 (four) is fenced out: five has taken"),
            std::string_view::npos)
      << lower;
  const ShardDescription d = client_->describe("claimed").value();
  EXPECT_EQ(d.fence_epoch, 5u);
  EXPECT_TRUE(d.writers.empty());
  EXPECT_TRUE(is_fenced(
      old_writer.compare_and_append(std::vector<Update>{{"x", 0, 1}}, Frontier(0), Frontier(1))
          .status()));
  EXPECT_TRUE(client_->open_writer("claimed", "successor", {5, "five"}).ok());
}

// An append of a fenced-out writer whose first try committed (its reply lost) is not refused
// outright: the caller would discard parts that the shard references. It is indeterminate.
TEST_P(ShardTest, AnAppendWhoseReplyWasLostBeforeAFenceStaysIndeterminate) {
  std::shared_ptr<Consensus> inner = Consensus::open(location_.consensus_url).value();
  std::shared_ptr<Blob> blob = Blob::open(location_.blob_url).value();
  auto consensus = std::make_shared<testing::LosingConsensus>(inner);
  std::unique_ptr<PersistClient> client = PersistClient::create(blob, consensus, small_config());
  WriteHandle writer = client->open_writer("lost-fenced", "old", {1, "one"}).value();
  const Batch batch = one_row(writer);
  // The append commits, its reply is lost, and before a retry learns the outcome a successor
  // fences the shard (another client on the same stores).
  consensus->lose_replies = 1;
  consensus->on_lost_reply = [&] {
    std::unique_ptr<PersistClient> successor = PersistClient::create(blob, inner, small_config());
    ASSERT_TRUE(successor->fence("lost-fenced", {2, "two"}).ok());
  };
  const absl::StatusOr<AppendResult> appended =
      writer.compare_and_append(batch, Frontier(0), Frontier(1));
  ASSERT_FALSE(appended.ok());
  EXPECT_TRUE(is_indeterminate(appended.status())) << appended.status();
  EXPECT_EQ(as_map(client->open_reader("lost-fenced").value().snapshot(0).value()),
            (std::map<std::string, int64_t>{{"row", 1}}));
}

// Review of the fences: the retry that the docs prescribe for an indeterminate append ("retry
// compare_and_append with the same batch") met a fence raised in between and was refused
// outright, FailedPrecondition, which the docs read as "nothing was written": a caller
// discarded the parts of a batch the shard held (its first try had committed, the reply lost).
// Only a retry inside the same call was reported indeterminate.
TEST_P(ShardTest, ARetryAfterAFenceOfAnAppendWhoseOutcomeWasUnknownIsNotRefused) {
  std::shared_ptr<Consensus> inner = Consensus::open(location_.consensus_url).value();
  std::shared_ptr<Blob> blob = Blob::open(location_.blob_url).value();
  auto consensus = std::make_shared<testing::LosingConsensus>(inner);
  std::unique_ptr<PersistClient> client = PersistClient::create(blob, consensus, small_config());
  WriteHandle writer = client->open_writer("retried-fenced", "old", {1, "one"}).value();
  const Batch batch = one_row(writer);
  // The append commits, its reply is lost and consensus stays down for the call's retries.
  consensus->lose_replies = 1;
  consensus->down_after_losing = true;
  const absl::StatusOr<AppendResult> first =
      writer.compare_and_append(batch, Frontier(0), Frontier(1));
  ASSERT_FALSE(first.ok());
  ASSERT_TRUE(is_indeterminate(first.status())) << first.status();
  // A successor fences the shard; consensus comes back; the caller retries, as told to.
  std::unique_ptr<PersistClient> successor = PersistClient::create(blob, inner, small_config());
  ASSERT_TRUE(successor->fence("retried-fenced", {2, "two"}).ok());
  consensus->down = false;
  const absl::StatusOr<AppendResult> retry =
      writer.compare_and_append(batch, Frontier(0), Frontier(1));
  ASSERT_FALSE(retry.ok());
  EXPECT_TRUE(is_indeterminate(retry.status())) << retry.status();
  EXPECT_TRUE(is_fenced(retry.status())) << "the handle is gone: no point retrying again";
  EXPECT_EQ(as_map(client->open_reader("retried-fenced").value().snapshot(0).value()),
            (std::map<std::string, int64_t>{{"row", 1}}));
}

// DISABLED: a design question (see the fences review). A predecessor's append commits and its
// reply is lost; the successor fences the shard, which removes the predecessor's registration and
// with it the token that recognises the batch, and retries the transmitted batch with its own
// writer: it gets an upper mismatch, which the docs read as "nothing was written", and a caller
// that then discards the batch (as the docs' example does) removes parts the shard references.
// The docs promise the retry is recognised "while the earlier one is still registered"; before
// fences that lasted the predecessor's lease, a fence ends it at once. Recognising it needs the
// tokens of the writers a fence removed kept in the state for a while (or the part keys
// compared, which a compaction in between defeats). No caller does this today: weir ingest never
// hands a batch to a later incarnation.
TEST_P(ShardTest, DISABLED_ASuccessorsRetryOfAPredecessorsCommittedBatchIsNotAMismatch) {
  std::shared_ptr<Consensus> inner = Consensus::open(location_.consensus_url).value();
  std::shared_ptr<Blob> blob = Blob::open(location_.blob_url).value();
  auto consensus = std::make_shared<testing::LosingConsensus>(inner);
  std::unique_ptr<PersistClient> client = PersistClient::create(blob, consensus, small_config());
  WriteHandle writer = client->open_writer("handed-over", "old", {1, "one"}).value();
  const Batch batch = one_row(writer);
  consensus->lose_replies = 1;
  consensus->down_after_losing = true;
  ASSERT_TRUE(
      is_indeterminate(writer.compare_and_append(batch, Frontier(0), Frontier(1)).status()));
  consensus->down = false;
  std::unique_ptr<PersistClient> successor = PersistClient::create(blob, inner, small_config());
  WriteHandle next = successor->open_writer("handed-over", "new", {2, "two"}).value();
  const absl::StatusOr<AppendResult> retry =
      next.compare_and_append(Batch::decode(batch.encode()).value(), Frontier(0), Frontier(1));
  EXPECT_TRUE(retry.ok() ? retry->is_appended() : is_indeterminate(retry.status()))
      << (retry.ok() ? "a mismatch" : retry.status().ToString());
}

// The same for a writer that GC expired between a call that lost its reply and the retry.
TEST_P(ShardTest, ARetryAfterAnExpiryOfAnAppendWhoseOutcomeWasUnknownIsNotRefused) {
  absl::Time now = absl::Now();
  PersistConfig config = small_config();
  config.clock = [&now] { return now; };
  std::shared_ptr<Consensus> inner = Consensus::open(location_.consensus_url).value();
  std::shared_ptr<Blob> blob = Blob::open(location_.blob_url).value();
  auto consensus = std::make_shared<testing::LosingConsensus>(inner);
  std::unique_ptr<PersistClient> client = PersistClient::create(blob, consensus, config);
  WriteHandle writer = client->open_writer("retried-expired").value();
  const Batch batch = one_row(writer);
  consensus->lose_replies = 1;
  consensus->down_after_losing = true;
  const absl::StatusOr<AppendResult> first =
      writer.compare_and_append(batch, Frontier(0), Frontier(1));
  ASSERT_TRUE(is_indeterminate(first.status())) << first.status();
  now += config.writer_lease + absl::Minutes(1);
  std::unique_ptr<PersistClient> other = PersistClient::create(blob, inner, config);
  ASSERT_EQ(other->gc("retried-expired").value().expired_writers, 1u);
  consensus->down = false;
  const absl::StatusOr<AppendResult> retry =
      writer.compare_and_append(batch, Frontier(0), Frontier(1));
  ASSERT_FALSE(retry.ok());
  EXPECT_TRUE(is_indeterminate(retry.status())) << retry.status();
  EXPECT_TRUE(is_writer_expired(retry.status())) << retry.status();
  EXPECT_EQ(as_map(client->open_reader("retried-expired").value().snapshot(0).value()),
            (std::map<std::string, int64_t>{{"row", 1}}));
}

// A read that a fence interrupts: the fence removes the reader, so its hold on the versions it
// reads goes, and GC may remove the parts still ahead of the cursor. The read failed with
// "part ... is missing from the blob store" (NotFound), which reads as data loss; it is the
// fence, and the error says so.
TEST_P(ShardTest, AReadThatAFenceInterruptsSaysItWasFencedNotThatAPartIsMissing) {
  WriteHandle writer = client_->open_writer("fenced-read", "old", {1, "one"}).value();
  for (uint64_t t = 0; t < 2; ++t) {
    std::vector<Update> rows;
    for (int i = 0; i < 400; ++i) {
      rows.push_back({"row " + std::to_string(t) + "." + std::to_string(1000 + i), t, 1});
    }
    ASSERT_TRUE(writer.compare_and_append(rows, Frontier(t), Frontier(t + 1))->is_appended());
  }
  ReadHandle reader = client_->open_reader("fenced-read", "old plan", {1, "one"}).value();
  SnapshotCursor cursor = reader.snapshot_cursor(1).value();
  ASSERT_TRUE(cursor.next());
  // The successor takes over; compaction rewrites the batches and GC removes the old parts, which
  // no registered reader holds any more.
  ASSERT_TRUE(client_->open_writer("fenced-read", "new", {2, "two (host:9)"}).ok());
  ASSERT_EQ(client_->compact("fenced-read", {.full = true}).value().merges, 1u);
  ASSERT_GT(client_->gc("fenced-read").value().blobs_deleted, 0u);
  while (cursor.next()) {
  }
  ASSERT_FALSE(cursor.status().ok()) << "the parts ahead were removed";
  EXPECT_TRUE(is_fenced(cursor.status())) << cursor.status();
  EXPECT_NE(cursor.status().message().find("two (host:9)"), std::string_view::npos)
      << cursor.status();
}

// A fence's owner is any string the caller gives (a host name, a kind). The state is a proto3
// message, whose string fields must be UTF-8: an owner with other bytes was written into the
// state, and every later read of the shard failed to parse it (DataLoss): one bad owner bricked
// the shard for every process, GC included.
TEST_P(ShardTest, AFenceOwnerThatIsNotUtf8DoesNotBreakTheShard) {
  const std::string owner = "ingest \xff\xfe incarnation 3";
  const absl::StatusOr<WriteHandle> writer = client_->open_writer("odd-owner", "w", {3, owner});
  const absl::Status fenced = client_->fence("odd-owner-2", {3, owner});
  // Refused with a clear error, or accepted: either way the shards stay readable.
  if (!writer.ok()) {
    EXPECT_EQ(writer.status().code(), absl::StatusCode::kInvalidArgument) << writer.status();
  }
  if (!fenced.ok()) {
    EXPECT_EQ(fenced.code(), absl::StatusCode::kInvalidArgument) << fenced;
  }
  for (const char* name : {"odd-owner", "odd-owner-2"}) {
    EXPECT_TRUE(client_->describe(name).ok()) << client_->describe(name).status();
    EXPECT_TRUE(client_->gc(name).ok()) << client_->gc(name).status();
    EXPECT_TRUE(client_->open_writer(name, "next", {4, "four"}).ok());
  }
  // The same for a handle's purpose, which the state keeps too.
  const absl::StatusOr<ReadHandle> reader = client_->open_reader("odd-purpose", "cat \xc3(");
  if (!reader.ok()) {
    EXPECT_EQ(reader.status().code(), absl::StatusCode::kInvalidArgument) << reader.status();
  }
  EXPECT_TRUE(client_->describe("odd-purpose").ok()) << client_->describe("odd-purpose").status();
  // And for a shard's name, which the name map of every shard keeps.
  EXPECT_EQ(client_->open_writer("odd \xff name").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(client_->list_shards().ok()) << client_->list_shards().status();
  std::unique_ptr<PersistClient> fresh = open_client();
  EXPECT_TRUE(fresh->describe("odd-purpose").ok()) << fresh->describe("odd-purpose").status();
}

// Issue 15 item 8: a snapshot cursor did not renew its reader's lease while it was read. A read
// longer than the lease let GC expire the reader (and remove the parts the read still needed).
TEST_P(ShardTest, ALongReadRenewsItsLease) {
  std::atomic<int64_t> now_ms{absl::ToUnixMillis(absl::Now())};
  PersistConfig config = small_config();
  config.clock = [&now_ms] { return absl::FromUnixMillis(now_ms.load()); };
  std::unique_ptr<PersistClient> client = open_client(config);
  WriteHandle writer = client->open_writer("long").value();
  std::vector<Update> updates;
  for (int i = 0; i < 10000; ++i) updates.push_back({"row " + std::to_string(i), 0, 1});
  ASSERT_TRUE(writer.compare_and_append(updates, Frontier(0), Frontier(1))->is_appended());
  ReadHandle reader = client->open_reader("long").value();
  SnapshotCursor cursor = reader.snapshot_cursor(0).value();
  // Each row takes 1/4000 of the lease: the whole read two and a half leases.
  const int64_t step = absl::ToInt64Milliseconds(config.reader_lease) / 4000;
  ASSERT_GT(step, 0);
  size_t rows = 0;
  while (cursor.next()) {
    ++rows;
    now_ms += step;
  }
  ASSERT_TRUE(cursor.status().ok()) << cursor.status();
  EXPECT_EQ(rows, 10000u);
  const GcResult gc = client->gc("long").value();
  EXPECT_EQ(gc.expired_readers, 0u) << "the reader's lease ran out while it was read";
  EXPECT_TRUE(reader.snapshot(0).ok());
}

// A backlog of many equal batches (appends that ran ahead of maintenance: a killed process's
// reader held GC back, a slow store) was compacted newest first, each step merging the batches
// it had just merged again with the next few: every update rewritten about n / fan-in times.
// Merging the cheapest batches first rewrites each about log(n) / log(fan-in) times.
TEST_P(ShardTest, ABacklogOfEqualBatchesIsCompactedWithoutRewritingTheSameBytesOverAndOver) {
  PersistConfig config;
  config.compaction_max_runs = 16;
  std::unique_ptr<PersistClient> client = open_client(config);
  WriteHandle writer = client->open_writer("backlog").value();
  constexpr uint64_t kBatches = 512;
  for (uint64_t t = 0; t < kBatches; ++t) {
    std::vector<Update> rows;
    for (int i = 0; i < 20; ++i) {
      rows.push_back({"row " + std::to_string(t) + "." + std::to_string(i), t, 1});
    }
    ASSERT_TRUE(writer.compare_and_append(rows, Frontier(t), Frontier(t + 1))->is_appended());
  }
  uint64_t total = 0;
  const ShardDescription backlog = client->describe("backlog").value();
  for (const auto& batch : backlog.batches) {
    total += batch.update_bytes;
  }
  const CompactionResult result = client->compact("backlog").value();
  ASSERT_TRUE(result.settled);
  const double rewrites = static_cast<double>(result.bytes_merged) / static_cast<double>(total);
  std::printf("%zu merges, each update rewritten %.2f times, %zu batches left\n", result.merges,
              rewrites, result.batches_after);
  // log_16(512) is 2.25: a level of merges per factor of 16, and the geometric layout's last
  // few merges on top.
  EXPECT_LE(rewrites, 4.0) << result.merges << " merges";
  EXPECT_EQ(as_map(client->open_reader("backlog").value().snapshot(kBatches - 1).value()).size(),
            kBatches * 20);
}

// Review of the compaction's choice of batches: batches of random sizes and runs, compacted one
// step at a time (with and without `full`, at the smallest fan-in). Every step must make
// progress (fewer batches, or fewer runs, or a since brought up to date), keep the contents, and
// the compaction must settle.
TEST_P(ShardTest, EveryCompactionStepOfRandomBatchesMakesProgressAndKeepsTheContents) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    PersistConfig config = small_config();
    config.compaction_max_runs = 2 + seed % 3;
    std::unique_ptr<PersistClient> client = open_client(config);
    const std::string name = "steps-" + std::to_string(seed);
    WriteHandle writer = client->open_writer(name).value();
    std::vector<Update> history;
    uint64_t upper = 0;
    for (int b = 0; b < 24; ++b) {
      // Sizes from nothing to many parts; unsorted data makes several runs in a batch.
      const uint64_t count = rng() % 4 == 0 ? rng() % 200 : rng() % 12;
      const uint64_t width = 1 + rng() % 3;
      std::vector<Update> updates;
      for (uint64_t i = 0; i < count; ++i) {
        updates.push_back({"k" + std::to_string(rng() % 300), upper + rng() % width, 1});
      }
      ASSERT_TRUE(writer.compare_and_append(updates, Frontier(upper), Frontier(upper + width))
                      ->is_appended());
      history.insert(history.end(), updates.begin(), updates.end());
      upper += width;
    }
    ReadHandle reader = client->open_reader(name).value();
    ASSERT_TRUE(reader.downgrade_since(Frontier(upper / 2)).ok());
    const auto potential = [&] {
      size_t n = 0;
      const ShardDescription described = client->describe(name).value();
      for (const auto& batch : described.batches) {
        n += 1 + batch.num_runs;
      }
      return n;
    };
    for (const bool full : {false, true}) {
      size_t steps = 0;
      for (;; ++steps) {
        ASSERT_LT(steps, 500u) << "compaction does not settle";
        const size_t before = potential();
        const ShardDescription d = client->describe(name).value();
        const CompactionResult result =
            client->compact(name, {.full = full, .max_steps = 1}).value();
        if (result.settled) break;
        const ShardDescription after = client->describe(name).value();
        bool since_moved = false;
        for (const auto& batch : d.batches) {
          since_moved |= batch.description.since != d.since;
        }
        EXPECT_TRUE(potential() < before || (full && since_moved))
            << "step " << steps << " (full " << full << "): " << before << " -> " << potential();
        for (uint64_t as_of = upper / 2; as_of < upper; as_of += 7) {
          ASSERT_EQ(as_map(reader.snapshot(as_of).value()), testing::consolidate(history, as_of))
              << "step " << steps << " as_of " << as_of;
        }
        ASSERT_EQ(after.upper, Frontier(upper));
      }
    }
    const ShardDescription d = client->describe(name).value();
    ASSERT_EQ(d.batches.size(), 1u + (d.batches.back().num_parts == 0 ? 1u : 0u));
  }
}

TEST_P(ShardTest, GcRemovesCompactedPartsOnceNoReadHoldsThem) {
  WriteHandle writer = client_->open_writer("gc").value();
  for (uint64_t t = 0; t < 6; ++t) {
    std::vector<Update> updates;
    for (int i = 0; i < 30; ++i) {
      updates.push_back({"row " + std::to_string(i) + " of batch " + std::to_string(t), t, 1});
    }
    ASSERT_TRUE(
        writer.compare_and_append(updates, Frontier(t), Frontier(t + 1)).value().is_appended());
  }
  ReadHandle reader = client_->open_reader("gc").value();
  SnapshotCursor cursor = reader.snapshot_cursor(5).value();  // Holds the current version.
  ASSERT_TRUE(client_->compact("gc", {.full = true}).ok());
  auto blob = Blob::open(location_.blob_url).value();
  const std::string prefix = writer.shard_id().str() + "/";
  const size_t before = blob->list_keys(prefix).value().size();
  ASSERT_TRUE(client_->gc("gc").ok());
  EXPECT_EQ(blob->list_keys(prefix).value().size(), before) << "the cursor's parts are held";
  size_t rows = 0;
  while (cursor.next()) {
    ++rows;
  }
  ASSERT_TRUE(cursor.status().ok()) << cursor.status();
  EXPECT_EQ(rows, 180u);
  cursor = reader.snapshot_cursor(5).value();  // Releases the old version.
  ASSERT_TRUE(reader.heartbeat().ok());
  const GcResult gc = client_->gc("gc").value();
  EXPECT_GT(gc.blobs_deleted, 0u);
  EXPECT_GT(gc.versions_truncated, 0u);
  const size_t referenced = parts_in(*client_, "gc");
  EXPECT_EQ(blob->list_keys(prefix).value().size(), referenced);
  rows = 0;
  while (cursor.next()) {
    ++rows;
  }
  ASSERT_TRUE(cursor.status().ok()) << cursor.status();
  EXPECT_EQ(rows, 180u);
}

// A blob store whose removes of the keys in `refused` fail: a part the store will not delete.
class RefusingBlob final : public Blob {
 public:
  explicit RefusingBlob(std::shared_ptr<Blob> inner) : inner_(std::move(inner)) {}
  absl::StatusOr<std::optional<std::string>> get(std::string_view key) override {
    return inner_->get(key);
  }
  absl::Status set(std::string_view key, std::string_view value) override {
    return inner_->set(key, value);
  }
  absl::Status remove(std::string_view key) override {
    if (refused.contains(std::string(key))) {
      return absl::PermissionDeniedError("refused by the test");
    }
    return inner_->remove(key);
  }
  absl::StatusOr<std::vector<BlobMetadata>> list_keys(std::string_view prefix) override {
    return inner_->list_keys(prefix);
  }

  std::set<std::string> refused;

 private:
  std::shared_ptr<Blob> inner_;
};

// Issue 15 item 5: one blob GC could not remove made every run return at that blob, so nothing
// after it was removed and consensus was never truncated (85 versions kept in the review).
TEST_P(ShardTest, GcSkipsABlobItCannotRemoveAndStillTruncates) {
  auto blob = std::make_shared<RefusingBlob>(Blob::open(location_.blob_url).value());
  std::unique_ptr<PersistClient> client =
      PersistClient::create(blob, Consensus::open(location_.consensus_url).value(), small_config());
  std::optional<WriteHandle> writer = client->open_writer("gc").value();
  for (uint64_t t = 0; t < 6; ++t) {
    std::vector<Update> updates;
    for (int i = 0; i < 30; ++i) {
      updates.push_back({"row " + std::to_string(i) + " of batch " + std::to_string(t), t, 1});
    }
    ASSERT_TRUE(
        writer->compare_and_append(updates, Frontier(t), Frontier(t + 1)).value().is_appended());
  }
  const std::string prefix = writer->shard_id().str() + "/";
  const std::vector<BlobMetadata> appended = blob->list_keys(prefix).value();
  ASSERT_GT(appended.size(), 2u);
  blob->refused.insert(appended[0].key);
  ASSERT_TRUE(client->compact("gc", {.full = true}).ok());
  // The appending writer is gone: every part the compaction replaced may be removed.
  ASSERT_TRUE(writer->expire().ok());
  writer.reset();

  const GcResult gc = client->gc("gc").value();
  EXPECT_EQ(gc.blobs_failed, 1u);
  ASSERT_EQ(gc.failures.size(), 1u);
  EXPECT_NE(gc.failures[0].find(appended[0].key), std::string::npos) << gc.failures[0];
  EXPECT_NE(gc.failures[0].find("refused by the test"), std::string::npos) << gc.failures[0];
  // The other appended parts, and the compaction's intermediate runs, are removed.
  EXPECT_GE(gc.blobs_deleted, appended.size() - 1);
  EXPECT_GT(gc.versions_truncated, 0u) << "consensus is truncated all the same";
  const size_t referenced = parts_in(*client, "gc");
  EXPECT_EQ(blob->list_keys(prefix).value().size(), referenced + 1);
  const absl::Status maintained = client->maintain("gc");
  EXPECT_EQ(maintained.code(), absl::StatusCode::kUnavailable) << maintained;
  EXPECT_NE(maintained.message().find(appended[0].key), std::string::npos) << maintained;

  // The next run decodes only what was written since (here: nothing but the head), not the
  // history, and tries the refused blob again: once the store lets it go, it is gone.
  blob->refused.clear();
  const GcResult again = client->gc("gc").value();
  EXPECT_LE(again.versions_scanned, 2u);
  EXPECT_EQ(again.blobs_failed, 0u);
  EXPECT_EQ(again.blobs_deleted, 1u);
  EXPECT_EQ(blob->list_keys(prefix).value().size(), referenced);
  ReadHandle reader = client->open_reader("gc").value();
  EXPECT_EQ(reader.snapshot(5).value().size(), 180u);
}

// Issue 15 soak: at 5 % injected faults `weir ingest` restarted its dataflow for nearly every
// append (one lost consensus reply failed the whole append). compare_and_append now tries again
// itself, on the latest state; the token tells it that the first attempt committed.
TEST_P(ShardTest, AnAppendWhoseReplyIsLostIsTriedAgainAndLandsOnce) {
  auto consensus =
      std::make_shared<testing::LosingConsensus>(Consensus::open(location_.consensus_url).value());
  std::unique_ptr<PersistClient> client =
      PersistClient::create(Blob::open(location_.blob_url).value(), consensus, small_config());
  WriteHandle writer = client->open_writer("lost").value();
  // Per append: nothing; a lost reply; two calls that fail; a call that fails, then a lost reply.
  const std::pair<int, int> faults[] = {{0, 0}, {0, 1}, {2, 0}, {1, 1}};
  for (uint64_t t = 0; t < 4; ++t) {
    BatchBuilder builder = writer.builder(Frontier(t));
    ASSERT_TRUE(builder.add("row " + std::to_string(t), t, 1).ok());
    const Batch batch = builder.finish(Frontier(t + 1)).value();
    consensus->fail_next = faults[t].first;
    consensus->lose_replies = faults[t].second;
    const absl::StatusOr<AppendResult> appended =
        writer.compare_and_append(batch, Frontier(t), Frontier(t + 1));
    ASSERT_TRUE(appended.ok()) << t << ": " << appended.status();
    EXPECT_TRUE(appended->is_appended()) << t;
    EXPECT_EQ(consensus->fail_next.load() + consensus->lose_replies.load(), 0) << t;
  }
  ReadHandle reader = client->open_reader("lost").value();
  const std::vector<Update> rows = reader.snapshot(3).value();
  EXPECT_EQ(rows.size(), 4u);
  for (const Update& row : rows) EXPECT_EQ(row.diff, 1) << row.data;
}

// Issue 15 item 4: an append was recognised as already done only by its first part's key in the
// head state. After "committed, but the reply was lost" and then a compaction (which rewrites
// keys), the retry reported a mismatch; an empty batch (progress only) has no part at all.
TEST_P(ShardTest, ARetryAfterALostReplyIsRecognisedWhateverHappenedSince) {
  auto consensus =
      std::make_shared<testing::LosingConsensus>(Consensus::open(location_.consensus_url).value());
  std::unique_ptr<PersistClient> client =
      PersistClient::create(Blob::open(location_.blob_url).value(), consensus, small_config());
  WriteHandle writer = client->open_writer("retry").value();
  const auto build = [&](uint64_t lower, uint64_t upper, int rows) {
    BatchBuilder builder = writer.builder(Frontier(lower));
    for (int i = 0; i < rows; ++i) {
      EXPECT_TRUE(
          builder.add("row " + std::to_string(i) + " at " + std::to_string(lower), lower, 1).ok());
    }
    return builder.finish(Frontier(upper)).value();
  };
  // The append commits; its reply is lost, and consensus stays down through every retry.
  const auto append_losing_the_reply = [&](const Batch& batch, uint64_t lower, uint64_t upper) {
    consensus->lose_replies = 1;
    consensus->down_after_losing = true;
    const absl::StatusOr<AppendResult> lost =
        writer.compare_and_append(batch, Frontier(lower), Frontier(upper));
    consensus->down_after_losing = false;
    consensus->down = false;
    ASSERT_FALSE(lost.ok());
    EXPECT_TRUE(is_indeterminate(lost.status())) << lost.status();
  };
  ASSERT_TRUE(writer.compare_and_append(build(0, 1, 30), Frontier(0), Frontier(1))->is_appended());

  const Batch second = build(1, 2, 30);
  append_losing_the_reply(second, 1, 2);
  ASSERT_TRUE(client->compact("retry", {.full = true}).ok());
  absl::StatusOr<AppendResult> retry = writer.compare_and_append(second, Frontier(1), Frontier(2));
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_TRUE(retry->is_appended()) << "a retry after compaction was taken for a mismatch";
  // So is a retry from a later incarnation (a new writer, the old one not yet expired).
  WriteHandle restarted = client->open_writer("retry").value();
  retry = restarted.compare_and_append(second, Frontier(1), Frontier(2));
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_TRUE(retry->is_appended());

  const Batch progress = build(2, 3, 0);
  append_losing_the_reply(progress, 2, 3);
  retry = writer.compare_and_append(progress, Frontier(2), Frontier(3));
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_TRUE(retry->is_appended()) << "a retry of an empty batch was taken for a mismatch";

  // Another batch for an interval already written is still refused.
  const Batch late = build(1, 2, 5);
  retry = writer.compare_and_append(late, Frontier(1), Frontier(2));
  ASSERT_TRUE(retry.ok()) << retry.status();
  ASSERT_FALSE(retry->is_appended());
  EXPECT_EQ(retry->mismatch->current, Frontier(3));
  ASSERT_TRUE(writer.discard(late).ok());

  ReadHandle reader = client->open_reader("retry").value();
  const std::vector<Update> rows = reader.snapshot(2).value();
  EXPECT_EQ(rows.size(), 60u) << "each row once";
  for (const Update& row : rows) {
    EXPECT_EQ(row.diff, 1) << row.data;
  }
  // Nothing but a lost reply is indeterminate.
  EXPECT_FALSE(is_indeterminate(absl::UnavailableError("x")));
}

TEST_P(ShardTest, NamesMapToStableIds) {
  WriteHandle a = client_->open_writer("orders").value();
  std::unique_ptr<PersistClient> other = open_client();
  ReadHandle b = other->open_reader("orders").value();
  EXPECT_EQ(a.shard_id(), b.shard_id());
  ASSERT_TRUE(client_->open_writer("customers").ok());
  const std::vector<ShardName> shards = other->list_shards().value();
  ASSERT_EQ(shards.size(), 2u);
  EXPECT_EQ(shards[0].name, "customers");
  EXPECT_EQ(shards[1].name, "orders");
  EXPECT_EQ(shards[1].id, a.shard_id());
  EXPECT_EQ(client_->describe("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->open_writer("").status().code(), absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Stores, ShardTest, ::testing::Values("mem", "sqlite"));
INSTANTIATE_TEST_SUITE_P(Postgres, ShardTest, ::testing::Values("postgres"));

}  // namespace
}  // namespace weir::persist
