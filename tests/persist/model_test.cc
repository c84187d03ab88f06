// The model-checked persist test (Maelstrom-style): concurrent writers, readers, a critical since
// holder and maintenance (compaction, GC, background maintenance) run a seeded random schedule
// against one shard whose Blob and Consensus fail 10 % of their calls and lose the reply of 5 % of
// their writes (FaultyBlob, FaultyConsensus). A model records exactly what committed, in upper
// order; afterwards every read is checked against it:
//   - every snapshot at as_of equals the model consolidated at as_of (no duplicate, no loss);
//   - every listen from as_of yields exactly the model's updates between as_of and its frontier;
//   - appends commit at most once each, their uppers chain from 0 to the final upper;
//   - no read, compaction or GC ever finds a part missing or corrupt (NotFound, DataLoss);
//   - a definite failure left no trace (the writer discards the batch's parts at once: had it been
//     appended, the reads would miss them), and once everyone is gone GC leaves exactly the parts
//     the shard references and one consensus version.
//
// Environment (see docs/persist.md, "How persist is tested"):
//   WEIR_MODEL_SEED=S        run only seed S (to replay a failure; the schedule is seeded, the
//                            interleaving of threads is not, so a replay is likely, not certain,
//                            to fail again: run it a few times)
//   WEIR_MODEL_SEEDS=N       run N seeds (default 10 in memory, 2 on files + SQLite)
//   WEIR_MODEL_FIRST_SEED=F  start at seed F (default 1)
//   WEIR_MODEL_APPENDS=A     operations per writer thread and seed (default 300 in memory, 120
//                            on files + SQLite; most are appends)

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "persist_test_util.h"
#include "test_stores.h"

#include "weir/persist/background_maintenance.h"
#include "weir/persist/client.h"
#include "weir/persist/faults.h"

namespace weir::persist {
namespace {

using Contents = std::map<std::string, int64_t>;                      // data -> diff
using Updates = std::map<std::pair<std::string, uint64_t>, int64_t>;  // (data, time) -> diff

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::strtoull(value, nullptr, 10) : fallback;
}

const absl::Status& status_of(const absl::Status& status) { return status; }
template <class T>
const absl::Status& status_of(const absl::StatusOr<T>& result) {
  return result.status();
}

// A failure the stores may cause (every injected fault is Unavailable): try again.
bool is_transient(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable;
}

// Maintenance of a shard no writer has created yet.
bool is_before_the_shard(const absl::Status& status) {
  return status.code() == absl::StatusCode::kNotFound &&
         status.message().find("no shard named") != std::string_view::npos;
}

// Calls `op` until it returns anything but a transient error (at most kMaxTries times).
constexpr int kMaxTries = 200;
template <class Op>
auto retry(Op op) -> decltype(op()) {
  for (int tries = 1;; ++tries) {
    auto result = op();
    if (!is_transient(status_of(result)) || tries >= kMaxTries) {
      return result;
    }
  }
}

// The clock of the clients: real time plus an offset the test moves to expire every lease at the
// end.
struct TestClock {
  std::atomic<int64_t> offset_ms{0};
  absl::Time now() const { return absl::Now() + absl::Milliseconds(offset_ms.load()); }
};

struct Options {
  uint64_t seed = 1;
  std::string store = "mem";  // "mem" or "sqlite" (a file blob and a SQLite consensus)
  int writers = 3;
  int readers = 2;
  int maintainers = 2;
  uint64_t appends_per_writer = 150;
  FaultConfig blob_faults;
  FaultConfig consensus_faults;
};

// What committed, by lower. Appends happen at the upper, so the batches chain.
class Model {
 public:
  struct Committed {
    uint64_t upper = 0;
    std::vector<Update> updates;
    std::string writer;
  };

  // False if a batch already committed at `lower` (an append counted twice).
  bool record(uint64_t lower, Committed committed) {
    std::lock_guard lock(mu_);
    return batches_.emplace(lower, std::move(committed)).second;
  }

  // Only once the threads have stopped.
  const std::map<uint64_t, Committed>& batches() const { return batches_; }

  uint64_t upper() const { return batches_.empty() ? 0 : batches_.rbegin()->second.upper; }

  // Consolidated at `as_of`: every update at a time <= as_of, summed per data, zeros left out.
  Contents at(uint64_t as_of) const {
    Contents sums;
    for (const auto& [lower, batch] : batches_) {
      if (lower > as_of) {
        break;
      }
      for (const Update& update : batch.updates) {
        if (update.time <= as_of) {
          sums[update.data] += update.diff;
        }
      }
    }
    std::erase_if(sums, [](const auto& entry) { return entry.second == 0; });
    return sums;
  }

  // The updates at times in (after, before), summed per (data, time), zeros left out.
  Updates between(uint64_t after, uint64_t before) const {
    Updates sums;
    for (const auto& [lower, batch] : batches_) {
      if (lower >= before) {
        break;
      }
      for (const Update& update : batch.updates) {
        if (update.time > after && update.time < before) {
          sums[{update.data, update.time}] += update.diff;
        }
      }
    }
    std::erase_if(sums, [](const auto& entry) { return entry.second == 0; });
    return sums;
  }

 private:
  std::mutex mu_;
  std::map<uint64_t, Committed> batches_;
};

struct SnapshotRead {
  std::string who;
  uint64_t as_of = 0;
  Contents contents;
};

struct ListenRead {
  std::string who;
  uint64_t as_of = 0;
  uint64_t frontier = 0;  // Everything before it was yielded.
  Updates updates;
};

struct Stats {
  std::atomic<uint64_t> operations{0};
  std::atomic<uint64_t> appended{0};
  std::atomic<uint64_t> empty_appended{0};
  std::atomic<uint64_t> mismatches{0};
  std::atomic<uint64_t> indeterminate_appends{0};
  std::atomic<uint64_t> abandoned_appends{0};  // Definite failure: discarded.
  std::atomic<uint64_t> snapshots{0};
  std::atomic<uint64_t> failed_reads{0};  // Attempts that met a fault (and were retried).
  std::atomic<uint64_t> listens{0};
  std::atomic<uint64_t> listen_events{0};
  std::atomic<uint64_t> since_downgrades{0};
  std::atomic<uint64_t> fenced{0};
  std::atomic<uint64_t> zombie_appended{0};  // Appends of the writer whose lease always lapsed.
  std::atomic<uint64_t> zombie_refused{0};   // ... refused as expired.
  std::atomic<uint64_t> zombie_unknown{0};   // ... refused as expired after a lost reply.
  std::atomic<uint64_t> writer_fences{0};    // Incarnations of the fencer that took over.
  std::atomic<uint64_t> fenced_refused{0};   // Its builds, appends, reads, compactions refused.
  std::atomic<uint64_t> fenced_unknown{0};   // ... appends fenced out after a lost reply.
  std::atomic<uint64_t> compactions{0};
  std::atomic<uint64_t> compaction_merges{0};  // Of the compactions that succeeded.
  std::atomic<uint64_t> gcs{0};
  std::atomic<uint64_t> transient_errors{0};
};

class ModelRun {
 public:
  explicit ModelRun(Options options) : options_(std::move(options)) {}

  // Runs the schedule and checks it; returns the failures (empty: passed).
  std::vector<std::string> run();
  std::string summary() const;

 private:
  void fail(std::string what) {
    std::lock_guard lock(mu_);
    if (failures_.size() < 20) {
      failures_.push_back(std::move(what));
    }
    stop_ = true;
  }
  // An error that only a fault may cause is fine; anything else fails the run.
  bool tolerate(const absl::Status& status, const std::string& what) {
    if (status.ok()) {
      return true;
    }
    if (is_transient(status)) {
      ++stats_.transient_errors;
      return true;
    }
    fail(what + ": " + status.ToString());
    return false;
  }

