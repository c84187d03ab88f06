// The replica, in-process on in-memory stores: it runs what the catalog names and stops what it
// drops, restarts a failed runner, keeps running through a catalog that does not decode, never
// creates a shard a hold names, and a second execution fences the first.

#include "weir/control/replica.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "testing/eventually.h"
#include "testing/shards.h"
#include <gtest/gtest.h>

#include "weir/control/catalog.h"
#include "weir/control/placement.h"
#include "weir/control/v1/catalog.pb.h"
#include "weir/mutex.h"
#include "weir/sources/loadgen/generator.h"

namespace weir::control {
namespace {

using Clock = std::chrono::steady_clock;
using persist::PersistClient;

struct Store {
  std::shared_ptr<persist::Blob> blob;
  std::shared_ptr<persist::Consensus> consensus;

  static Store fresh(const std::string& name) {
    static std::atomic<int> counter{0};
    const std::string url = "mem://replica-" + name + "-" + std::to_string(counter++);
    return {persist::Blob::open(url).value(), persist::Consensus::open(url).value()};
  }
  std::unique_ptr<PersistClient> client() const { return PersistClient::create(blob, consensus); }
};

// weir.health now: object name -> row.
std::map<std::string, std::string> health(PersistClient& client) {
  std::map<std::string, std::string> rows;
  absl::StatusOr<persist::SnapshotCursor> cursor = client.inspect_snapshot(kHealthShard);
  if (!cursor.ok()) return rows;
  while (cursor->next()) {
    if (cursor->diff() <= 0) continue;
    const std::string row(cursor->data());
    rows[row.substr(0, row.find(' '))] = row;
  }
  return rows;
}

using testing::eventually;

bool row_says(PersistClient& client, const std::string& name, const std::string& text) {
  const auto rows = health(client);
  const auto it = rows.find(name);
  return it != rows.end() && absl::StrContains(it->second, text);
}

// A replica on its own thread.
class RunningReplica {
 public:
  explicit RunningReplica(const Store& store, RunnerFactory runners = nullptr,
                          persist::PersistConfig persist = {},
                          const std::function<void(ReplicaOptions&)>& adjust = nullptr) {
    options_.persist = std::move(persist);
    options_.blob = store.blob;
    options_.consensus = store.consensus;
    options_.stop = stop_;
    options_.poll = std::chrono::milliseconds(10);
    options_.backoff_initial = std::chrono::milliseconds(10);
    options_.backoff_max = std::chrono::milliseconds(50);
    options_.runners = std::move(runners);
    options_.on_execution = [this](uint64_t e) { execution_ = e; };
    options_.on_reconciled = [this](const ReplicaState& state) {
      weir::MutexLock lock(mu_);
      states_.push_back(state);
    };
    if (adjust) adjust(options_);
    thread_ = std::thread([this] {
      const absl::Status ended = run_replica(options_);
      weir::MutexLock lock(mu_);
      ended_ = ended;
      done_ = true;
    });
  }
  ~RunningReplica() { (void)stop(); }

  // Stops it (if it still runs) and returns how it ended.
  absl::Status stop() {
    stop_->store(true);
    if (thread_.joinable()) thread_.join();
    weir::MutexLock lock(mu_);
    return ended_;
  }
  bool done() {
    weir::MutexLock lock(mu_);
    return done_;
  }
  uint64_t execution() const { return execution_.load(); }
  size_t reconciliations() {
    weir::MutexLock lock(mu_);
    return states_.size();
  }

