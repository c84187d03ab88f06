// The persist sink when persist stops answering: a blob store or consensus whose calls block (a
// stopped server) must not hang `execute` when another operator fails, and a call that completes
// after the dataflow is gone must not break exactly-once.

#include "weir/sinks/persist_sink.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "testing/forwarding_consensus.h"
#include "testing/harness.h"
#include <gtest/gtest.h>

#include "weir/async/async_operator.h"
#include "weir/operators/input.h"
#include "weir/operators/inspect.h"
#include "weir/persist/client.h"
#include "weir/persist/faults.h"
#include "weir/weir.h"

namespace weir::sinks {
namespace {

using namespace std::chrono_literals;
using persist::Blob;
using persist::Consensus;
using testing::ForwardingConsensus;

// What the hanging stores block on until the test opens it. Shared, so a call that outlives the
// test's frame (a detached one) still finds it.
class Gate {
 public:
  // From now on, calls through the gate block until release().
  void arm() { armed_ = true; }
  void release() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }
  // Called by a store before it does its work.
  void pass() {
    if (!armed_.load()) return;
    ++blocked_;
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return released_; });
  }
  // Called by a store after its work, for calls that blocked.
  void returned() { ++returned_; }

  int blocked() const { return blocked_.load(); }
  int returned_calls() const { return returned_.load(); }
  bool is_armed() const { return armed_.load(); }
  // Waits (bounded) until every call that blocked has returned.
  bool wait_all_returned(std::chrono::seconds limit = 10s) const {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (returned_.load() < blocked_.load()) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(1ms);
    }
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  std::atomic<bool> armed_{false};
  std::atomic<int> blocked_{0};
  std::atomic<int> returned_{0};
};

// A blob store whose writes block at the gate (once armed): an object store that stopped
// answering.
class HangingBlob final : public Blob {
 public:
  HangingBlob(std::shared_ptr<Blob> inner, std::shared_ptr<Gate> gate)
      : inner_(std::move(inner)), gate_(std::move(gate)) {}
  absl::StatusOr<std::optional<std::string>> get(std::string_view key) override {
    return inner_->get(key);
  }
  absl::Status set(std::string_view key, std::string_view value) override {
    const bool armed = gate_->is_armed();
    gate_->pass();
    absl::Status status = inner_->set(key, value);
    if (armed) gate_->returned();
    return status;
  }
  absl::Status remove(std::string_view key) override { return inner_->remove(key); }
  absl::StatusOr<std::vector<persist::BlobMetadata>> list_keys(std::string_view prefix) override {
    return inner_->list_keys(prefix);
  }

 private:
  std::shared_ptr<Blob> inner_;
  std::shared_ptr<Gate> gate_;
};

// A consensus whose compare-and-sets block at the gate (once armed) before they reach the store:
// a stopped PostgreSQL. Released, the call goes on with the expectation it was made with.
class HangingConsensus final : public ForwardingConsensus {
 public:
  HangingConsensus(std::shared_ptr<Consensus> inner, std::shared_ptr<Gate> gate)
      : ForwardingConsensus(std::move(inner)), gate_(std::move(gate)) {}
  absl::StatusOr<persist::CasResult> compare_and_set(
      std::string_view key, std::optional<uint64_t> expected_seqno,
      const persist::VersionedData& new_version) override {
    const bool armed = gate_->is_armed();
    gate_->pass();
    auto result = inner_->compare_and_set(key, expected_seqno, new_version);
    if (armed) gate_->returned();
    return result;
  }

 private:
  std::shared_ptr<Gate> gate_;
};

// A consensus whose compare-and-sets wait at the gate (once armed) and then, before they reach the
// store, run `before` until it returns true once: another writer that slips in just ahead of one.
class InterposingConsensus final : public ForwardingConsensus {
 public:
  InterposingConsensus(std::shared_ptr<Consensus> inner, std::shared_ptr<Gate> gate)
      : ForwardingConsensus(std::move(inner)), gate_(std::move(gate)) {}
  void set_before(std::function<bool()> before) {
    std::lock_guard lock(mu_);
    before_ = std::move(before);
  }
  absl::StatusOr<persist::CasResult> compare_and_set(
      std::string_view key, std::optional<uint64_t> expected_seqno,
      const persist::VersionedData& new_version) override {
    const bool armed = gate_->is_armed();
    gate_->pass();
    if (armed) gate_->returned();
    {
      std::lock_guard lock(mu_);
      if (before_ && before_()) before_ = nullptr;
    }
    return inner_->compare_and_set(key, expected_seqno, new_version);
  }