  void writer_thread(int index);
  // Builds a batch with `writer` and appends it with `writer` or `other` (a try at random).
  void append_one(WriteHandle& writer, WriteHandle& other, std::mt19937_64& rng,
                  const std::string& who);
  void reader_thread(int index);
  void snapshot_one(ReadHandle& reader, uint64_t as_of, const std::string& who);
  void listen_one(ReadHandle& reader, uint64_t as_of, std::mt19937_64& rng, const std::string& who);
  void since_thread();
  // A writer whose clock is an hour behind: GC expires it at once, and its appends are refused
  // from then on; it also leaves batches it never appends, as a crashed writer would.
  void zombie_thread();
  // Incarnations of a process that take the shard over from each other with rising fence epochs
  // (fence.h). The fenced-out one goes on as a stopped process that resumes would: it retries an
  // append whose reply it lost just before the fence, appends new batches, reads and compacts with
  // its old fence. All of it must be refused, and it follows the docs: it retries an
  // indeterminate append with the same batch and discards a batch refused definitely.
  void fencing_thread();
  void maintenance_thread(int index);
  // After the threads: the final contents, every recorded read, and what GC leaves.
  void check();
  // Adds to the model each zombie append of unknown outcome that the final contents hold.
  void resolve_unknown();
  void check_leftovers();

  std::mt19937_64 rng_for(uint64_t stream) const {
    return std::mt19937_64(options_.seed * 1'000'003 + stream);
  }
  uint64_t recent_upper(std::mt19937_64& rng);

  const Options options_;
  const std::string shard_ = "model";
  std::shared_ptr<TestClock> clock_ = std::make_shared<TestClock>();
  std::shared_ptr<Blob> inner_blob_;
  std::shared_ptr<Consensus> inner_consensus_;
  std::shared_ptr<FaultyBlob> blob_;
  std::shared_ptr<FaultyConsensus> consensus_;
  std::shared_ptr<PersistClient> client_;
  std::unique_ptr<BackgroundMaintenance> background_;
  ShardId shard_id_;