 private:
  ReplicaOptions options_;
  std::shared_ptr<std::atomic<bool>> stop_ = std::make_shared<std::atomic<bool>>(false);
  std::atomic<uint64_t> execution_{UINT64_MAX};
  weir::Mutex mu_;
  std::vector<ReplicaState> states_ ABSL_GUARDED_BY(mu_);
  absl::Status ended_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

using testing::make_shard;

// Creates a hold by appending its row by hand, skipping validation (which refuses a hold on a
// shard that does not exist): what a catalog can still hold if the shard goes away.
void create_unchecked(PersistClient& client, const std::string& name, const HoldSpec& spec) {
  v1::CatalogObject object;
  object.set_format_version(1);
  object.set_name(name);
  object.set_object_id("o00000000-0000-4000-8000-000000000001");
  object.set_created_by("test");
  object.mutable_hold()->set_shard(spec.shard);
  object.mutable_hold()->set_reader(spec.reader);
  persist::WriteHandle raw = client.open_writer(kCatalogShard).value();
  const uint64_t v = raw.fetch_recent_upper().value().time();
  object.set_created_version(v);
  ASSERT_TRUE(
      raw.compare_and_append(std::vector<persist::Update>{{object.SerializeAsString(), v, 1}},
                             persist::Frontier(v), persist::Frontier(v + 1))
          ->is_appended());
  ASSERT_TRUE(raw.expire().ok());
}

size_t catalog_holds_on(PersistClient& client, const std::string& shard) {
  size_t holds = 0;
  const persist::ShardDescription described = client.describe(shard).value();
  for (const auto& reader : described.critical_readers) {
    if (reader.purpose.starts_with("catalog hold ")) ++holds;
  }
  return holds;
}

TEST(ReplicaTest, AnObjectThatAppearsRunsAndADroppedOneStopsAndReportsDropped) {
  const Store store = Store::fresh("appear");
  std::unique_ptr<PersistClient> client = store.client();
  make_shard(*client, "bids");
  RunningReplica replica(store);
  ASSERT_TRUE(commit(*client, Change::create("audit", HoldSpec{"bids", "auditor"})).ok());
  ASSERT_TRUE(eventually([&] { return row_says(*client, "audit", "audit running execution=0"); }))
      << health(*client)["audit"];
  EXPECT_EQ(catalog_holds_on(*client, "bids"), 1u);

  ASSERT_TRUE(commit(*client, Change::drop("audit")).ok());
  ASSERT_TRUE(eventually([&] { return row_says(*client, "audit", "audit dropped"); }))
      << health(*client)["audit"];
  EXPECT_EQ(catalog_holds_on(*client, "bids"), 0u) << "dropping a hold releases it";
  EXPECT_TRUE(replica.stop().ok());
}

// The replica waits for news from its client's relay (persist/relay.h), not for its poll: with a
// poll of 30 s, a commit and a successor's start are acted on long before the next poll.
TEST(ReplicaTest, NewsOfACommitOrASuccessorWakesTheReplicaBeforeItsPoll) {
  const Store store = Store::fresh("news");
  std::unique_ptr<PersistClient> client = store.client();
  make_shard(*client, "bids");
  const auto slow_poll = [](ReplicaOptions& options) {
    options.poll = std::chrono::seconds(30);
    options.relay_poll = std::chrono::seconds(30);
  };
  RunningReplica replica(store, nullptr, {}, slow_poll);
  ASSERT_TRUE(eventually([&] { return replica.reconciliations() > 0; }));
  auto start = Clock::now();
  ASSERT_TRUE(commit(*client, Change::create("audit", HoldSpec{"bids", "auditor"})).ok());
  ASSERT_TRUE(eventually([&] { return row_says(*client, "audit", "audit running"); }));
  // Woken by news: the poll would have taken 30 s (a margin of 15 s, not a speed measurement).
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(15));