 private:
  std::shared_ptr<Gate> gate_;
  std::mutex mu_;
  std::function<bool()> before_;
};

// In-memory stores shared by every client of this process that opens the same URLs.
persist::PersistLocation fresh_mem_location(const std::string& name) {
  static std::atomic<int> counter{0};
  const std::string unique = name + "-" + std::to_string(counter++);
  return {"mem://sink-blob-" + unique, "mem://sink-consensus-" + unique};
}

constexpr int kRows = 200;

std::vector<Update> rows() {
  std::vector<Update> updates;
  for (int i = 0; i < kRows; ++i) updates.emplace_back("row-" + std::to_string(i), 1);
  return updates;
}

std::map<std::string, int64_t> expected_contents() {
  std::map<std::string, int64_t> contents;
  for (const auto& [row, diff] : rows()) contents[row] += diff;
  return contents;
}

// One dataflow on one worker: rows() at time 0 into a persist sink of `writer` (the shard's upper
// `shard_upper`), the input closed at time 1 (the sink's final upper). With a `gate`, an operator
// "Failer" fails once a call blocks at the gate. Returns execute's status.
absl::Status run_sink(std::shared_ptr<persist::WriteHandle> writer, Time shard_upper,
                      std::shared_ptr<Gate> gate) {
  return testing::run_workers(1, [&](Worker& worker) {
    std::optional<InputHandle<Time, Update>> input;
    worker.dataflow<Time>([&](Scope<Time>& scope) {
      auto [handle, updates] = new_input<Update>(scope);
      input.emplace(std::move(handle));
      PersistSinkConfig config;
      config.name = "orders";
      config.writer = writer;
      config.shard_upper = shard_upper;
      config.final_upper = 1;
      render_persist_sink(updates, config);
      if (gate) {
        AsyncOperatorBuilder<Time> builder("Failer", scope);
        builder.add_output<uint8_t>();
        builder.build([gate](AsyncContext& ctx, std::span<CapabilitySet<Time>>) -> absl::Status {
          while (gate->blocked() == 0) ctx.sleep_for(1ms);
          // A blocked upload may still be on persist's I/O threads only: give the write
          // operator time to reach its wait for it (the failure must find a body waiting).
          ctx.sleep_for(100ms);
          return absl::UnavailableError("upstream went away");
        });
      }
    });
    for (auto& update : rows()) input->send(std::move(update));
    input->advance_to(1);
    input.reset();  // Closes the input: the sink describes [shard_upper, 1).
  });
}

// Runs `run` on another thread; returns its status if it finishes within `limit`. Otherwise
// releases `gate` (so that the thread can end), joins it and returns nullopt.
std::optional<absl::Status> run_bounded(std::function<absl::Status()> run, Gate& gate,
                                        std::chrono::seconds limit) {
  std::promise<absl::Status> promise;
  auto future = promise.get_future();
  std::thread thread([&] { promise.set_value(run()); });
  if (future.wait_for(limit) != std::future_status::ready) {
    gate.release();
    thread.join();
    return std::nullopt;
  }
  thread.join();
  return future.get();
}

std::map<std::string, int64_t> shard_contents(persist::PersistClient& client, uint64_t as_of) {
  auto reader = client.open_reader("orders");
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return {};
  auto updates = reader->snapshot(as_of);
  EXPECT_TRUE(updates.ok()) << updates.status();
  std::map<std::string, int64_t> contents;
  if (updates.ok()) {
    for (const auto& u : *updates) contents[u.data] += u.diff;
  }
  (void)reader->expire();
  return contents;
}

// The part size of the sink's batches: large, the upload of the last part (in finish) blocks;
// tiny, with one upload in flight, the write operator's wait_for_room blocks.
class PersistSinkBlobHangTest : public ::testing::TestWithParam<size_t> {};