  Model model_;
  Stats stats_;
  std::atomic<int> writers_running_{0};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> upper_hint_{0};  // The largest upper any thread has seen.
  std::mutex mu_;
  std::vector<std::string> failures_;
  std::vector<SnapshotRead> snapshots_;
  std::vector<ListenRead> listens_;
  // Appends of the zombie whose outcome the writer could not learn (a lost reply, then refused
  // as expired): the final contents tell, as each has a data of its own.
  std::vector<std::pair<uint64_t, Model::Committed>> unknown_;
  double seconds_ = 0;
  size_t final_batches_ = 0;
  size_t final_parts_ = 0;
  size_t leaked_ = 0;  // Registrations of compactions left behind.
};

PersistConfig model_config(std::shared_ptr<TestClock> clock) {
  PersistConfig config;
  // Small parts and merges: batches of several parts and runs, compactions of several steps.
  config.part_target_bytes = 400;
  config.compaction_max_runs = 6;
  config.io_threads = 2;
  config.maintenance_batch_threshold = 8;
  config.maintenance_seqno_interval = 32;
  config.clock = [clock] { return clock->now(); };
  return config;
}

std::vector<std::string> ModelRun::run() {
  const auto start = std::chrono::steady_clock::now();
  const PersistLocation location = testing::fresh_location(options_.store);
  inner_blob_ = Blob::open(location.blob_url).value();
  inner_consensus_ = Consensus::open(location.consensus_url).value();
  blob_ = std::make_shared<FaultyBlob>(inner_blob_, options_.blob_faults);
  consensus_ = std::make_shared<FaultyConsensus>(inner_consensus_, options_.consensus_faults);
  client_ = PersistClient::create(blob_, consensus_, model_config(clock_));
  background_ = std::make_unique<BackgroundMaintenance>(
      client_, [this](const absl::Status& s) { tolerate(s, "background maintenance"); });

  std::vector<std::thread> threads;
  writers_running_ = options_.writers;
  for (int i = 0; i < options_.writers; ++i) {
    threads.emplace_back([this, i] { writer_thread(i); });
  }
  for (int i = 0; i < options_.readers; ++i) {
    threads.emplace_back([this, i] { reader_thread(i); });
  }
  threads.emplace_back([this] { since_thread(); });
  threads.emplace_back([this] { zombie_thread(); });
  threads.emplace_back([this] { fencing_thread(); });
  for (int i = 0; i < options_.maintainers; ++i) {
    threads.emplace_back([this, i] { maintenance_thread(i); });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  background_->finish();
  background_.reset();
  if (failures_.empty()) {
    check();
  }
  seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return failures_;
}

uint64_t ModelRun::recent_upper(std::mt19937_64& rng) {
  // Mostly the latest upper; sometimes a stale one, which exercises the refusals.
  if (rng() % 8 == 0) {
    return upper_hint_.load();
  }
  absl::StatusOr<ShardDescription> description = retry([&] { return client_->describe(shard_); });
  if (!description.ok()) {
    tolerate(description.status(), "describe");
    return upper_hint_.load();
  }
  const uint64_t upper = description->upper.time();
  uint64_t seen = upper_hint_.load();
  while (seen < upper && !upper_hint_.compare_exchange_weak(seen, upper)) {
  }
  return upper;
}

void ModelRun::writer_thread(int index) {
  const std::string who = "writer " + std::to_string(index);
  std::mt19937_64 rng = rng_for(100 + static_cast<uint64_t>(index));
  const auto open = [&]() -> std::optional<WriteHandle> {
    absl::StatusOr<WriteHandle> writer = retry([&] { return client_->open_writer(shard_, who); });
    if (!writer.ok()) {
      tolerate(writer.status(), who + ": open");
      return std::nullopt;
    }
    return *std::move(writer);
  };
  // Two handles: the batches one builds are sometimes appended (or their appends retried) by the
  // other, as a batch built by one worker is appended by another, or by a later incarnation.
  std::optional<WriteHandle> writer = open();
  std::optional<WriteHandle> peer = open();
  if (writer) {
    std::lock_guard lock(mu_);
    if (shard_id_.str().empty()) {
      shard_id_ = writer->shard_id();
    }
  }
  for (uint64_t op = 0; writer && peer && op < options_.appends_per_writer && !stop_; ++op) {
    ++stats_.operations;
    const uint64_t r = rng() % 100;
    std::optional<WriteHandle>& handle = rng() % 2 == 0 ? writer : peer;
    if (r < 3) {
      // A new incarnation: this one deregisters (retried until known), a new one registers.
      absl::Status expired = retry([&] { return handle->expire(); });
      tolerate(expired, who + ": expire");
      handle = open();
    } else if (r < 6) {
      tolerate(retry([&] { return handle->heartbeat(); }), who + ": heartbeat");
    } else {
      append_one(*handle, &handle == &writer ? *peer : *writer, rng, who);
    }
  }
  --writers_running_;
}

void ModelRun::append_one(WriteHandle& writer, WriteHandle& other, std::mt19937_64& rng,
                          const std::string& who) {
  const uint64_t lower = recent_upper(rng);
  const uint64_t width = 1 + rng() % 4;
  const uint64_t upper = lower + width;
  std::vector<Update> updates;
  const uint64_t count = rng() % 10 == 0 ? 0 : rng() % 12;
  for (uint64_t i = 0; i < count; ++i) {
    const int64_t size = rng() % 5 == 0 ? 2 : 1;
    updates.push_back({"key-" + std::to_string(rng() % 24), lower + rng() % width,
                       rng() % 3 == 0 ? -size : size});
  }
  // Build; a failed build removes what it uploaded (and, if it cannot, GC does once the writer
  // is gone).
  absl::StatusOr<Batch> batch = retry([&]() -> absl::StatusOr<Batch> {
    BatchBuilder builder = writer.builder(Frontier(lower));
    for (const Update& update : updates) {
      absl::Status added = builder.add(update.data, update.time, update.diff);
      if (!added.ok()) {
        builder.discard().IgnoreError();
        return added;
      }
    }
    return builder.finish(Frontier(upper));
  });
  if (!batch.ok()) {
    tolerate(batch.status(), who + ": build");
    return;
  }
  if (rng() % 4 == 0) {
    // Transmitted: the append works on what decode gives back.
    absl::StatusOr<Batch> decoded = Batch::decode(batch->encode());
    if (!decoded.ok()) {
      fail(who + ": decode: " + decoded.status().ToString());
      return;
    }
    batch = *std::move(decoded);
  }
  bool maybe_committed = false;
  for (int attempt = 0; attempt < 1000 && !stop_; ++attempt) {
    WriteHandle& appender = rng() % 4 == 0 ? other : writer;
    absl::StatusOr<AppendResult> result =
        appender.compare_and_append(*batch, Frontier(lower), Frontier(upper));
    if (result.ok()) {
      if (!result->is_appended()) {
        ++stats_.mismatches;
        if (result->mismatch->current == Frontier(lower)) {
          fail(who + ": mismatch at [" + std::to_string(lower) + ", " + std::to_string(upper) +
               ") reports the expected upper as current");
        }
        // Nothing of ours is in the shard: its parts go now. Had it been appended after all, a
        // later read would find them missing.
        writer.discard(*batch).IgnoreError();
        return;
      }
      ++stats_.appended;
      if (updates.empty()) {
        ++stats_.empty_appended;
      }
      if (!model_.record(lower, {upper, updates, who})) {
        fail(who + ": a second batch committed at lower " + std::to_string(lower));
      }
      uint64_t seen = upper_hint_.load();
      while (seen < upper && !upper_hint_.compare_exchange_weak(seen, upper)) {
      }
      if (result->maintenance_due && rng() % 2 == 0) {
        background_->request(shard_);
      }
      return;
    }
    if (is_indeterminate(result.status())) {
      ++stats_.indeterminate_appends;
      maybe_committed = true;  // Retry with the same batch: the token tells.
      continue;
    }
    if (!is_transient(result.status())) {
      fail(who + ": append [" + std::to_string(lower) + ", " + std::to_string(upper) +
           "): " + result.status().ToString());
      return;
    }
    ++stats_.transient_errors;
    if (!maybe_committed && rng() % 2 == 0) {
      // A definite failure: nothing was written. Give up on the batch and remove its parts.
      ++stats_.abandoned_appends;
      writer.discard(*batch).IgnoreError();
      return;
    }
  }
  if (!stop_) {
    fail(who + ": the append at " + std::to_string(lower) + " did not settle");
  }
}

void ModelRun::reader_thread(int index) {
  const std::string who = "reader " + std::to_string(index);
  std::mt19937_64 rng = rng_for(200 + static_cast<uint64_t>(index));
  const auto open = [&]() -> std::optional<ReadHandle> {
    absl::StatusOr<ReadHandle> reader = retry([&] { return client_->open_reader(shard_, who); });
    if (!reader.ok()) {
      tolerate(reader.status(), who + ": open");
      return std::nullopt;
    }
    return *std::move(reader);
  };
  std::optional<ReadHandle> reader = open();
  while (reader && writers_running_ > 0 && !stop_) {
    ++stats_.operations;
    const uint64_t upper = recent_upper(rng);
    const uint64_t since = reader->since().time();
    const uint64_t r = rng() % 100;
    if (r < 88 && upper <= since) {
      continue;  // Nothing readable yet.
    }
    const uint64_t as_of = upper <= since ? since : since + rng() % (upper - since);
    if (r < 50) {
      snapshot_one(*reader, as_of, who);
    } else if (r < 75) {
      listen_one(*reader, as_of, rng, who);
    } else if (r < 88) {
      // Let go of older times, keeping some readable: retried until known, or the handle's
      // since would lag the hold and a read below the real one would be refused.
      // Mostly close behind the upper, so that compaction can consolidate.
      const uint64_t target = rng() % 4 == 0 || upper < since + 4 ? as_of : upper - 1 - rng() % 3;
      tolerate(retry([&] { return reader->downgrade_since(Frontier(target)); }),
               who + ": downgrade_since");
      ++stats_.since_downgrades;
    } else if (r < 96) {
      tolerate(retry([&] { return reader->heartbeat(); }), who + ": heartbeat");
    } else {
      tolerate(retry([&] { return reader->expire(); }), who + ": expire");
      reader = open();
    }
  }
}

void ModelRun::snapshot_one(ReadHandle& reader, uint64_t as_of, const std::string& who) {
  const std::string what = who + ": snapshot at " + std::to_string(as_of);
  // A snapshot reads many parts, each of which may fail: retry (the hold keeps as_of readable).
  absl::StatusOr<std::vector<Update>> snapshot = retry([&] {
    absl::StatusOr<std::vector<Update>> attempt = reader.snapshot(as_of);
    stats_.failed_reads += attempt.ok() ? 0 : 1;
    return attempt;
  });
  if (!snapshot.ok()) {
    tolerate(snapshot.status(), what);
    return;
  }
  ++stats_.snapshots;
  SnapshotRead read{who, as_of, {}};
  for (size_t i = 0; i < snapshot->size(); ++i) {
    const Update& update = (*snapshot)[i];
    if (update.time != as_of || update.diff == 0 ||
        (i > 0 && !((*snapshot)[i - 1].data < update.data))) {
      fail(what + ": not consolidated in data order at \"" + update.data + "\" time " +
           std::to_string(update.time) + " diff " + std::to_string(update.diff));
      return;
    }
    read.contents[update.data] = update.diff;
  }
  std::lock_guard lock(mu_);
  snapshots_.push_back(std::move(read));
}

void ModelRun::listen_one(ReadHandle& reader, uint64_t as_of, std::mt19937_64& rng,
                          const std::string& who) {
  const std::string what = who + ": listen from " + std::to_string(as_of);
  absl::StatusOr<Listen> listen = retry([&] { return reader.listen(as_of); });
  if (!listen.ok()) {
    tolerate(listen.status(), what);
    return;
  }
  ++stats_.listens;
  ListenRead read{who, as_of, as_of + 1, {}};
  const uint64_t steps = 1 + rng() % 40;
  // An event holds one part; a batch is done once the progress moves past it. Stop only between
  // batches (or when nothing new comes), so that the updates read are those of whole batches.
  bool mid_batch = false;
  for (uint64_t step = 0, idle = 0;
       (step < steps || (mid_batch && step < steps + 1000)) && idle < 2 && !stop_; ++step) {
    absl::StatusOr<std::optional<ListenEvent>> event = listen->next();
    if (!event.ok()) {
      if (!tolerate(event.status(), what)) {
        return;
      }
      continue;  // The listen stays where it was.
    }
    if (!*event) {
      ++idle;
      continue;
    }
    ++stats_.listen_events;
    for (const Update& update : (*event)->updates) {
      if (update.time < read.frontier) {
        fail(what + ": \"" + update.data + "\" at " + std::to_string(update.time) +
             " is before the frontier " + std::to_string(read.frontier) + " already passed");
        return;
      }
      read.updates[{update.data, update.time}] += update.diff;
    }
    if ((*event)->progress.is_empty() || (*event)->progress.time() < read.frontier) {
      fail(what + ": progress went back to " + (*event)->progress.to_string());
      return;
    }
    mid_batch = (*event)->progress.time() == read.frontier;
    if (mid_batch) {
      continue;  // Another part of the same batch follows.
    }
    read.frontier = (*event)->progress.time();
    for (const auto& [key, diff] : read.updates) {
      if (key.second >= read.frontier) {
        fail(what + ": \"" + key.first + "\" at " + std::to_string(key.second) +
             " is not before the progress " + std::to_string(read.frontier));
        return;
      }
    }
  }
  if (mid_batch) {
    return;  // A batch left half read (nothing new came): nothing to compare.
  }
  std::erase_if(read.updates, [](const auto& entry) { return entry.second == 0; });
  std::lock_guard lock(mu_);
  listens_.push_back(std::move(read));
}

void ModelRun::since_thread() {
  const std::string who = "since holder";
  std::mt19937_64 rng = rng_for(300);
  const CriticalReaderId id = CriticalReaderId::random();
  const auto open = [&]() -> std::optional<SinceHandle> {
    absl::StatusOr<SinceHandle> hold =
        retry([&] { return client_->open_critical_since(shard_, id, who); });
    if (!hold.ok()) {
      tolerate(hold.status(), who + ": open");
      return std::nullopt;
    }
    return *std::move(hold);
  };
  std::optional<SinceHandle> hold = open();
  if (!hold) {
    return;
  }
  uint64_t epoch = hold->epoch();
  // Moves the hold to `since` with `new_epoch`, retrying until the outcome is known; false if
  // fenced.
  const auto downgrade = [&](SinceHandle& handle, uint64_t expected, uint64_t new_epoch,
                             uint64_t since) {
    bool maybe_committed = false;
    for (int attempt = 0; attempt < kMaxTries && !stop_; ++attempt) {
      absl::StatusOr<SinceResult> result =
          handle.compare_and_downgrade_since(expected, new_epoch, Frontier(since));
      if (result.ok()) {
        if (!result->mismatch) {
          return true;
        }
        if (maybe_committed && result->mismatch->current == new_epoch) {
          expected = new_epoch;  // The lost one went through; finish the downgrade.
          continue;
        }
        return false;
      }
      maybe_committed = maybe_committed || is_indeterminate(result.status());
      if (!tolerate(result.status(), who + ": downgrade")) {
        return false;
      }
    }
    return false;
  };
  while (writers_running_ > 0 && !stop_) {
    ++stats_.operations;
    const uint64_t upper = recent_upper(rng);
    // Lag the upper by a small window, as a writer's compaction window does.
    const uint64_t target = upper > 6 ? upper - rng() % 6 : 0;
    const uint64_t r = rng() % 100;
    if (r < 90) {
      const uint64_t new_epoch = r < 10 ? epoch + 1 : epoch;
      if (!downgrade(*hold, epoch, new_epoch, target)) {
        if (!stop_) {
          fail(who + ": fenced at epoch " + std::to_string(epoch) + " with no other incarnation");
        }
        return;
      }
      epoch = new_epoch;
      ++stats_.since_downgrades;
    } else {
      // A new incarnation takes over the hold (its epoch fences the old one).
      std::optional<SinceHandle> successor = open();
      if (!successor) {
        return;
      }
      const uint64_t taken = successor->epoch();
      if (!downgrade(*successor, taken, taken + 1, target)) {
        if (!stop_) {
          fail(who + ": a new incarnation was fenced at epoch " + std::to_string(taken));
        }
        return;
      }
      if (downgrade(*hold, epoch, epoch, target)) {
        fail(who + ": the old incarnation (epoch " + std::to_string(epoch) +
             ") moved the hold after a new one took epoch " + std::to_string(taken + 1));
        return;
      }
      ++stats_.fenced;
      hold = std::move(successor);
      epoch = taken + 1;
    }
  }
  // Let go of the hold, so that the end's GC sees no holder.
  absl::StatusOr<std::optional<EpochMismatch>> expired = retry([&] { return hold->expire(epoch); });
  if (tolerate(status_of(expired), who + ": expire") && expired.ok() && expired->has_value()) {
    fail(who + ": expire refused at epoch " + std::to_string(epoch));
  }
}

void ModelRun::zombie_thread() {
  const std::string who = "zombie";
  std::mt19937_64 rng = rng_for(500);
  PersistConfig config = model_config(clock_);
  config.clock = [] { return absl::Now() - absl::Hours(1); };
  std::shared_ptr<PersistClient> client = PersistClient::create(blob_, consensus_, config);
  uint64_t next_key = 0;
  while (writers_running_ > 0 && !stop_) {
    ++stats_.operations;
    absl::StatusOr<WriteHandle> writer = retry([&] { return client->open_writer(shard_, who); });
    if (!writer.ok()) {
      tolerate(writer.status(), who + ": open");
      return;
    }
    for (int op = 0; op < 3 && writers_running_ > 0 && !stop_; ++op) {
      ++stats_.operations;
      const uint64_t lower = recent_upper(rng);
      const uint64_t upper = lower + 1 + rng() % 2;
      const std::vector<Update> updates = {{"zombie-" + std::to_string(next_key++), lower, 1}};
      BatchBuilder builder = writer->builder(Frontier(lower));
      absl::StatusOr<Batch> batch =
          builder.add(updates[0].data, lower, 1).ok()
              ? builder.finish(Frontier(upper))
              : absl::StatusOr<Batch>(absl::UnavailableError("add failed"));
      if (!batch.ok()) {
        // Any error: once GC has expired the zombie, it also removes what the zombie is still
        // writing (a file blob's temporary file, whose rename then fails with NotFound).
        continue;
      }
      if (rng() % 4 == 0) {
        continue;  // Left behind, as by a crash: GC removes its parts once the zombie is gone.
      }
      bool maybe_committed = false;
      for (int attempt = 0; attempt < kMaxTries && !stop_; ++attempt) {
        absl::StatusOr<AppendResult> result =
            writer->compare_and_append(*batch, Frontier(lower), Frontier(upper));
        if (result.ok()) {
          if (result->is_appended()) {
            ++stats_.zombie_appended;
            if (!model_.record(lower, {upper, updates, who})) {
              fail(who + ": a second batch committed at lower " + std::to_string(lower));
            }
          } else {
            writer->discard(*batch).IgnoreError();
          }
          break;
        }
        if (result.status().code() == absl::StatusCode::kFailedPrecondition ||
            is_writer_expired(result.status())) {
          // Expired by GC. Nothing was appended by this try; an earlier one may have been (then
          // the append also says so: is_indeterminate).
          if (maybe_committed || is_indeterminate(result.status())) {
            ++stats_.zombie_unknown;
            std::lock_guard lock(mu_);
            unknown_.push_back({lower, {upper, updates, who}});
          } else {
            ++stats_.zombie_refused;
            writer->discard(*batch).IgnoreError();
          }
          break;
        }
        maybe_committed = maybe_committed || is_indeterminate(result.status());
        if (!tolerate(result.status(), who + ": append")) {
          return;
        }
      }
    }
  }
}

void ModelRun::fencing_thread() {
  const std::string who = "fencer";
  std::mt19937_64 rng = rng_for(600);
  // Its own client, whose consensus can lose an append's reply and then stay down for the rest of
  // the call: the append's outcome is unknown when the next incarnation fences it out.
  auto losing = std::make_shared<testing::LosingConsensus>(consensus_);
  std::shared_ptr<PersistClient> client =
      PersistClient::create(blob_, losing, model_config(clock_));
  struct Pending {
    uint64_t lower = 0;
    uint64_t upper = 0;
    std::vector<Update> updates;
    Batch batch;
  };
  enum class Outcome { kDone, kUnknown };
  uint64_t next_key = 0;
  const auto build = [&](WriteHandle& writer, bool fenced_out) -> std::optional<Pending> {
    Pending p;
    p.lower = recent_upper(rng);
    p.upper = p.lower + 1 + rng() % 2;
    p.updates = {{"fencer-" + std::to_string(next_key++), p.lower, 1}};
    absl::StatusOr<Batch> batch = retry([&]() -> absl::StatusOr<Batch> {
      BatchBuilder builder = writer.builder(Frontier(p.lower));
      absl::Status added = builder.add(p.updates[0].data, p.lower, 1);
      if (!added.ok()) {
        builder.discard().IgnoreError();
        return added;
      }
      return builder.finish(Frontier(p.upper));
    });
    if (!batch.ok()) {
      // Once a successor has removed the fenced-out writer, GC removes what it is still writing
      // too, as the zombie's (a file blob's temporary file, whose rename then fails NotFound).
      if (fenced_out && absl::IsNotFound(batch.status())) {
        ++stats_.fenced_refused;
      } else {
        tolerate(batch.status(), who + ": build");
      }
      return std::nullopt;
    }
    p.batch = *std::move(batch);
    return p;
  };
  // Appends until the outcome is known (or, with `may_pause`, stops after a lost reply, as a
  // process stopped there would).
  const auto append = [&](WriteHandle& writer, const Pending& p, bool fenced_out,
                          bool may_pause) -> Outcome {
    const std::string what =
        who + (fenced_out ? " (fenced out)" : "") + ": append at " + std::to_string(p.lower);
    for (int attempt = 0; attempt < kMaxTries && !stop_; ++attempt) {
      const bool pause = may_pause && rng() % 3 == 0;
      if (pause) {
        losing->lose_replies = 1;
        losing->down_after_losing = true;
      }
      absl::StatusOr<AppendResult> result =
          writer.compare_and_append(p.batch, Frontier(p.lower), Frontier(p.upper));
      losing->lose_replies = 0;
      losing->down = false;
      if (result.ok()) {
        if (fenced_out) {
          fail(what + ": not refused (" + (result->is_appended() ? "appended" : "a mismatch") +
               ")");
          return Outcome::kDone;
        }
        if (!result->is_appended()) {
          ++stats_.mismatches;
          writer.discard(p.batch).IgnoreError();
          return Outcome::kDone;
        }
        ++stats_.appended;
        if (!model_.record(p.lower, {p.upper, p.updates, who})) {
          fail(who + ": a second batch committed at lower " + std::to_string(p.lower));
        }
        uint64_t seen = upper_hint_.load();
        while (seen < p.upper && !upper_hint_.compare_exchange_weak(seen, p.upper)) {
        }
        return Outcome::kDone;
      }
      const absl::Status& status = result.status();
      if (is_fenced(status) && !fenced_out) {
        fail(what + ": the current incarnation is fenced: " + status.ToString());
        return Outcome::kDone;
      }
      if (is_indeterminate(status)) {
        ++stats_.indeterminate_appends;
        if (is_fenced(status) || pause) {
          return Outcome::kUnknown;  // Retry no more: its parts stay, GC decides.
        }
        continue;
      }
      if (is_fenced(status)) {
        // Definite: nothing of this batch is in the shard, so its parts go (had it been
        // appended, reads would find them missing).
        ++stats_.fenced_refused;
        writer.discard(p.batch).IgnoreError();
        return Outcome::kDone;
      }
      if (!tolerate(status, what)) {
        return Outcome::kDone;
      }
    }
    return Outcome::kUnknown;
  };
  const auto unknown = [&](Pending p) {
    ++stats_.fenced_unknown;
    std::lock_guard lock(mu_);
    unknown_.push_back({p.lower, {p.upper, std::move(p.updates), who}});
  };

  std::optional<WriteHandle> stale;  // The previous incarnation's writer.
  std::optional<ReadHandle> stale_reader;
  std::optional<Pending> unresolved;  // Its append whose outcome it did not learn.
  for (uint64_t epoch = 1; writers_running_ > 0 && !stop_; ++epoch) {
    ++stats_.operations;
    const Fence fence{epoch, "fencer incarnation " + std::to_string(epoch)};
    absl::StatusOr<WriteHandle> current =
        retry([&] { return client->open_writer(shard_, who, fence); });
    absl::StatusOr<ReadHandle> reader =
        current.ok() ? retry([&] { return client->open_reader(shard_, who + " plan", fence); })
                     : current.status();
    if (!current.ok() || !reader.ok()) {
      tolerate(current.ok() ? reader.status() : current.status(), who + ": open");
      return;
    }
    ++stats_.writer_fences;
    // The previous incarnation resumes.
    if (stale) {
      if (std::optional<Pending> last = std::exchange(unresolved, std::nullopt);
          last && append(*stale, *last, true, false) == Outcome::kUnknown) {
        unknown(*std::move(last));
      }
      if (std::optional<Pending> p = build(*stale, true); p) {
        if (append(*stale, *p, true, false) == Outcome::kUnknown) {
          unknown(*std::move(p));
        }
      }
      const auto refused = [&](const absl::Status& status, const std::string& what) {
        if (is_fenced(status)) {
          ++stats_.fenced_refused;
        } else if (status.ok() || !is_transient(status)) {
          fail(absl::StrCat(who, " (fenced out): ", what, " not refused: ", status.ToString()));
        }
      };
      refused(status_of(stale_reader->snapshot(stale_reader->since().time())), "a snapshot");
      refused(stale->heartbeat(), "a heartbeat");
      refused(status_of(client->compact(
                  shard_, {.max_steps = 2, .fence = {epoch - 1, "fencer, fenced out"}})),
              "a compaction");
    }
    for (int op = 0; op < 4 && writers_running_ > 0 && !stop_; ++op) {
      ++stats_.operations;
      std::optional<Pending> p = build(*current, false);
      if (p && append(*current, *p, false, true) == Outcome::kUnknown) {
        unresolved = std::move(p);
        break;  // Stopped here; the next incarnation takes over.
      }
    }
    stale = *std::move(current);
    stale_reader = *std::move(reader);
  }
  if (unresolved) {
    unknown(*std::move(unresolved));
  }
}

void ModelRun::resolve_unknown() {
  if (unknown_.empty()) {
    return;
  }
  absl::StatusOr<ShardDescription> description = client_->describe(shard_);
  absl::StatusOr<ReadHandle> reader = client_->open_reader(shard_, "resolve");
  if (!description.ok() || !reader.ok() || description->upper.time() == 0) {
    fail("resolving the zombie's appends: " + description.status().ToString() + " / " +
         reader.status().ToString());
    return;
  }
  absl::StatusOr<std::vector<Update>> contents = reader->snapshot(description->upper.time() - 1);
  if (!contents.ok()) {
    fail("resolving the zombie's appends: " + contents.status().ToString());
    return;
  }
  std::set<std::string> present;
  for (const Update& update : *contents) {
    present.insert(update.data);
  }
  for (auto& [lower, batch] : unknown_) {
    if (present.contains(batch.updates[0].data) && !model_.record(lower, std::move(batch))) {
      fail("zombie: a second batch committed at lower " + std::to_string(lower));
    }
  }
  reader->expire().IgnoreError();
}

void ModelRun::maintenance_thread(int index) {
  const std::string who = "maintenance " + std::to_string(index);
  std::mt19937_64 rng = rng_for(400 + static_cast<uint64_t>(index));
  while (writers_running_ > 0 && !stop_) {
    ++stats_.operations;
    // Maintenance 0 only collects garbage, the others mostly compact: a compaction goes on while
    // the appends keep giving it work, which may be the whole run.
    const uint64_t r = rng() % 100;
    if (index != 0 && r < 80) {
      absl::StatusOr<CompactionResult> compacted =
          client_->compact(shard_, {.full = rng() % 8 == 0});
      if (!is_before_the_shard(compacted.status())) {
        tolerate(status_of(compacted), who + ": compact");
      }
      if (compacted.ok()) {
        ++stats_.compactions;
        stats_.compaction_merges += compacted->merges;
      }
    } else if (index == 0 || r < 95) {
      absl::StatusOr<GcResult> collected = client_->gc(shard_);
      if (!is_before_the_shard(collected.status())) {
        tolerate(status_of(collected), who + ": gc");
      }
      stats_.gcs += collected.ok() ? 1 : 0;
    } else {
      absl::Status maintained = client_->maintain(shard_);
      if (!is_before_the_shard(maintained)) {
        tolerate(maintained, who + ": maintain");
      }
    }
    // Pacing, not waiting: let the writers get ahead between maintenance runs.
    std::this_thread::sleep_for(std::chrono::microseconds(100 + rng() % 500));
  }
}

void ModelRun::check() {
  blob_->configure({});
  consensus_->configure({});
  const auto& batches = model_.batches();
  resolve_unknown();
  if (!failures_.empty()) {
    return;
  }
  // The committed batches chain from 0: none lost, none twice.
  uint64_t expected_lower = 0;
  for (const auto& [lower, batch] : batches) {
    if (lower != expected_lower) {
      fail("the committed batches do not chain: one starts at " + std::to_string(lower) +
           ", the previous ended at " + std::to_string(expected_lower));
      return;
    }
    expected_lower = batch.upper;
  }
  const uint64_t upper = model_.upper();
  absl::StatusOr<ShardDescription> description = client_->describe(shard_);
  if (!description.ok()) {
    fail("describe at the end: " + description.status().ToString());
    return;
  }
  final_batches_ = description->batches.size();
  for (const auto& writer : description->writers) {
    leaked_ += writer.purpose == "compaction" ? 1 : 0;
  }
  for (const auto& reader : description->leased_readers) {
    leaked_ += reader.purpose == "compaction" ? 1 : 0;
  }
  for (const auto& batch : description->batches) {
    final_parts_ += batch.num_parts;
  }
  if (description->upper != Frontier(upper)) {
    fail("the shard's upper is " + description->upper.to_string() + ", the model's [" +
         std::to_string(upper) + "]");
    return;
  }
  // Every read the threads made.
  for (const SnapshotRead& read : snapshots_) {
    const Contents expected = model_.at(read.as_of);
    if (read.contents != expected) {
      std::string diff;
      std::set<std::string> keys;
      for (const auto& [data, d] : expected) keys.insert(data);
      for (const auto& [data, d] : read.contents) keys.insert(data);
      for (const std::string& data : keys) {
        const int64_t want = expected.contains(data) ? expected.at(data) : 0;
        const int64_t got = read.contents.contains(data) ? read.contents.at(data) : 0;
        if (want != got) {
          diff += " " + data + ": read " + std::to_string(got) + ", model " + std::to_string(want) +
                  ";";
        }
      }
      fail(read.who + ": snapshot at " + std::to_string(read.as_of) +
           " differs from the model:" + diff);
      return;
    }
  }
  for (const ListenRead& read : listens_) {
    if (read.updates != model_.between(read.as_of, read.frontier)) {
      fail(read.who + ": listen from " + std::to_string(read.as_of) + " to frontier " +
           std::to_string(read.frontier) + " differs from the model");
      return;
    }
  }
  // The whole collection, with faults off: snapshot at the since + listen is the model.
  absl::StatusOr<ReadHandle> reader = client_->open_reader(shard_, "check");
  if (!reader.ok()) {
    fail("open_reader at the end: " + reader.status().ToString());
    return;
  }
  if (upper > 0) {
    const uint64_t since = reader->since().time();
    if (since >= upper) {
      fail("the since " + std::to_string(since) + " passed the upper " + std::to_string(upper));
      return;
    }
    absl::StatusOr<std::vector<Update>> last = reader->snapshot(upper - 1);
    absl::StatusOr<std::vector<Update>> first = reader->snapshot(since);
    if (!last.ok() || !first.ok()) {
      fail("final snapshots: " + last.status().ToString() + " / " + first.status().ToString());
      return;
    }
    Contents contents;
    for (const Update& update : *last) {
      contents[update.data] = update.diff;
    }
    if (contents != model_.at(upper - 1)) {
      fail("the final snapshot differs from the model");
      return;
    }
    absl::StatusOr<Listen> listen = reader->listen(since);
    Updates listened;
    while (listen.ok() && listen->frontier() < Frontier(upper)) {
      absl::StatusOr<std::optional<ListenEvent>> event = listen->next();
      if (!event.ok() || !*event) {
        fail("the final listen stopped at " + listen->frontier().to_string() + ": " +
             event.status().ToString());
        return;
      }
      for (const Update& update : (*event)->updates) {
        listened[{update.data, update.time}] += update.diff;
      }
    }
    std::erase_if(listened, [](const auto& entry) { return entry.second == 0; });
    if (!listen.ok() || listened != model_.between(since, upper)) {
      fail("the final listen differs from the model: " + listen.status().ToString());
      return;
    }
  }
  if (absl::Status expired = reader->expire(); !expired.ok()) {
    fail("expire at the end: " + expired.ToString());
    return;
  }
  check_leftovers();
}

void ModelRun::check_leftovers() {
  // Every lease runs out; GC then leaves exactly what the shard references.
  clock_->offset_ms += absl::ToInt64Milliseconds(absl::Hours(2));
  absl::StatusOr<GcResult> collected;
  for (int round = 0; round < 4; ++round) {
    collected = client_->gc(shard_);
    if (!collected.ok() || collected->blobs_failed > 0) {
      fail("GC at the end: " + collected.status().ToString());
      return;
    }
  }
  absl::StatusOr<ShardDescription> description = client_->describe(shard_);
  if (!description.ok()) {
    fail("describe at the end: " + description.status().ToString());
    return;
  }
  if (!description->writers.empty() || !description->leased_readers.empty() ||
      !description->critical_readers.empty()) {
    fail("registrations left after every lease ran out");
    return;
  }
  size_t referenced = 0;
  for (const auto& batch : description->batches) {
    referenced += batch.num_parts;
  }
  const std::string prefix = shard_id_.str() + "/";
  absl::StatusOr<std::vector<BlobMetadata>> blobs = inner_blob_->list_keys(prefix);
  if (!blobs.ok() || blobs->size() != referenced) {
    fail("GC left " + std::to_string(blobs.ok() ? blobs->size() : 0) + " blobs, the shard " +
         "references " + std::to_string(referenced) + ": " + blobs.status().ToString());
    return;
  }
  absl::StatusOr<std::vector<VersionedData>> versions =
      inner_consensus_->scan(shard_id_.str(), 0, 1000);
  if (!versions.ok() || versions->size() != 1) {
    fail("GC left " + std::to_string(versions.ok() ? versions->size() : 0) +
         " consensus versions, not 1");
    return;
  }
}

std::string ModelRun::summary() const {
  char text[1000];
  std::snprintf(
      text, sizeof(text),
      "seed %llu (%s): %.2f s, %llu operations: %llu appended (%llu empty), %llu mismatches, "
      "%llu indeterminate appends, %llu abandoned, %llu snapshots (%llu failed tries), %llu "
      "listens (%llu events), "
      "%llu since moves, %llu fencings, zombie %llu appended + %llu refused + %llu unknown, "
      "writer fences %llu (%llu refused, %llu unknown), "
      "%llu compactions (%llu merges), %llu GCs, %llu transient "
      "errors; "
      "faults injected: blob %llu failed + %llu lost replies of %llu calls, consensus %llu + %llu "
      "of %llu; final upper %llu in %zu batches of %zu parts; %zu compaction registrations left",
      static_cast<unsigned long long>(options_.seed), options_.store.c_str(), seconds_,
      static_cast<unsigned long long>(stats_.operations.load()),
      static_cast<unsigned long long>(stats_.appended.load()),
      static_cast<unsigned long long>(stats_.empty_appended.load()),
      static_cast<unsigned long long>(stats_.mismatches.load()),
      static_cast<unsigned long long>(stats_.indeterminate_appends.load()),
      static_cast<unsigned long long>(stats_.abandoned_appends.load()),
      static_cast<unsigned long long>(stats_.snapshots.load()),
      static_cast<unsigned long long>(stats_.failed_reads.load()),
      static_cast<unsigned long long>(stats_.listens.load()),
      static_cast<unsigned long long>(stats_.listen_events.load()),
      static_cast<unsigned long long>(stats_.since_downgrades.load()),
      static_cast<unsigned long long>(stats_.fenced.load()),
      static_cast<unsigned long long>(stats_.zombie_appended.load()),
      static_cast<unsigned long long>(stats_.zombie_refused.load()),
      static_cast<unsigned long long>(stats_.zombie_unknown.load()),
      static_cast<unsigned long long>(stats_.writer_fences.load()),
      static_cast<unsigned long long>(stats_.fenced_refused.load()),
      static_cast<unsigned long long>(stats_.fenced_unknown.load()),
      static_cast<unsigned long long>(stats_.compactions.load()),
      static_cast<unsigned long long>(stats_.compaction_merges.load()),
      static_cast<unsigned long long>(stats_.gcs.load()),
      static_cast<unsigned long long>(stats_.transient_errors.load()),
      static_cast<unsigned long long>(blob_->counts().failed.load()),
      static_cast<unsigned long long>(blob_->counts().indeterminate.load()),
      static_cast<unsigned long long>(blob_->counts().calls.load()),
      static_cast<unsigned long long>(consensus_->counts().failed.load()),
      static_cast<unsigned long long>(consensus_->counts().indeterminate.load()),
      static_cast<unsigned long long>(consensus_->counts().calls.load()),
      static_cast<unsigned long long>(model_.upper()), final_batches_, final_parts_, leaked_);
  return text;
}

// Runs the seeds of one store kind, printing a line per seed; fails naming every failing seed.
void run_seeds(const std::string& store, uint64_t default_seeds, uint64_t default_appends) {
  uint64_t first = env_or("WEIR_MODEL_FIRST_SEED", 1);
  uint64_t count = env_or("WEIR_MODEL_SEEDS", default_seeds);
  if (const uint64_t only = env_or("WEIR_MODEL_SEED", 0); only != 0) {
    first = only;
    count = 1;
  }
  const uint64_t appends = env_or("WEIR_MODEL_APPENDS", default_appends);
  for (uint64_t seed = first; seed < first + count; ++seed) {
    Options options;
    options.seed = seed;
    options.store = store;
    options.appends_per_writer = appends;
    options.blob_faults = {.fail_rate = 0.10,
                           .indeterminate_rate = 0.05,
                           .delay_rate = 0.02,
                           .max_delay = std::chrono::milliseconds(2),
                           .seed = seed * 2 + 1};
    options.consensus_faults = options.blob_faults;
    options.consensus_faults.seed = seed * 2 + 2;
    ModelRun run(options);
    const std::vector<std::string> failures = run.run();
    std::printf("%s\n", run.summary().c_str());
    std::fflush(stdout);
    for (const std::string& failure : failures) {
      ADD_FAILURE() << "seed " << seed << " (" << store << "; replay with WEIR_MODEL_SEED=" << seed
                    << "): " << failure;
    }
  }
}

// Regression tests for what the model test found, each reduced to one cause.

// Found by the model test: a lost reply to the registration of a reader (or writer) failed the
// open, and the caller's retry registered a second one; the first stayed registered for its whole
// lease, a reader holding the since (and so compaction) back. Compaction's own reader and writer
// leaked the same way, 30 of them in a second of the model test.
TEST(PersistModelRegressionTest, AnOpenWhoseReplyIsLostRegistersOnce) {
  const PersistLocation location = testing::fresh_location("mem");
  auto consensus =
      std::make_shared<testing::LosingConsensus>(Consensus::open(location.consensus_url).value());
  std::unique_ptr<PersistClient> client =
      PersistClient::create(Blob::open(location.blob_url).value(), consensus);
  ASSERT_TRUE(client->open_writer("lost").ok());  // Creates the shard.
  // As the documentation says a caller does after an Unavailable: try again.
  const auto open_reader = [&] {
    consensus->lose_replies = 1;
    return retry([&] { return client->open_reader("lost"); });
  };
  const auto open_writer = [&] {
    consensus->lose_replies = 1;
    return retry([&] { return client->open_writer("lost"); });
  };
  absl::StatusOr<ReadHandle> reader = open_reader();
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<WriteHandle> writer = open_writer();
  ASSERT_TRUE(writer.ok()) << writer.status();
  const ShardDescription description = client->describe("lost").value();
  EXPECT_EQ(description.leased_readers.size(), 1u) << "a reader registered twice";
  EXPECT_EQ(description.writers.size(), 2u) << "a writer registered twice";
  ASSERT_TRUE(reader->expire().ok());
  EXPECT_TRUE(client->describe("lost")->leased_readers.empty());
}

// Found by the model test (once batches were appended by a writer other than their builder):
// compare_and_append decided refusals on the state its handle had cached, which may be stale. A
// retry by another writer (a later incarnation, as the documentation allows) of an append that
// had committed, its reply lost, saw an old upper and reported a mismatch, so the caller
// discarded parts the shard referenced: readers then found them missing, and the model a gap.
// The same cache refused batches whose builder registered after it, and reported as the current
// upper one older than the expected upper that the shard really had.
TEST(PersistModelRegressionTest, RefusalsAreDecidedOnTheLatestStateNotACachedOne) {
  const PersistLocation location = testing::fresh_location("mem");
  auto consensus =
      std::make_shared<testing::LosingConsensus>(Consensus::open(location.consensus_url).value());
  std::unique_ptr<PersistClient> client =
      PersistClient::create(Blob::open(location.blob_url).value(), consensus);
  const auto build = [](WriteHandle& writer, uint64_t lower, const std::string& row) {
    BatchBuilder builder = writer.builder(Frontier(lower));
    EXPECT_TRUE(builder.add(row, lower, 1).ok());
    return builder.finish(Frontier(lower + 1)).value();
  };
  WriteHandle stale = client->open_writer("stale").value();  // Caches the state at upper 0.
  WriteHandle builder = client->open_writer("stale").value();

  // A batch of a writer that registered after `stale` cached its state (was: FailedPrecondition,
  // "built by writer ..., which has expired").
  absl::StatusOr<AppendResult> appended =
      stale.compare_and_append(build(builder, 0, "a"), Frontier(0), Frontier(1));
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_TRUE(appended->is_appended());

  // The upper moved on without `stale` (was: a mismatch naming the old upper 1).
  ASSERT_TRUE(
      builder.compare_and_append(build(builder, 1, "b"), Frontier(1), Frontier(2))->is_appended());
  appended = stale.compare_and_append(build(builder, 2, "c"), Frontier(2), Frontier(3));
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_TRUE(appended->is_appended()) << "refused at the upper the shard has";

  // The builder's append commits and its reply is lost; another writer retries it with its stale
  // view (was: a mismatch, and the caller discarded the parts of an appended batch).
  WriteHandle later = client->open_writer("stale").value();
  ASSERT_TRUE(
      builder.compare_and_append(build(builder, 3, "d"), Frontier(3), Frontier(4))->is_appended());
  const Batch lost = build(builder, 4, "e");
  consensus->lose_replies = 1;  // And it stays down through the builder's own retries.
  consensus->down_after_losing = true;
  absl::StatusOr<AppendResult> first = builder.compare_and_append(lost, Frontier(4), Frontier(5));
  ASSERT_TRUE(is_indeterminate(first.status())) << first.status();
  consensus->down = false;
  appended = later.compare_and_append(lost, Frontier(4), Frontier(5));
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_TRUE(appended->is_appended()) << "a committed append was reported refused";

  // A refusal still names the shard's upper.
  appended = stale.compare_and_append(build(builder, 3, "late"), Frontier(3), Frontier(4));
  ASSERT_TRUE(appended.ok()) << appended.status();
  ASSERT_FALSE(appended->is_appended());
  EXPECT_EQ(appended->mismatch->current, Frontier(5));

  ReadHandle reader = client->open_reader("stale").value();
  EXPECT_EQ(testing::as_map(reader.snapshot(4).value()),
            (Contents{{"a", 1}, {"b", 1}, {"c", 1}, {"d", 1}, {"e", 1}}));
}

// The same for a critical since hold: a handle whose cached state predates an epoch that another
// handle of the same hold set refused that epoch (was: EpochMismatch naming the old epoch).
TEST(PersistModelRegressionTest, ACriticalHoldDecidesItsEpochOnTheLatestState) {
  const PersistLocation location = testing::fresh_location("mem");
  std::unique_ptr<PersistClient> client = PersistClient::open(location).value();
  ASSERT_TRUE(client->open_writer("hold").ok());
  const CriticalReaderId id = CriticalReaderId::random();
  SinceHandle old_handle = client->open_critical_since("hold", id).value();
  SinceHandle new_handle = client->open_critical_since("hold", id).value();
  ASSERT_FALSE(new_handle.compare_and_downgrade_since(0, 7, Frontier(0))->mismatch);
  absl::StatusOr<SinceResult> moved = old_handle.compare_and_downgrade_since(7, 8, Frontier(0));
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_FALSE(moved->mismatch) << "refused with epoch " << moved->mismatch->current;
  EXPECT_EQ(old_handle.epoch(), 8u);
  // And a stale epoch is still refused, naming the current one.
  moved = new_handle.compare_and_downgrade_since(7, 9, Frontier(0));
  ASSERT_TRUE(moved.ok()) << moved.status();
  ASSERT_TRUE(moved->mismatch);
  EXPECT_EQ(moved->mismatch->current, 8u);
}

// Found by the model test: at 10 % failed store calls (5 % lost replies) compaction and GC gave
// up at the first failure, so none of 40 compactions completed (the shard grew to 100 batches in
// a second, and a snapshot of them failed on 9 tries in 10, one failed part fetch failing it),
// and a compaction that gave up left its reader and writer registered when their expire failed
// too.
TEST(PersistModelRegressionTest, MaintenanceAndReadsFinishUnderTransientFaults) {
  const PersistLocation location = testing::fresh_location("mem");
  FaultConfig faults{.fail_rate = 0.10, .indeterminate_rate = 0.05, .seed = 42};
  auto blob = std::make_shared<FaultyBlob>(Blob::open(location.blob_url).value(), FaultConfig{});
  auto consensus =
      std::make_shared<FaultyConsensus>(Consensus::open(location.consensus_url).value(), faults);
  consensus->configure({});
  PersistConfig config;
  config.part_target_bytes = 200;
  config.compaction_max_runs = 4;
  config.io_threads = 2;
  std::unique_ptr<PersistClient> client = PersistClient::create(blob, consensus, config);
  WriteHandle writer = client->open_writer("faulty").value();
  ReadHandle reader = client->open_reader("faulty").value();
  std::vector<Update> history;
  constexpr uint64_t kBatches = 60;
  for (uint64_t t = 0; t < kBatches; ++t) {
    std::vector<Update> batch;
    for (uint64_t i = 0; i < 12; ++i) {
      batch.push_back({"key-" + std::to_string((t * 7 + i) % 40), t, i % 3 == 0 ? -1 : 1});
    }
    ASSERT_TRUE(writer.compare_and_append(batch, Frontier(t), Frontier(t + 1))->is_appended());
    history.insert(history.end(), batch.begin(), batch.end());
  }
  ASSERT_TRUE(reader.downgrade_since(Frontier(kBatches - 10)).ok());
  blob->configure(faults);
  consensus->configure({.fail_rate = 0.10, .indeterminate_rate = 0.05, .seed = 43});

  // Every snapshot reads every part: 60 batches of about two parts each.
  int snapshots = 0;
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<std::vector<Update>> snapshot = reader.snapshot(kBatches - 1);
    if (snapshot.ok()) {
      ++snapshots;
      EXPECT_EQ(testing::as_map(*snapshot), testing::consolidate(history, kBatches - 1));
    } else {
      EXPECT_EQ(snapshot.status().code(), absl::StatusCode::kUnavailable) << snapshot.status();
    }
  }
  // The state fetch before the parts may fail (once in ten): that is the caller's to retry.
  EXPECT_GE(snapshots, 6) << "snapshots of many parts fail when one part fetch does";

  int compactions = 0;
  int gcs = 0;
  for (int i = 0; i < 6; ++i) {
    absl::StatusOr<CompactionResult> compacted = client->compact("faulty", {.full = i % 2 == 1});
    compactions += compacted.ok() ? 1 : 0;
    absl::StatusOr<GcResult> collected = client->gc("faulty");
    gcs += collected.ok() ? 1 : 0;
  }
  // find_shard is cached, so every failure left is maintenance's own.
  EXPECT_EQ(compactions, 6);
  EXPECT_EQ(gcs, 6);

  blob->configure({});
  consensus->configure({});
  const ShardDescription description = client->describe("faulty").value();
  EXPECT_EQ(description.leased_readers.size(), 1u) << "compaction left its reader registered";
  EXPECT_EQ(description.writers.size(), 1u) << "compaction left its writer registered";
  EXPECT_LE(description.batches.size(), 2u);
  EXPECT_EQ(testing::as_map(reader.snapshot(kBatches - 1).value()),
            testing::consolidate(history, kBatches - 1));
}

// Calls `hook` once, on the `at`th set (from the thread doing the set).
class HookOnSet final : public Blob {
 public:
  HookOnSet(std::shared_ptr<Blob> inner, int at) : inner_(std::move(inner)), at_(at) {}
  void set_hook(std::function<void()> hook) { hook_ = std::move(hook); }