  start = Clock::now();
  RunningReplica successor(store, nullptr, {}, slow_poll);
  ASSERT_TRUE(eventually([&] { return replica.done(); }));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(15));
  EXPECT_EQ(replica.stop().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(successor.stop().ok());
}

// A replica that stops keeps its declared holds: they have no lease, and the next execution
// takes them up again.
TEST(ReplicaTest, ADeclaredHoldOutlivesItsReplica) {
  const Store store = Store::fresh("outlive");
  std::unique_ptr<PersistClient> client = store.client();
  make_shard(*client, "bids");
  ASSERT_TRUE(commit(*client, Change::create("audit", HoldSpec{"bids", "auditor"})).ok());
  {
    RunningReplica replica(store);
    ASSERT_TRUE(eventually([&] { return row_says(*client, "audit", "running"); }));
    EXPECT_TRUE(replica.stop().ok());
  }
  EXPECT_EQ(catalog_holds_on(*client, "bids"), 1u);
  RunningReplica next(store);
  ASSERT_TRUE(eventually([&] { return row_says(*client, "audit", "running execution=1"); }));
  EXPECT_EQ(catalog_holds_on(*client, "bids"), 1u) << "the same hold, not a second one";
}

// A hold dropped while no replica ran is released by the next one (the catalog no longer names
// it, so no runner of its would see the drop).
TEST(ReplicaTest, AHoldDroppedWhileNoReplicaRanIsReleasedByTheNext) {
  const Store store = Store::fresh("orphan");
  std::unique_ptr<PersistClient> client = store.client();
  make_shard(*client, "bids");
  ASSERT_TRUE(commit(*client, Change::create("audit", HoldSpec{"bids", "auditor"})).ok());
  {
    RunningReplica replica(store);
    ASSERT_TRUE(eventually([&] { return catalog_holds_on(*client, "bids") == 1; }));
    EXPECT_TRUE(replica.stop().ok());
  }
  ASSERT_TRUE(commit(*client, Change::drop("audit")).ok());
  EXPECT_EQ(catalog_holds_on(*client, "bids"), 1u);
  RunningReplica next(store);
  ASSERT_TRUE(eventually([&] { return catalog_holds_on(*client, "bids") == 0; }));
}

TEST(ReplicaTest, AHoldOnAMissingShardStallsAndCreatesNothing) {
  const Store store = Store::fresh("missing");
  std::unique_ptr<PersistClient> client = store.client();
  RunningReplica replica(store);
  EXPECT_EQ(
      commit(*client, Change::create("audit", HoldSpec{"nowhere", "auditor"})).status().code(),
      absl::StatusCode::kFailedPrecondition);
  create_unchecked(*client, "audit", HoldSpec{"nowhere", "auditor"});
  // One look at the row: between restarts (every 10 to 50 ms here) it says starting again.
  ASSERT_TRUE(eventually([&] {
    const std::string row = health(*client)["audit"];
    return absl::StrContains(row, "audit stalled") &&
           absl::StrContains(row, "waiting for shard \"nowhere\"");
  })) << health(*client)["audit"];
  EXPECT_FALSE(client->find_shard("nowhere").value().has_value());
  // Once the shard exists, a restart after the backoff holds it.
  make_shard(*client, "nowhere");
  ASSERT_TRUE(eventually([&] { return row_says(*client, "audit", "audit running"); }))
      << health(*client)["audit"];
  EXPECT_EQ(catalog_holds_on(*client, "nowhere"), 1u);
}

// A runner that keeps trying by itself (an ingestion backing off) says so: the object shows
// stalled with the reason while it does, and running again after, with no restart counted.
TEST(ReplicaTest, ARunnerThatBacksOffByItselfShowsStalledThenRunning) {
  const Store store = Store::fresh("backoff");
  std::unique_ptr<PersistClient> client = store.client();
  make_shard(*client, "bids");
  auto phase = std::make_shared<std::atomic<int>>(0);  // The test moves it on.
  RunnerFactory runners = [phase](const CatalogObject&) -> absl::StatusOr<Runner> {
    return Runner([phase](const RunContext& ctx) -> absl::Status {
      ctx.running();
      while (phase->load() < 1 && !ctx.stop->load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      ctx.stalled(absl::UnavailableError("upstream down"));
      ctx.stalled(absl::UnavailableError("upstream still down"));  // Told once.
      while (phase->load() < 2 && !ctx.stop->load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      ctx.running();
      while (!ctx.stop->load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return absl::OkStatus();
    });
  };
  RunningReplica replica(store, runners);
  ASSERT_TRUE(commit(*client, Change::create("audit", HoldSpec{"bids", "auditor"})).ok());
  ASSERT_TRUE(eventually([&] { return row_says(*client, "audit", "audit running"); }));
  phase->store(1);
  ASSERT_TRUE(eventually([&] {
    return row_says(*client, "audit", "audit stalled") &&
           row_says(*client, "audit", "UNAVAILABLE: upstream down");
  })) << health(*client)["audit"];
  EXPECT_TRUE(row_says(*client, "audit", "restarts=0"));
  phase->store(2);
  ASSERT_TRUE(eventually([&] { return row_says(*client, "audit", "audit running"); }))
      << health(*client)["audit"];
  EXPECT_TRUE(replica.stop().ok());
}

TEST(ReplicaTest, AFailingRunnerStallsThenRestartsAfterABackoff) {
  const Store store = Store::fresh("restart");
  std::unique_ptr<PersistClient> client = store.client();
  auto attempts = std::make_shared<std::atomic<int>>(0);
  RunnerFactory runners = [attempts](const CatalogObject&) -> absl::StatusOr<Runner> {
    return Runner([attempts](const RunContext& ctx) -> absl::Status {
      if (++*attempts <= 2) return absl::UnavailableError("upstream is down (test)");
      ctx.running();
      while (!ctx.stop->load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return absl::OkStatus();
    });
  };
  RunningReplica replica(store, runners);
  make_shard(*client, "x");
  ASSERT_TRUE(commit(*client, Change::create("flaky", HoldSpec{"x", "y"})).ok());
  ASSERT_TRUE(eventually([&] { return row_says(*client, "flaky", "flaky running"); }))
      << health(*client)["flaky"];
  EXPECT_TRUE(row_says(*client, "flaky", "restarts=2"));
  EXPECT_EQ(attempts->load(), 3);
}

// The consolidated contents of `shard` at `as_of`.
std::map<std::string, int64_t> contents(PersistClient& client, const std::string& shard,
                                        uint64_t as_of) {
  std::map<std::string, int64_t> rows;
  absl::StatusOr<persist::SnapshotCursor> cursor = client.inspect_snapshot(shard, as_of);
  EXPECT_TRUE(cursor.ok()) << cursor.status();
  if (!cursor.ok()) return rows;
  while (cursor->next()) rows[std::string(cursor->data())] += cursor->diff();
  EXPECT_TRUE(cursor->status().ok()) << cursor->status();
  std::erase_if(rows, [](const auto& row) { return row.second == 0; });
  return rows;
}

SourceSpec auction_until(uint64_t until) {
  return {.source = "loadgen:auction",
          .options = {{"compaction-window", "18446744073709551615"},
                      {"rate", "0"},
                      {"scale", "5"},
                      {"until", std::to_string(until)}},
          .tables = {}};
}

// A source and a view over it, created in the catalog, are run by the replica: the source's
// shards equal the generator's state, the view follows them, and both report their health.
TEST(ReplicaTest, ACatalogSourceAndAViewOverItRun) {
  const Store store = Store::fresh("source");
  std::unique_ptr<PersistClient> client = store.client();
  RunningReplica replica(store);
  constexpr uint64_t kUntil = 3000;
  ASSERT_TRUE(commit(*client, Change::create("auction", auction_until(kUntil))).ok());
  ASSERT_TRUE(eventually([&] { return row_says(*client, "auction", "auction completed"); }))
      << health(*client)["auction"];
  sources::loadgen::GeneratorOptions generator_options;
  generator_options.kind = "auction";
  generator_options.scale = 5;
  auto generator = sources::loadgen::Generator::make(generator_options).value();
  for (const std::string table : {"users", "auctions", "bids"}) {
    const uint32_t t = *generator.table_index(table);
    EXPECT_TRUE(contents(*client, "auction." + table, kUntil) == generator.state_at(t, kUntil))
        << table;
  }
  ASSERT_TRUE(
      commit(*client, Change::create("top-bids", ViewSpec{"max-bid", {}, "view.max-bid"})).ok());
  ASSERT_TRUE(eventually([&] {
    auto d = client->describe("view.max-bid");
    return d.ok() && !d->upper.is_empty() && d->upper.time() >= kUntil + 1;
  })) << health(*client)["top-bids"];
  EXPECT_TRUE(row_says(*client, "top-bids", "top-bids running"));
  EXPECT_FALSE(contents(*client, "view.max-bid", kUntil).empty());

  // Dropping the view lets go of its holds on its inputs: nothing else will (a view's holds have
  // no lease), and they would keep the inputs' history forever.
  const auto view_holds = [&] {
    size_t holds = 0;
    for (const std::string table : {"auctions", "bids"}) {
      const persist::ShardDescription d = client->describe("auction." + table).value();
      for (const auto& reader : d.critical_readers) {
        if (reader.purpose.starts_with("weir view")) ++holds;
      }
    }
    return holds;
  };
  EXPECT_GT(view_holds(), 0u);
  ASSERT_TRUE(commit(*client, Change::drop("top-bids")).ok());
  ASSERT_TRUE(eventually([&] { return row_says(*client, "top-bids", "top-bids dropped"); }));
  EXPECT_EQ(view_holds(), 0u) << "a dropped view still holds its inputs back";
  EXPECT_TRUE(replica.stop().ok());
}

// A declared hold keeps its shard's since through a silence longer than any lease (the clock moved
// ten minutes on; GC runs) while the source's ingestion compacts up to its window; dropping it
// lets the since advance.
TEST(ReplicaTest, ADeclaredHoldKeepsTheSinceThroughASilenceUntilItIsDropped) {
  const Store store = Store::fresh("silence");
  std::unique_ptr<PersistClient> client = store.client();
  auto offset = std::make_shared<std::atomic<int64_t>>(0);  // Minutes added to the clock.
  persist::PersistConfig config;
  config.clock = [offset] { return absl::Now() + absl::Minutes(offset->load()); };
  config.reader_lease = absl::Seconds(30);
  RunningReplica replica(store, nullptr, config);
  SourceSpec source = auction_until(40000);
  for (SourceOption& option : source.options) {
    if (option.key == "compaction-window") option.value = "0";
    if (option.key == "rate") option.value = "4000";
  }
  ASSERT_TRUE(commit(*client, Change::create("auction", source)).ok());
  ASSERT_TRUE(eventually([&] {
    auto d = client->describe("auction.bids");
    return d.ok() && !d->upper.is_empty() && d->upper.time() > 1000;
  }));
  ASSERT_TRUE(commit(*client, Change::create("audit", HoldSpec{"auction.bids", "auditor"})).ok());
  ASSERT_TRUE(eventually([&] { return row_says(*client, "audit", "audit running"); }))
      << health(*client)["audit"];
  const persist::Frontier held = client->describe("auction.bids").value().since;
  // Ten minutes of silence from the hold, as far as leases can tell.
  *offset = 10;
  std::unique_ptr<PersistClient> later = PersistClient::create(store.blob, store.consensus, config);
  ASSERT_TRUE(eventually([&] {
    auto d = client->describe("auction.bids");
    return d.ok() && !d->upper.is_empty() && d->upper.time() > 20000;
  })) << health(*client)["auction"];
  ASSERT_TRUE(later->gc("auction.bids").ok());
  ASSERT_TRUE(later->compact("auction.bids").ok());
  EXPECT_EQ(client->describe("auction.bids").value().since, held)
      << "the since moved past the declared hold";
  EXPECT_EQ(catalog_holds_on(*client, "auction.bids"), 1u);

  ASSERT_TRUE(commit(*client, Change::drop("audit")).ok());
  ASSERT_TRUE(eventually([&] {
    const persist::Frontier since = client->describe("auction.bids").value().since;
    return !since.is_empty() && since.time() > held.time() + 10000;
  })) << "the since stayed at "
      << client->describe("auction.bids").value().since.to_string();
}

// Rows written around `weir ctl` are validated by the replica before it runs them: a hold on
// weir's own health relation (which would keep its whole history) is reported, not run.
TEST(ReplicaTest, AnObjectWrittenAroundValidationIsReportedNotRun) {
  const Store store = Store::fresh("unchecked");
  std::unique_ptr<PersistClient> client = store.client();
  EXPECT_EQ(commit(*client, Change::create("pin", HoldSpec{kHealthShard, "x"})).status().code(),
            absl::StatusCode::kInvalidArgument);
  create_unchecked(*client, "pin", HoldSpec{kHealthShard, "x"});
  RunningReplica replica(store);
  ASSERT_TRUE(eventually([&] { return row_says(*client, "pin", "invalid catalog object"); }))
      << health(*client)["pin"];
  EXPECT_EQ(catalog_holds_on(*client, kHealthShard), 0u);
}

// A row written around `weir ctl` under a name no create allows ("audit stalled ...": spaces,
// the words of a health row) is reported under an escaped name, never as another object's row.
TEST(ReplicaTest, AHostileObjectNameCannotForgeAnotherObjectsHealthRow) {
  const Store store = Store::fresh("hostile-name");
  std::unique_ptr<PersistClient> client = store.client();
  make_shard(*client, "bids");
  ASSERT_TRUE(commit(*client, Change::create("audit", HoldSpec{"bids", "auditor"})).ok());
  create_unchecked(*client, "audit stalled execution=0 object=o1 restarts=7 error=forged\nx",
                   HoldSpec{"bids", "x"});
  RunningReplica replica(store);
  ASSERT_TRUE(eventually([&] { return row_says(*client, "audit", "audit running"); }));
  ASSERT_TRUE(eventually([&] {
    for (const auto& [name, row] : health(*client)) {
      if (absl::StrContains(row, "invalid catalog object")) return true;
    }
    return false;
  }));
  std::vector<std::string> rows;
  for (const auto& [name, row] : health(*client)) rows.push_back(row);
  size_t audits = 0;
  for (const std::string& row : rows) {
    if (row.starts_with("audit ")) ++audits;
    EXPECT_EQ(row.find('\n'), std::string::npos) << row;
  }
  EXPECT_EQ(audits, 1u) << absl::StrJoin(rows, "\n");
  EXPECT_TRUE(replica.stop().ok());
}

// A replace keeps the object's id: the replica still restarts its runner with the new spec.
TEST(ReplicaTest, AReplacedHoldMovesToItsNewShard) {
  const Store store = Store::fresh("replace");
  std::unique_ptr<PersistClient> client = store.client();
  make_shard(*client, "bids");
  make_shard(*client, "asks");
  RunningReplica replica(store);
  ASSERT_TRUE(commit(*client, Change::create("audit", HoldSpec{"bids", "auditor"})).ok());
  ASSERT_TRUE(eventually([&] { return catalog_holds_on(*client, "bids") == 1; }));
  ASSERT_TRUE(commit(*client, Change::replace("audit", HoldSpec{"asks", "auditor"})).ok());
  ASSERT_TRUE(eventually([&] { return catalog_holds_on(*client, "asks") == 1; }))
      << health(*client)["audit"];
  EXPECT_EQ(catalog_holds_on(*client, "bids"), 0u) << "the old shard's hold was let go";
}

// Hostile bytes in the catalog: the replica reports the catalog stalled, keeps what runs, and
// drops nothing.
TEST(ReplicaTest, ACatalogThatDoesNotDecodeKeepsTheRunningObjects) {
  const Store store = Store::fresh("hostile");
  std::unique_ptr<PersistClient> client = store.client();
  make_shard(*client, "bids");
  RunningReplica replica(store);
  ASSERT_TRUE(commit(*client, Change::create("audit", HoldSpec{"bids", "auditor"})).ok());
  ASSERT_TRUE(eventually([&] { return row_says(*client, "audit", "running"); }));
  {
    persist::WriteHandle raw = client->open_writer(kCatalogShard).value();
    const uint64_t v = raw.fetch_recent_upper().value().time();
    ASSERT_TRUE(raw.compare_and_append(std::vector<persist::Update>{{"\xff garbage", v, 1}},
                                       persist::Frontier(v), persist::Frontier(v + 1))
                    ->is_appended());
    ASSERT_TRUE(raw.expire().ok());
  }
  ASSERT_TRUE(eventually([&] { return row_says(*client, "weir.catalog", "stalled"); }))
      << health(*client)["weir.catalog"];
  EXPECT_TRUE(row_says(*client, "weir.catalog", "DATA_LOSS"));
  EXPECT_TRUE(row_says(*client, "audit", "running"));
  EXPECT_EQ(catalog_holds_on(*client, "bids"), 1u);
  EXPECT_FALSE(replica.done());
}

// Split brain in one process: a second execution fences the first, which stops everything and
// names its successor; weir.health never goes back to the first's rows.
TEST(ReplicaTest, ASecondReplicaFencesTheFirst) {
  const Store store = Store::fresh("split");
  std::unique_ptr<PersistClient> client = store.client();
  make_shard(*client, "bids");
  ASSERT_TRUE(commit(*client, Change::create("audit", HoldSpec{"bids", "auditor"})).ok());
  RunningReplica first(store);
  ASSERT_TRUE(eventually([&] { return row_says(*client, "audit", "running execution=0"); }));
  RunningReplica second(store);
  ASSERT_TRUE(eventually([&] { return first.done(); })) << "the first did not notice the second";
  const absl::Status ended = first.stop();
  EXPECT_EQ(ended.code(), absl::StatusCode::kFailedPrecondition) << ended;
  EXPECT_TRUE(absl::StrContains(ended.message(), "replica execution 0 is fenced by execution 1"))
      << ended;
  ASSERT_TRUE(eventually([&] { return row_says(*client, "audit", "running execution=1"); }))
      << health(*client)["audit"];
  for (int i = 0; i < 20; ++i) {
    for (const auto& [name, row] : health(*client)) {
      EXPECT_FALSE(absl::StrContains(row, "execution=0")) << row;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(catalog_holds_on(*client, "bids"), 1u);
  EXPECT_TRUE(second.stop().ok());
}

// The states of `name`'s transitions in weir.health_history, in order, as "STATE@EXECUTION".
std::vector<std::string> history_of(PersistClient& client, const std::string& name) {
  std::vector<std::string> states;
  const std::vector<HealthTransition> transitions = read_health_history(client, name).value();
  for (const HealthTransition& t : transitions) {
    states.push_back(absl::StrCat(t.state, "@", t.execution));
  }
  return states;
}

// Each transition is one row of weir.health_history, in order, and on_health saw each one.
TEST(ReplicaTest, EachHealthTransitionIsRecordedOnceInTheHistory) {
  const Store store = Store::fresh("history");
  std::unique_ptr<PersistClient> client = store.client();
  make_shard(*client, "bids");
  auto seen = std::make_shared<std::vector<std::string>>();
  auto seen_mu = std::make_shared<weir::Mutex>();
  RunningReplica replica(store, nullptr, {}, [seen, seen_mu](ReplicaOptions& options) {
    options.on_health = [seen, seen_mu](const HealthTransition& t) {
      weir::MutexLock lock(*seen_mu);
      if (t.name == "audit") seen->push_back(t.state);
    };
  });
  ASSERT_TRUE(commit(*client, Change::create("audit", HoldSpec{"bids", "auditor"})).ok());
  ASSERT_TRUE(eventually([&] { return row_says(*client, "audit", "audit running"); }));
  ASSERT_TRUE(commit(*client, Change::drop("audit")).ok());
  ASSERT_TRUE(eventually([&] { return row_says(*client, "audit", "audit dropped"); }));
  EXPECT_TRUE(replica.stop().ok());
  EXPECT_EQ(history_of(*client, "audit"),
            (std::vector<std::string>{"starting@0", "running@0", "dropped@0"}));
  const std::vector<HealthTransition> all = read_health_history(*client).value();
  for (size_t i = 1; i < all.size(); ++i) EXPECT_LT(all[i - 1].seq, all[i].seq);
  for (const HealthTransition& t : all) {
    if (t.name == "audit") {
      EXPECT_TRUE(t.object_id.starts_with("o")) << t.object_id;
    }
  }
  weir::MutexLock lock(*seen_mu);
  EXPECT_EQ(*seen, (std::vector<std::string>{"starting", "running", "dropped"}));
}

// Updates in the shard now (after a full compaction: the consolidated rows).
uint64_t updates_in(PersistClient& client, const std::string& shard) {
  uint64_t updates = 0;
  // Held in a local: a range-for over a temporary's member dangles (the StatusOr dies first).
  const persist::ShardDescription described = client.describe(shard).value();
  for (const auto& batch : described.batches) updates += batch.num_updates;
  return updates;
}

// Rows older than the retention are retracted (the clock moved on two hours), the newest
// health_history_per_object of a name are kept, a row that does not parse is retracted, and the
// since follows, so that a compaction leaves only the rows kept.
TEST(ReplicaTest, HistoryRowsPastRetentionAreRetractedAndCompactedAway) {
  const Store store = Store::fresh("retention");
  std::unique_ptr<PersistClient> client = store.client();
  {
    // Rows written around the replica: one that does not parse, one that claims to be of an
    // execution that has not started.
    persist::WriteHandle raw = client->open_writer(kHealthHistoryShard).value();
    const std::string future =
        absl::StrCat("audit running execution=99 object=o1 restarts=0 seq=0 at=",
                     absl::ToUnixMillis(absl::Now()));
    ASSERT_TRUE(
        raw.compare_and_append(std::vector<persist::Update>{{"\xff garbage", 0, 1}, {future, 0, 1}},
                               persist::Frontier(0), persist::Frontier(1))
            ->is_appended());
    ASSERT_TRUE(raw.expire().ok());
  }
  auto offset = std::make_shared<std::atomic<int64_t>>(0);  // Minutes added to the clock.
  persist::PersistConfig config;
  config.clock = [offset] { return absl::Now() + absl::Minutes(offset->load()); };
  auto attempts = std::make_shared<std::atomic<int>>(0);
  RunnerFactory runners = [attempts](const CatalogObject& object) -> absl::StatusOr<Runner> {
    return Runner([attempts, name = object.name](const RunContext& ctx) -> absl::Status {
      if (name == "flaky" && ++*attempts <= 5) return absl::UnavailableError("down (test)");
      ctx.running();
      while (!ctx.stop->load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return absl::OkStatus();
    });
  };
  RunningReplica replica(store, runners, config, [](ReplicaOptions& options) {
    options.health_retention = std::chrono::hours(1);
    options.health_history_per_object = 4;
  });
  make_shard(*client, "x");
  ASSERT_TRUE(commit(*client, Change::create("audit", HoldSpec{"x", "y"})).ok());
  ASSERT_TRUE(commit(*client, Change::create("flaky", HoldSpec{"x", "z"})).ok());
  ASSERT_TRUE(eventually([&] { return row_says(*client, "flaky", "flaky running"); }));
  ASSERT_TRUE(eventually([&] { return row_says(*client, "audit", "audit running"); }));
  // flaky: starting, stalled five times over, then running: twelve transitions, the newest four
  // kept.
  ASSERT_TRUE(eventually([&] {
    return history_of(*client, "flaky") ==
           std::vector<std::string>{"starting@0", "stalled@0", "starting@0", "running@0"};
  })) << absl::StrJoin(history_of(*client, "flaky"), " ");
  EXPECT_TRUE(eventually([&] {
    return history_of(*client, "audit") == std::vector<std::string>{"starting@0", "running@0"};
  })) << absl::StrJoin(history_of(*client, "audit"), " ");
  EXPECT_FALSE(contents(*client, kHealthHistoryShard,
                        client->describe(kHealthHistoryShard).value().upper.time() - 1)
                   .contains("\xff garbage"));

  // Two hours on: every row is past the retention.
  *offset = 120;
  ASSERT_TRUE(eventually([&] { return read_health_history(*client).value().empty(); }))
      << absl::StrJoin(history_of(*client, "audit"), " ");
  EXPECT_TRUE(row_says(*client, "audit", "audit running")) << "weir.health keeps the state";
  const persist::ShardDescription described = client->describe(kHealthHistoryShard).value();
  ASSERT_FALSE(described.since.is_empty());
  EXPECT_EQ(described.since.time() + 1, described.upper.time()) << "the since follows the upper";
  ASSERT_TRUE(client->compact(kHealthHistoryShard, {.full = true}).ok());
  EXPECT_EQ(updates_in(*client, kHealthHistoryShard), 0u) << "the retracted rows stayed";

  // A transition after that is recorded as usual.
  ASSERT_TRUE(commit(*client, Change::drop("audit")).ok());
  ASSERT_TRUE(eventually([&] { return history_of(*client, "audit").size() == 1; }));
  EXPECT_EQ(history_of(*client, "audit"), std::vector<std::string>{"dropped@0"});
  EXPECT_TRUE(replica.stop().ok());
}

// A predecessor's late transition (its runner reports running after a successor claimed the
// relations) changes neither weir.health nor weir.health_history.
TEST(ReplicaTest, AStaleExecutionsLateTransitionChangesNeitherHealthNorHistory) {
  const Store store = Store::fresh("stale-history");
  std::unique_ptr<PersistClient> client = store.client();
  make_shard(*client, "bids");
  ASSERT_TRUE(commit(*client, Change::create("audit", HoldSpec{"bids", "auditor"})).ok());
  auto release = std::make_shared<std::atomic<bool>>(false);
  // Execution 0's runner reports running only once released, whatever its stop says.
  RunnerFactory runners = [release](const CatalogObject&) -> absl::StatusOr<Runner> {
    return Runner([release](const RunContext& ctx) -> absl::Status {
      if (ctx.execution == 0) {
        while (!release->load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      ctx.running();
      while (!ctx.stop->load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return absl::OkStatus();
    });
  };
  RunningReplica first(store, runners);
  ASSERT_TRUE(eventually([&] { return row_says(*client, "audit", "starting execution=0"); }));
  RunningReplica second(store, runners);
  // weir.health is written before weir.health_history: wait for the history to catch up.
  const std::vector<std::string> before{"starting@0", "starting@1", "running@1"};
  ASSERT_TRUE(eventually([&] { return history_of(*client, "audit") == before; }))
      << absl::StrJoin(history_of(*client, "audit"), " ");
  ASSERT_TRUE(row_says(*client, "audit", "running execution=1"));
  release->store(true);
  const absl::Status ended = first.stop();
  EXPECT_EQ(ended.code(), absl::StatusCode::kFailedPrecondition) << ended;
  EXPECT_TRUE(row_says(*client, "audit", "running execution=1")) << health(*client)["audit"];
  EXPECT_EQ(history_of(*client, "audit"), before);
  EXPECT_TRUE(second.stop().ok());
}

// The since of `shard`'s critical reader `id` (a catalog hold's: "c" and its object's uuid).
std::optional<uint64_t> hold_since(PersistClient& client, const std::string& shard,
                                   const std::string& object_id) {
  const persist::ShardDescription described = client.describe(shard).value();
  for (const auto& reader : described.critical_readers) {
    if (reader.reader_id == "c" + object_id.substr(1) && !reader.since.is_empty()) {
      return reader.since.time();
    }
  }
  return std::nullopt;
}

// A hold advanced in the catalog (a replace that moves its since) has its since moved forward by
// the replica, without being let go in between; moving it back is refused with nothing committed.
TEST(ReplicaTest, AnAdvancedHoldMovesItsSinceForward) {
  const Store store = Store::fresh("advance");
  std::unique_ptr<PersistClient> client = store.client();
  make_shard(*client, "bids", 10);
  RunningReplica replica(store);
  const CommittedChange created =
      commit(*client, Change::create("audit", HoldSpec{"bids", "auditor"})).value();
  const std::string id = created.object.object_id;
  ASSERT_TRUE(eventually([&] { return hold_since(*client, "bids", id).has_value(); }));
  EXPECT_EQ(hold_since(*client, "bids", id), 0u);

  ASSERT_TRUE(
      commit(*client,
             Change::replace("audit", HoldSpec{.shard = "bids", .reader = "auditor", .since = 6}))
          .ok());
  ASSERT_TRUE(eventually([&] { return hold_since(*client, "bids", id) == 6u; }))
      << hold_since(*client, "bids", id).value_or(999);
  EXPECT_EQ(catalog_holds_on(*client, "bids"), 1u);
  EXPECT_EQ(client->describe("bids").value().since, persist::Frontier(6));
  ASSERT_TRUE(eventually([&] { return row_says(*client, "audit", "audit running"); }));

  const uint64_t upper = client->describe(kCatalogShard).value().upper.time();
  const absl::Status back =
      commit(*client,
             Change::replace("audit", HoldSpec{.shard = "bids", .reader = "auditor", .since = 4}))
          .status();
  EXPECT_EQ(back.code(), absl::StatusCode::kFailedPrecondition) << back;
  EXPECT_TRUE(absl::StrContains(back.message(), "only moves forward")) << back;
  EXPECT_EQ(client->describe(kCatalogShard).value().upper.time(), upper) << "it committed";
  EXPECT_EQ(hold_since(*client, "bids", id), 6u);
}

TEST(ReplicaTest, AHealthRetentionOfZeroIsRefused) {
  const Store store = Store::fresh("retention-zero");
  ReplicaOptions options;
  options.blob = store.blob;
  options.consensus = store.consensus;
  options.health_retention = std::chrono::milliseconds(0);
  EXPECT_EQ(run_replica(options).code(), absl::StatusCode::kInvalidArgument);
  options.health_retention = std::chrono::hours(1);
  options.health_history_per_object = 0;
  EXPECT_EQ(run_replica(options).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(store.client()->find_shard(kExecutionsShard).value().has_value())
      << "a refused start takes no execution";
}

// Two processes of one execution, in-process, the way run_replica_cluster wires them: process 1
// forwards its health transitions to process 0, which records them.
struct HealthMailbox {
  weir::Mutex mu;
  std::vector<HealthTransition> rows ABSL_GUARDED_BY(mu);
};

std::function<void(ReplicaOptions&)> as_process(size_t process, uint64_t execution,
                                                std::shared_ptr<HealthMailbox> mail) {
  return [=](ReplicaOptions& options) {
    options.processes = 2;
    options.process = process;
    options.execution = execution;
    if (process > 0) {
      options.forward_health = [mail](const HealthTransition& t) {
        weir::MutexLock lock(mail->mu);
        mail->rows.push_back(t);
      };
    } else {
      options.take_forwarded_health = [mail] {
        weir::MutexLock lock(mail->mu);
        return std::exchange(mail->rows, {});
      };
    }
  };
}

// An object dropped and created again under its name gets a new id, so in a cluster it may move
// to another process. The old process's "dropped" reaches process 0 late (forwarded, after its
// runner stopped): it must not overwrite the new object's row in weir.health.
TEST(ReplicaTest, AClusterProcesssLateDroppedDoesNotOverwriteTheRecreatedObjectsRow) {
  const Store store = Store::fresh("cluster-recreate");
  std::unique_ptr<PersistClient> client = store.client();
  make_shard(*client, "bids");
  // "x" on process 1.
  std::string old_id;
  for (int i = 0; i < 64 && old_id.empty(); ++i) {
    const CommittedChange made =
        commit(*client, Change::create("x", HoldSpec{"bids", "r"})).value();
    if (placement(made.object.object_id, 2) == 1) {
      old_id = made.object.object_id;
    } else {
      ASSERT_TRUE(commit(*client, Change::drop("x")).ok());
    }
  }
  ASSERT_FALSE(old_id.empty());
  // The old object's runner takes a while to stop.
  RunnerFactory runners = [old_id](const CatalogObject& object) -> absl::StatusOr<Runner> {
    const bool slow = object.object_id == old_id;
    return Runner([slow](const RunContext& ctx) -> absl::Status {
      ctx.running();
      while (!ctx.stop->load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      return absl::OkStatus();
    });
  };
  const uint64_t execution = take_execution(*client, 2).value();
  auto mail = std::make_shared<HealthMailbox>();
  RunningReplica zero(store, runners, {}, as_process(0, execution, mail));
  RunningReplica one(store, runners, {}, as_process(1, execution, mail));
  ASSERT_TRUE(eventually([&] { return row_says(*client, "x", "object=" + old_id); }));
  ASSERT_TRUE(eventually([&] { return row_says(*client, "x", "x running"); }))
      << health(*client)["x"];
  // Created again until it lands on process 0.
  std::string new_id;
  for (int i = 0; i < 64 && new_id.empty(); ++i) {
    ASSERT_TRUE(commit(*client, Change::drop("x")).ok());
    const CommittedChange made =
        commit(*client, Change::create("x", HoldSpec{"bids", "r"})).value();
    if (placement(made.object.object_id, 2) == 0) new_id = made.object.object_id;
  }
  ASSERT_FALSE(new_id.empty());
  ASSERT_TRUE(eventually([&] {
    return row_says(*client, "x",
                    "x running execution=" + std::to_string(execution) + " object=" + new_id);
  })) << health(*client)["x"];
  // Every late transition of the old object has had time to arrive.
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  EXPECT_TRUE(row_says(*client, "x",
                       "x running execution=" + std::to_string(execution) + " object=" + new_id))
      << health(*client)["x"];
  EXPECT_TRUE(one.stop().ok());
  EXPECT_TRUE(zero.stop().ok());
}

}  // namespace
}  // namespace weir::control