// A blob store that stops answering while the write operator waits for an upload: a failure
// elsewhere is returned at once, and the upload is left to return whenever it does.
TEST_P(PersistSinkBlobHangTest, AFailureDoesNotWaitForAHungUpload) {
  testing::Watchdog watchdog("AFailureDoesNotWaitForAHungUpload");
  const auto location = fresh_mem_location("blob-hang");
  auto gate = std::make_shared<Gate>();
  persist::PersistConfig persist_config;
  persist_config.part_target_bytes = GetParam();
  persist_config.max_parts_in_flight = 1;
  auto client = persist::PersistClient::create(
      std::make_shared<HangingBlob>(Blob::open(location.blob_url).value(), gate),
      Consensus::open(location.consensus_url).value(), persist_config);
  auto writer = std::make_shared<persist::WriteHandle>(client->open_writer("orders").value());
  gate->arm();

  const auto start = std::chrono::steady_clock::now();
  auto status = run_bounded([&] { return run_sink(writer, 0, gate); }, *gate, 20s);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(status.has_value()) << "execute waited for the hung blob call";
  EXPECT_EQ(status->code(), absl::StatusCode::kUnavailable) << *status;
  EXPECT_NE(status->message().find("Failer"), std::string::npos) << *status;
  // The upload was still blocked when execute returned.
  EXPECT_GE(gate->blocked(), 1);
  EXPECT_EQ(gate->returned_calls(), 0);
  EXPECT_LT(elapsed, 10s);
  gate->release();
  EXPECT_TRUE(gate->wait_all_returned());
  // Nothing was appended.
  auto upper = writer->fetch_recent_upper();
  ASSERT_TRUE(upper.ok()) << upper.status();
  EXPECT_EQ(*upper, persist::Frontier(0));
}

INSTANTIATE_TEST_SUITE_P(PartSize, PersistSinkBlobHangTest,
                         ::testing::Values(size_t{8} << 20, size_t{64}));

// When the append that hung completes, relative to the restart that writes the same data.
enum class LateAppend {
  kBeforeTheRestart,             // The restart resumes from the upper the late append left.
  kAfterTheRestartReadTheUpper,  // The restart appends at the old upper: it finds a mismatch.
  kAfterTheRestart,              // The late append finds the restart's upper.
};

class PersistSinkConsensusHangTest : public ::testing::TestWithParam<LateAppend> {};

// Consensus stops answering during the append: a failure elsewhere is returned at once. When the
// append completes late (before, during or after a restart that writes the same data through
// another writer), the shard still holds every row exactly once.
TEST_P(PersistSinkConsensusHangTest, AFailureDoesNotWaitForAHungAppendAndTheLateAppendIsFenced) {
  testing::Watchdog watchdog("AFailureDoesNotWaitForAHungAppend");
  const auto location = fresh_mem_location("consensus-hang");
  auto gate = std::make_shared<Gate>();
  auto client = persist::PersistClient::create(
      Blob::open(location.blob_url).value(),
      std::make_shared<HangingConsensus>(Consensus::open(location.consensus_url).value(), gate));
  auto writer = std::make_shared<persist::WriteHandle>(client->open_writer("orders").value());
  gate->arm();

  const auto start = std::chrono::steady_clock::now();
  auto status = run_bounded([&] { return run_sink(writer, 0, gate); }, *gate, 20s);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(status.has_value()) << "execute waited for the hung consensus call";
  EXPECT_EQ(status->code(), absl::StatusCode::kUnavailable) << *status;
  EXPECT_NE(status->message().find("Failer"), std::string::npos) << *status;
  EXPECT_GE(gate->blocked(), 1);
  EXPECT_EQ(gate->returned_calls(), 0);
  EXPECT_LT(elapsed, 10s);

  // The restart: another process's client and writer on the same stores.
  auto restarted = persist::PersistClient::open(location);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  auto second = std::make_shared<persist::WriteHandle>((*restarted)->open_writer("orders").value());
  if (GetParam() == LateAppend::kBeforeTheRestart) {
    gate->release();
    ASSERT_TRUE(gate->wait_all_returned());
  }
  auto upper = second->fetch_recent_upper();
  ASSERT_TRUE(upper.ok()) << upper.status();
  const Time resume = upper->is_empty() ? 0 : upper->time();
  if (GetParam() == LateAppend::kAfterTheRestartReadTheUpper) {
    gate->release();
    ASSERT_TRUE(gate->wait_all_returned());
  }
  absl::Status restart = run_sink(second, resume, nullptr);
  EXPECT_TRUE(restart.ok()) << restart;
  if (GetParam() == LateAppend::kAfterTheRestart) {
    gate->release();
    ASSERT_TRUE(gate->wait_all_returned());
  }

  upper = second->fetch_recent_upper();
  ASSERT_TRUE(upper.ok()) << upper.status();
  EXPECT_EQ(*upper, persist::Frontier(1));
  EXPECT_EQ(shard_contents(**restarted, 0), expected_contents());
  (void)second->expire();
}