  absl::StatusOr<std::optional<std::string>> get(std::string_view key) override {
    return inner_->get(key);
  }
  absl::Status set(std::string_view key, std::string_view value) override {
    absl::Status status = inner_->set(key, value);
    if (++sets_ == at_ && hook_) {
      hook_();
    }
    return status;
  }
  absl::Status remove(std::string_view key) override { return inner_->remove(key); }
  absl::StatusOr<std::vector<BlobMetadata>> list_keys(std::string_view prefix) override {
    return inner_->list_keys(prefix);
  }

 private:
  std::shared_ptr<Blob> inner_;
  const int at_;
  std::atomic<int> sets_{0};
  std::function<void()> hook_;
};

// Found by the model test (GC ran a few times a second and removed little while a compaction
// went on): compaction's reader held the consensus versions from the compaction's start until
// its lease needed renewing, so a compaction that appends kept busy for minutes pinned every
// version, and every part those versions named, for as long.
TEST(PersistModelRegressionTest, ALongCompactionLetsGcTruncateBehindIt) {
  const PersistLocation location = testing::fresh_location("mem");
  auto blob = std::make_shared<HookOnSet>(Blob::open(location.blob_url).value(), 40);
  PersistConfig config;
  config.part_target_bytes = 200;
  config.compaction_max_runs = 2;
  config.io_threads = 2;
  std::unique_ptr<PersistClient> client =
      PersistClient::create(blob, Consensus::open(location.consensus_url).value(), config);
  WriteHandle writer = client->open_writer("long").value();
  for (uint64_t t = 0; t < 32; ++t) {
    const std::vector<Update> batch = {{"key-" + std::to_string(t), t, 1}};
    ASSERT_TRUE(writer.compare_and_append(batch, Frontier(t), Frontier(t + 1))->is_appended());
  }
  ASSERT_TRUE(client->gc("long").ok());
  std::optional<absl::StatusOr<GcResult>> during;
  blob->set_hook([&] { during = client->gc("long"); });
  // About 30 steps of two runs each; the hook runs GC some 20 steps in.
  absl::StatusOr<CompactionResult> compacted = client->compact("long", {.full = true});
  ASSERT_TRUE(compacted.ok()) << compacted.status();
  ASSERT_GE(compacted->merges, 25u);
  ASSERT_TRUE(during.has_value());
  ASSERT_TRUE(during->ok()) << during->status();
  EXPECT_GE((*during)->versions_truncated, 4u) << "the compaction pinned its first version";
  EXPECT_GT((*during)->blobs_deleted, 0u);
}

TEST(PersistModelTest, InMemoryStoresUnderFaults) { run_seeds("mem", 10, 300); }

TEST(PersistModelTest, FileBlobAndSqliteUnderFaults) { run_seeds("sqlite", 2, 120); }

}  // namespace
}  // namespace weir::persist