INSTANTIATE_TEST_SUITE_P(Order, PersistSinkConsensusHangTest,
                         ::testing::Values(LateAppend::kBeforeTheRestart,
                                           LateAppend::kAfterTheRestartReadTheUpper,
                                           LateAppend::kAfterTheRestart));

// Another writer (a stale incarnation, or one whose plan found a definite error this one's did
// not) appended [0, 1) with an error row; this sink describes [0, 1), finds it appended and
// discards its batch, then appends [1, 2). The shard's upper is then where the sink's last
// append left it and the sink wrote no error row of its own, so unless the sink says so
// (flagged), the ingest driver keeps the "no error" its plan read and resumes the export past a
// durable definite error (found by review).
TEST(PersistSinkFlagTest, ARangeAnotherWriterAppendedIsFlagged) {
  testing::Watchdog watchdog("ARangeAnotherWriterAppendedIsFlagged");
  const auto location = fresh_mem_location("foreign");
  auto client = persist::PersistClient::open(location).value();
  auto other = client->open_writer("orders").value();
  const std::vector<persist::Update> error = {{"!error: found by the other writer", 0, 1}};
  ASSERT_TRUE(other.compare_and_append(error, persist::Frontier(0), persist::Frontier(1))
                  .value()
                  .is_appended());
  auto writer = std::make_shared<persist::WriteHandle>(client->open_writer("orders").value());
  auto stats = std::make_shared<SinkStats>();
  absl::Status run = testing::run_workers(1, [&](Worker& worker) {
    std::optional<InputHandle<Time, Update>> input;
    worker.dataflow<Time>([&](Scope<Time>& scope) {
      auto [handle, updates] = new_input<Update>(scope);
      input.emplace(std::move(handle));
      PersistSinkConfig config;
      config.name = "orders";
      config.writer = writer;
      config.shard_upper = 0;
      config.final_upper = 2;
      config.stats = stats;
      config.flag_prefix = "!error:";
      render_persist_sink(updates, config);
    });
    input->send({"row at 0", 1});
    input->advance_to(1);
    // Steps until the sink has described [0, 1) on its own (the mint runs on frontier advances;
    // the ASSERTs below check that the run took this path: the sink appended [1, 2)).
    for (int i = 0; i < 100; ++i) worker.step_or_park(1ms);
    input->send({"row at 1", 1});
    input->advance_to(2);
    input.reset();
  });
  ASSERT_TRUE(run.ok()) << run;
  const auto upper = writer->fetch_recent_upper();
  ASSERT_TRUE(upper.ok()) << upper.status();
  ASSERT_EQ(*upper, persist::Frontier(2));
  EXPECT_EQ(
      shard_contents(*client, 1),
      (std::map<std::string, int64_t>{{"!error: found by the other writer", 1}, {"row at 1", 1}}));
  // The driver's test: the upper is where the sink's last append left it...
  EXPECT_EQ(stats->persisted_upper.load(), 2u);
  // ... so the sink must flag the range it found appended by another writer.
  EXPECT_TRUE(stats->flagged.load())
      << "the shard gained another writer's rows (an error row among them) but the sink's stats "
         "say neither an error row nor an upper it did not leave";
  (void)other.expire();
  (void)writer->expire();
}

// Appends slower than the input's frontier moves (every consensus call sleeps up to 20 ms): the
// descriptions that are ready together go into one append, so the sink keeps up instead of
// trailing by one consensus write per time (stop 24: a view behind `weir ingest` fell seconds
// behind so), and the shard holds every time's rows all the same.
TEST(PersistSinkCoalesceTest, DescriptionsReadyTogetherGoIntoOneAppend) {
  testing::Watchdog watchdog("DescriptionsReadyTogetherGoIntoOneAppend");
  const auto location = fresh_mem_location("coalesce");
  auto blob = std::shared_ptr<persist::Blob>(persist::Blob::open(location.blob_url).value());
  auto inner =
      std::shared_ptr<persist::Consensus>(persist::Consensus::open(location.consensus_url).value());
  auto slow = std::make_shared<persist::FaultyConsensus>(inner, persist::FaultConfig{});
  std::shared_ptr<persist::PersistClient> client = persist::PersistClient::create(blob, slow);
  auto writer = std::make_shared<persist::WriteHandle>(client->open_writer("orders").value());
  slow->configure({.delay_rate = 1, .max_delay = std::chrono::milliseconds(20), .seed = 3});
  auto stats = std::make_shared<SinkStats>();
  constexpr Time kTimes = 100;
  absl::Status run = testing::run_workers(1, [&](Worker& worker) {
    std::optional<InputHandle<Time, Update>> input;
    worker.dataflow<Time>([&](Scope<Time>& scope) {
      auto [handle, updates] = new_input<Update>(scope);
      input.emplace(std::move(handle));
      PersistSinkConfig config;
      config.name = "orders";
      config.writer = writer;
      config.final_upper = kTimes;
      config.stats = stats;
      render_persist_sink(updates, config);
    });
    // A time every 2 ms, each described on its own (the mint runs while appends wait).
    for (Time t = 0; t < kTimes; ++t) {
      input->send({"row at " + std::to_string(t), 1});
      input->advance_to(t + 1);
      const auto next = std::chrono::steady_clock::now() + 2ms;
      while (std::chrono::steady_clock::now() < next) worker.step_or_park(500us);
    }
    input.reset();
  });
  ASSERT_TRUE(run.ok()) << run;
  ASSERT_EQ(writer->fetch_recent_upper().value(), persist::Frontier(kTimes));
  for (Time as_of : {Time{0}, Time{37}, kTimes - 1}) {
    std::map<std::string, int64_t> expected;
    for (Time t = 0; t <= as_of; ++t) expected["row at " + std::to_string(t)] = 1;
    EXPECT_EQ(shard_contents(*client, as_of), expected) << "as of " << as_of;
  }
  (void)writer->expire();
}

// Another writer (a stale incarnation) appends [1, 2) just before the sink appends the
// descriptions [1, 2) and [2, 3), which were ready together (the append of [0, 1) was slow): the
// shard holds the first of them, so the sink discards its batch for it and flags the range, as it
// does for a description appended on its own, and appends [2, 3). Found by review: the joined
// append [1, 3) found the upper at 2 and failed the dataflow (Aborted, a restart of the driver's
// epoch) where appending one description at a time went through.
TEST(PersistSinkCoalesceTest, ADescriptionAnotherWriterAppendedIsDiscardedFromAJoinedAppend) {
  testing::Watchdog watchdog("ADescriptionAnotherWriterAppendedIsDiscardedFromAJoinedAppend");
  const auto location = fresh_mem_location("joined-prefix");
  auto gate = std::make_shared<Gate>();
  auto consensus =
      std::make_shared<InterposingConsensus>(Consensus::open(location.consensus_url).value(), gate);
  std::shared_ptr<persist::PersistClient> client =
      persist::PersistClient::create(Blob::open(location.blob_url).value(), consensus);
  auto writer = std::make_shared<persist::WriteHandle>(client->open_writer("orders").value());
  // The other writer: its own client, on the same stores, past the gate.
  auto other_client = persist::PersistClient::open(location).value();
  auto other = other_client->open_writer("orders").value();
  std::atomic<bool> other_appended{false};
  // Before each of the sink's compare-and-sets: the other writer appends [1, 2) once the upper is
  // 1 (that is, just before the sink's append after [0, 1)).
  consensus->set_before([&] {
    const std::vector<persist::Update> at_one = {{"row at 1 by the other writer", 1, 1}};
    auto appended = other.compare_and_append(at_one, persist::Frontier(1), persist::Frontier(2));
    if (!appended.ok() || !appended->is_appended()) return false;
    other_appended = true;
    return true;
  });
  gate->arm();
  auto stats = std::make_shared<SinkStats>();
  std::mutex errors_mu;
  std::vector<absl::Status> errors;  // The sink's failures (its operators hold on error).
  absl::Status run = testing::run_workers(1, [&](Worker& worker) {
    std::optional<InputHandle<Time, Update>> input;
    worker.dataflow<Time>([&](Scope<Time>& scope) {
      auto [handle, updates] = new_input<Update>(scope);
      input.emplace(std::move(handle));
      PersistSinkConfig config;
      config.name = "orders";
      config.writer = writer;
      config.final_upper = 3;
      config.stats = stats;
      config.flag_prefix = "!error:";
      for (auto& stream : render_persist_sink(updates, config).errors) {
        stream | inspect([&](const AsyncError& error) {
          std::lock_guard lock(errors_mu);
          errors.push_back(error.status);
        });
      }
    });
    input->send({"row at 0", 1});
    input->advance_to(1);
    // The append of [0, 1) waits at the gate...
    EXPECT_TRUE(testing::step_until(worker, [&] { return gate->blocked() > 0; }));
    // ... while [1, 2) and [2, 3) (no rows) are described one at a time and written.
    input->advance_to(2);
    for (int i = 0; i < 100; ++i) worker.step_or_park(1ms);
    input->advance_to(3);
    for (int i = 0; i < 100; ++i) worker.step_or_park(1ms);
    gate->release();
    input.reset();
  });
  EXPECT_TRUE(run.ok()) << run;
  for (const absl::Status& error : errors) ADD_FAILURE() << "the sink failed: " << error;
  EXPECT_TRUE(other_appended.load());
  auto upper = writer->fetch_recent_upper();
  ASSERT_TRUE(upper.ok()) << upper.status();
  EXPECT_EQ(*upper, persist::Frontier(3));
  EXPECT_EQ(shard_contents(*client, 2),
            (std::map<std::string, int64_t>{{"row at 0", 1}, {"row at 1 by the other writer", 1}}));
  EXPECT_EQ(stats->persisted_upper.load(), 3u);
  EXPECT_TRUE(stats->flagged.load()) << "the shard gained another writer's rows";
  (void)other.expire();
  (void)writer->expire();
}

// concat_batches joins batches that follow each other into one, their parts run after run, and
// refuses batches that do not follow each other or belong to another writer.
TEST(PersistSinkCoalesceTest, ConcatJoinsFollowingBatchesAndRefusesTheOthers) {
  const auto location = fresh_mem_location("concat");
  auto client = persist::PersistClient::open(location).value();
  auto writer = client->open_writer("orders").value();
  auto other = client->open_writer("orders").value();
  auto build = [](persist::WriteHandle& w, Time lower, Time upper) {
    persist::BatchBuilder builder = w.builder(persist::Frontier(lower));
    for (Time t = lower; t < upper; ++t) {
      EXPECT_TRUE(builder.add("row at " + std::to_string(t), t, 1).ok());
    }
    return builder.finish(persist::Frontier(upper)).value();
  };
  std::vector<persist::Batch> batches = {build(writer, 0, 2), build(writer, 2, 2),
                                         build(writer, 2, 5)};
  const std::string last_token = batches.back().idempotency_token;
  auto joined = concat_batches(batches);
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(joined->description.lower, persist::Frontier(0));
  EXPECT_EQ(joined->description.upper, persist::Frontier(5));
  EXPECT_EQ(joined->idempotency_token, last_token);
  EXPECT_EQ(joined->parts.size(), batches[0].parts.size() + batches[2].parts.size());
  ASSERT_TRUE(writer.compare_and_append(*joined, persist::Frontier(0), persist::Frontier(5))
                  .value()
                  .is_appended());
  std::map<std::string, int64_t> expected;
  for (Time t = 0; t < 5; ++t) expected["row at " + std::to_string(t)] = 1;
  EXPECT_EQ(shard_contents(*client, 4), expected);

  EXPECT_EQ(concat_batches({build(writer, 5, 6), build(writer, 7, 8)}).status().code(),
            absl::StatusCode::kInvalidArgument)
      << "a gap";
  EXPECT_EQ(concat_batches({build(writer, 5, 6), build(other, 6, 7)}).status().code(),
            absl::StatusCode::kInvalidArgument)
      << "another writer";
  EXPECT_EQ(concat_batches({}).status().code(), absl::StatusCode::kInvalidArgument);
  (void)writer.expire();
  (void)other.expire();
}

}  // namespace
}  // namespace weir::sinks
