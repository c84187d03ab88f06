// The catalog: racing committers lose nothing, a stale committer re-validates, a lost reply lands
// a change once, hostile bytes are refused (and never built upon), names are validated.

#include "weir/control/catalog.h"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "testing/harness.h"
#include <gtest/gtest.h>

#include "weir/control/v1/catalog.pb.h"
#include "weir/control/validate.h"
#include "weir/mutex.h"
#include "weir/persist/faults.h"

namespace weir::control {
namespace {

using persist::PersistClient;

// A fresh in-memory store that several clients can share, with a shard "bids" for holds to hold
// (validation refuses a hold on a shard that does not exist).
struct Store {
  std::shared_ptr<persist::Blob> blob;
  std::shared_ptr<persist::Consensus> consensus;

  static Store fresh(const std::string& name) {
    static std::atomic<int> counter{0};
    const std::string url = "mem://control-" + name + "-" + std::to_string(counter++);
    Store store{persist::Blob::open(url).value(), persist::Consensus::open(url).value()};
    persist::WriteHandle bids = store.client()->open_writer("bids").value();
    EXPECT_TRUE(bids.expire().ok());
    return store;
  }
  std::unique_ptr<PersistClient> client() const { return PersistClient::create(blob, consensus); }
};

// The catalog shard's upper: the number of versions (0 if there is no shard).
uint64_t upper(PersistClient& client) {
  absl::StatusOr<persist::ShardDescription> described = client.describe(kCatalogShard);
  if (absl::IsNotFound(described.status())) return 0;
  EXPECT_TRUE(described.ok()) << described.status();
  return described.ok() ? described->upper.time() : 0;
}

std::set<std::string> names(const CatalogSnapshot& catalog) {
  std::set<std::string> result;
  for (const auto& [name, object] : catalog.objects) result.insert(name);
  return result;
}

// A hold on "bids"; (reader, shard) is unique among live holds.
HoldSpec hold(const std::string& reader) { return {.shard = "bids", .reader = reader}; }

// Checks that `changes` (from version 0) are a valid serial order: versions dense from 0, every
// create of a name not live, every drop and replace of a live one. Returns the live names.
std::set<std::string> replay(const std::vector<CommittedChange>& changes) {
  std::set<std::string> live;
  for (size_t i = 0; i < changes.size(); ++i) {
    const CommittedChange& change = changes[i];
    EXPECT_EQ(change.version, i);
    const bool was_live = live.contains(change.object.name);
    switch (change.kind) {
      case ChangeKind::kCreate:
        EXPECT_FALSE(was_live) << "version " << i << " creates a live name " << change.object.name;
        live.insert(change.object.name);
        break;
      case ChangeKind::kDrop:
        EXPECT_TRUE(was_live) << "version " << i << " drops " << change.object.name
                              << ", which is not live";
        live.erase(change.object.name);
        break;
      case ChangeKind::kReplace:
        EXPECT_TRUE(was_live) << "version " << i << " replaces " << change.object.name
                              << ", which is not live";
        break;
    }
  }
  return live;
}

// Two committers, each on its own client of one store, race: each creates its own 100 names and
// drops every other one right after creating the next (150 changes each). Every commit lands at
// the version it reports, nothing is lost or doubled, and the log is a valid serial order.
TEST(CatalogTest, TwoWritersRacing100ChangesEachLoseNothing) {
  testing::Watchdog watchdog("TwoWritersRacing100ChangesEachLoseNothing");
  const Store store = Store::fresh("race");
  struct Committed {
    ChangeKind kind;
    std::string name;
  };
  std::map<uint64_t, Committed> committed[2];
  std::atomic<int> ready{0};
  const auto run = [&](int w) {
    std::unique_ptr<PersistClient> client = store.client();
    const auto commit_one = [&](const Change& change) {
      absl::StatusOr<CommittedChange> result = commit(*client, change);
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(result->object.name, change.name);
      committed[w].emplace(result->version, Committed{change.kind, change.name});
    };
    ++ready;
    while (ready.load() < 2) std::this_thread::yield();
    for (int i = 0; i < 100; ++i) {
      const std::string prefix = "w" + std::to_string(w) + "-";
      commit_one(Change::create(prefix + std::to_string(i), hold(prefix + std::to_string(i))));
      if (i % 2 == 1) commit_one(Change::drop(prefix + std::to_string(i - 1)));
    }
  };
  std::thread first(run, 0);
  std::thread second(run, 1);
  first.join();
  second.join();
  ASSERT_EQ(committed[0].size(), 150u);
  ASSERT_EQ(committed[1].size(), 150u);

  std::unique_ptr<PersistClient> client = store.client();
  absl::StatusOr<CatalogSnapshot> catalog = read(*client);
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  EXPECT_EQ(catalog->version, 300u);
  std::set<std::string> expected;
  for (int w = 0; w < 2; ++w) {
    for (int i = 1; i < 100; i += 2)
      expected.insert("w" + std::to_string(w) + "-" + std::to_string(i));
  }
  EXPECT_EQ(names(*catalog), expected);

  absl::StatusOr<std::vector<CommittedChange>> log = history(*client);
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_EQ(log->size(), 300u);
  EXPECT_EQ(replay(*log), expected);
  // Each version is the change its committer was told it is; the two committers interleaved.
  for (int w = 0; w < 2; ++w) {
    for (const auto& [version, change] : committed[w]) {
      ASSERT_LT(version, log->size());
      EXPECT_EQ((*log)[version].kind, change.kind) << "version " << version;
      EXPECT_EQ((*log)[version].object.name, change.name) << "version " << version;
    }
  }
  EXPECT_LT(committed[0].begin()->first, committed[1].rbegin()->first);
  EXPECT_LT(committed[1].begin()->first, committed[0].rbegin()->first);
}

// A Blob that runs `hook` (once) before the first part is written: between a commit's validation
// and its append, which is when a concurrent commit makes it stale.
class HookedBlob final : public persist::Blob {
 public:
  explicit HookedBlob(std::shared_ptr<persist::Blob> inner) : inner_(std::move(inner)) {}
  void before_next_set(std::function<void()> hook) {
    weir::MutexLock lock(mu_);
    hook_ = std::move(hook);
  }
  absl::StatusOr<std::optional<std::string>> get(std::string_view key) override {
    return inner_->get(key);
  }
  absl::Status set(std::string_view key, std::string_view value) override {
    std::function<void()> hook;
    {
      weir::MutexLock lock(mu_);
      hook = std::exchange(hook_, nullptr);
    }
    if (hook) hook();
    return inner_->set(key, value);
  }
  absl::Status remove(std::string_view key) override { return inner_->remove(key); }
  absl::StatusOr<std::vector<persist::BlobMetadata>> list_keys(std::string_view prefix) override {
    return inner_->list_keys(prefix);
  }

 private:
  std::shared_ptr<persist::Blob> inner_;
  weir::Mutex mu_;
  std::function<void()> hook_ ABSL_GUARDED_BY(mu_);
};

// Two commits of the same name: the one that validated first but appends second finds the version
// taken, reads again, and fails with a conflict naming the version that beat it; nothing of it is
// written. The same for two drops.
TEST(CatalogTest, AStaleWriterRevalidatesAndReportsAConflict) {
  const Store store = Store::fresh("stale");
  auto hooked = std::make_shared<HookedBlob>(store.blob);
  std::unique_ptr<PersistClient> stale = PersistClient::create(hooked, store.consensus);
  std::unique_ptr<PersistClient> other = store.client();
  ASSERT_TRUE(commit(*other, Change::create("base", hold("base"))).ok());

  absl::StatusOr<CommittedChange> winner;
  hooked->before_next_set([&] { winner = commit(*other, Change::create("x", hold("winner"))); });
  absl::StatusOr<CommittedChange> loser = commit(*stale, Change::create("x", hold("loser")));
  ASSERT_TRUE(winner.ok()) << winner.status();
  EXPECT_EQ(winner->version, 1u);
  EXPECT_EQ(loser.status().code(), absl::StatusCode::kAborted) << loser.status();
  EXPECT_TRUE(
      std::string(loser.status().message()).starts_with("conflict: \"x\" was created by version 1"))
      << loser.status();
  EXPECT_EQ(upper(*other), 2u);
  absl::StatusOr<CatalogSnapshot> catalog = read(*other);
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  EXPECT_EQ(catalog->find("x")->object_id, winner->object.object_id);
  EXPECT_EQ(std::get<HoldSpec>(catalog->find("x")->spec).reader, "winner");

  hooked->before_next_set([&] { winner = commit(*other, Change::drop("x")); });
  // A drop writes a part too (the retraction), so the hook runs in its window as well.
  loser = commit(*stale, Change::drop("x"));
  ASSERT_TRUE(winner.ok()) << winner.status();
  EXPECT_EQ(winner->version, 2u);
  EXPECT_EQ(loser.status().code(), absl::StatusCode::kAborted) << loser.status();
  EXPECT_TRUE(
      std::string(loser.status().message()).starts_with("conflict: \"x\" was dropped by version 2"))
      << loser.status();
  EXPECT_EQ(upper(*other), 3u);

  // Invalid when first read: not a conflict, and nothing is written.
  absl::StatusOr<CommittedChange> again = commit(*stale, Change::create("base", hold("again")));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists) << again.status();
  EXPECT_NE(again.status().message().find("created by version 0"), std::string::npos)
      << again.status();
  absl::StatusOr<CommittedChange> missing = commit(*stale, Change::drop("x"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_EQ(upper(*other), 3u);
}

// A Consensus that, once told to, lets the next compare_and_set commit, loses its reply, and then
// fails the next `outage` calls before they reach the store: a lost reply that outlasts persist's
// own retries of the append.
class OutageConsensus final : public persist::Consensus {
 public:
  explicit OutageConsensus(std::shared_ptr<persist::Consensus> inner) : inner_(std::move(inner)) {}
  void lose_next_reply(int outage) { outage_after_reply_ = outage; }
  int replies_lost() const { return replies_lost_; }

  absl::StatusOr<std::optional<persist::VersionedData>> head(std::string_view key) override {
    if (down()) return absl::UnavailableError("consensus is down (test)");
    return inner_->head(key);
  }
  absl::StatusOr<persist::CasResult> compare_and_set(
      std::string_view key, std::optional<uint64_t> expected_seqno,
      const persist::VersionedData& new_version) override {
    if (down()) return absl::UnavailableError("consensus is down (test)");
    absl::StatusOr<persist::CasResult> result =
        inner_->compare_and_set(key, expected_seqno, new_version);
    if (result.ok() && *result == persist::CasResult::kCommitted) {
      if (const int outage = outage_after_reply_.exchange(0); outage > 0) {
        ++replies_lost_;
        outage_left_ = outage;
        return absl::UnavailableError("the reply was lost (test)");
      }
    }
    return result;
  }
  absl::StatusOr<std::vector<persist::VersionedData>> scan(std::string_view key,
                                                           uint64_t from_seqno,
                                                           size_t limit) override {
    if (down()) return absl::UnavailableError("consensus is down (test)");
    return inner_->scan(key, from_seqno, limit);
  }
  absl::StatusOr<size_t> truncate(std::string_view key, uint64_t seqno) override {
    if (down()) return absl::UnavailableError("consensus is down (test)");
    return inner_->truncate(key, seqno);
  }

 private:
  bool down() {
    int left = outage_left_.load();
    while (left > 0 && !outage_left_.compare_exchange_weak(left, left - 1)) {
    }
    return left > 0;
  }

  std::shared_ptr<persist::Consensus> inner_;
  std::atomic<int> outage_after_reply_{0};
  std::atomic<int> outage_left_{0};
  std::atomic<int> replies_lost_{0};
};

// Consensus loses replies (the write went through, the caller hears Unavailable): every commit
// still reports success, and each change is in the log exactly once, at the version reported.
TEST(CatalogTest, AnIndeterminateCommitLandsOnce) {
  testing::Watchdog watchdog("AnIndeterminateCommitLandsOnce");
  const Store store = Store::fresh("lost-replies");
  auto faulty = std::make_shared<persist::FaultyConsensus>(
      store.consensus, persist::FaultConfig{.indeterminate_rate = 0.3, .seed = 18});
  std::unique_ptr<PersistClient> client = PersistClient::create(store.blob, faulty);
  std::map<uint64_t, std::string> committed;
  const auto commit_one = [&](const Change& change) {
    absl::StatusOr<CommittedChange> result = commit(*client, change);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_TRUE(committed.emplace(result->version, change.name).second)
        << "version " << result->version << " reported twice";
  };
  for (int i = 0; i < 30; ++i) {
    commit_one(Change::create("n" + std::to_string(i), hold("r" + std::to_string(i))));
  }
  for (int i = 0; i < 30; i += 2) commit_one(Change::drop("n" + std::to_string(i)));
  EXPECT_GT(faulty->counts().indeterminate.load(), 10u);

  std::unique_ptr<PersistClient> clean = store.client();
  absl::StatusOr<std::vector<CommittedChange>> log = history(*clean);
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_EQ(log->size(), 45u);
  std::set<std::string> expected;
  for (int i = 1; i < 30; i += 2) expected.insert("n" + std::to_string(i));
  EXPECT_EQ(replay(*log), expected);
  for (const auto& [version, name] : committed) {
    EXPECT_EQ((*log)[version].object.name, name) << "version " << version;
  }

  // The append's reply is lost and consensus stays down past persist's own retries: commit
  // retries the same batch until the outcome is known, for a create, a replace and a drop.
  const Store second = Store::fresh("outage");
  auto hooked = std::make_shared<HookedBlob>(second.blob);
  auto outage = std::make_shared<OutageConsensus>(second.consensus);
  client = PersistClient::create(hooked, outage);
  const std::vector<Change> changes = {Change::create("x", hold("r")),
                                       Change::replace("x", hold("s")), Change::drop("x")};
  for (uint64_t v = 0; v < changes.size(); ++v) {
    hooked->before_next_set([&] { outage->lose_next_reply(/*outage=*/60); });
    absl::StatusOr<CommittedChange> result = commit(*client, changes[v]);
    ASSERT_TRUE(result.ok()) << to_string(changes[v].kind) << ": " << result.status();
    EXPECT_EQ(result->version, v);
  }
  EXPECT_EQ(outage->replies_lost(), 3);
  log = history(*second.client());
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_EQ(log->size(), 3u);
  for (uint64_t v = 0; v < changes.size(); ++v) EXPECT_EQ((*log)[v].kind, changes[v].kind);
}

// A valid row, written by hand.
std::string row(const std::string& name, const std::string& object_id, uint32_t format = 1) {
  v1::CatalogObject object;
  object.set_format_version(format);
  object.set_name(name);
  object.set_object_id(object_id);
  object.set_created_version(0);
  object.set_created_by("test");
  object.mutable_hold()->set_shard("bids");
  object.mutable_hold()->set_reader("r");
  return object.SerializeAsString();
}

// Bytes no committer writes, appended by hand as version 1 over a valid version 0: each makes a
// read fail with DataLoss naming version 1 and saying why, and a commit on top writes nothing.
TEST(CatalogTest, HostileBytes) {
  struct Case {
    std::string what;
    std::vector<persist::Update> updates;  // At version 1.
    std::string says;
  };
  const std::vector<Case> cases = {
      {"a garbage row", {{"\xff\xff\xff not a catalog object", 1, 1}}, "does not parse"},
      {"an unknown format version", {{row("b", "o1", 99), 1, 1}}, "has format version 99"},
      {"a retraction of a row that is not live",
       {{row("ghost", "o2"), 1, -1}},
       "retracts a row of \"ghost\" that is not live"},
      {"a name live twice", {{row("a", "o3"), 1, 1}}, "a name live twice"},
      {"a diff of +2", {{row("c", "o4"), 1, 2}}, "a row has diff 2"},
      {"two changes in one version",
       {{row("c", "o5"), 1, 1}, {row("d", "o6"), 1, 1}},
       "not one change"},
      {"no change at all", {}, "adds 0 rows and retracts 0"},
  };
  for (const Case& hostile : cases) {
    SCOPED_TRACE(hostile.what);
    const Store store = Store::fresh("hostile");
    std::unique_ptr<PersistClient> client = store.client();
    ASSERT_TRUE(commit(*client, Change::create("a", hold("r"))).ok());
    persist::WriteHandle raw = client->open_writer(kCatalogShard, "hostile").value();
    ASSERT_TRUE(raw.compare_and_append(hostile.updates, persist::Frontier(1), persist::Frontier(2))
                    .value()
                    .is_appended());
    ASSERT_TRUE(raw.expire().ok());

    const auto expect_refused = [&](const absl::Status& status) {
      EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
      EXPECT_NE(status.message().find("weir.catalog version 1: "), std::string::npos) << status;
      EXPECT_NE(status.message().find(hostile.says), std::string::npos) << status;
    };
    expect_refused(read(*client).status());
    expect_refused(history(*client).status());
    expect_refused(commit(*client, Change::create("e", hold("r"))).status());
    expect_refused(commit(*client, Change::drop("a")).status());
    EXPECT_EQ(upper(*client), 2u);
    // The versions before it still read.
    absl::StatusOr<CatalogSnapshot> before = read(*client, 1);
    ASSERT_TRUE(before.ok()) << before.status();
    EXPECT_EQ(names(*before), std::set<std::string>{"a"});
  }
}

TEST(CatalogTest, NamesAreValidated) {
  for (const std::string name : {"a", "0", "auction", "bids-per-auction.v2", "a_b", "weir"}) {
    EXPECT_TRUE(validate_name(name).ok()) << name << ": " << validate_name(name);
  }
  const std::string too_long(kMaxNameLength + 1, 'a');
  EXPECT_TRUE(validate_name(too_long.substr(1)).ok());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "needs a name"},
      {"Bids", "has \"B\" at position 0"},
      {"-bids", "has \"-\" at position 0"},
      {"_bids", "has \"_\" at position 0"},
      {"bids per auction", "has \" \" at position 4"},
      {"bids/x", "has \"/\" at position 4"},
      {"weir.catalog", "is reserved"},
      {"weir.mine", "is reserved"},
      {too_long, "has 129 characters; at most 128"},
  };
  const Store store = Store::fresh("names");
  std::unique_ptr<PersistClient> client = store.client();
  for (const auto& [name, says] : bad) {
    const absl::Status status = commit(*client, Change::create(name, hold("r"))).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name << ": " << status;
    EXPECT_NE(status.message().find(says), std::string::npos) << status;
    EXPECT_EQ(commit(*client, Change::drop(name)).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  // Refused before anything was written: not even the shard exists.
  EXPECT_EQ(client->find_shard(kCatalogShard).value(), std::nullopt);
  // A spec must say what it is.
  EXPECT_EQ(
      commit(*client, Change::create("h", HoldSpec{.shard = "bids", .reader = ""})).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(commit(*client, Change::create("s", SourceSpec{})).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Creates, a replace, a drop and a create again: the history says what each version did, and the
// catalog reads at every version.
TEST(CatalogTest, HistoryAndReadsAtEveryVersion) {
  const Store store = Store::fresh("history");
  std::unique_ptr<PersistClient> client = store.client();
  const SourceSpec source{.source = "loadgen:auction",
                          .options = {{"scale", "2"}, {"seed", "7"}, {"rate", "10"}},
                          .tables = {"bids", "users"}};
  const ViewSpec view{
      .view = "max-bid", .inputs = {"auction.bids", "auction.users"}, .output = "max_bid"};
  const CommitOptions by_test{.created_by = "test"};
  const CommittedChange a = commit(*client, Change::create("a", source), by_test).value();
  const CommittedChange b = commit(*client, Change::create("b", view), by_test).value();
  EXPECT_EQ(commit(*client, Change::replace("a", source)).status().code(),
            absl::StatusCode::kInvalidArgument);  // Changes nothing.
  EXPECT_EQ(commit(*client, Change::replace("a", view)).status().code(),
            absl::StatusCode::kInvalidArgument);  // Another kind.
  SourceSpec bigger = source;
  bigger.options[0].value = "3";
  const CommittedChange replaced = commit(*client, Change::replace("a", bigger)).value();
  ASSERT_TRUE(commit(*client, Change::drop("b")).ok());
  const CommittedChange b_again = commit(*client, Change::create("b", hold("r"))).value();
  EXPECT_EQ(b_again.version, 4u);
  EXPECT_NE(b_again.object.object_id, b.object.object_id);
  EXPECT_TRUE(b.object.object_id.starts_with("o")) << b.object.object_id;
  EXPECT_EQ(a.object.created_by, "test");
  EXPECT_EQ(b_again.object.created_by, this_process());

  absl::StatusOr<std::vector<CommittedChange>> log = history(*client);
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_EQ(log->size(), 5u);
  const std::vector<ChangeKind> kinds = {ChangeKind::kCreate, ChangeKind::kCreate,
                                         ChangeKind::kReplace, ChangeKind::kDrop,
                                         ChangeKind::kCreate};
  for (size_t v = 0; v < kinds.size(); ++v) {
    EXPECT_EQ((*log)[v].kind, kinds[v]) << "version " << v << ": " << to_string((*log)[v].kind);
  }
  // A replace keeps the object's identity; the log has both sides, as encoded.
  const CommittedChange& replace = (*log)[2];
  EXPECT_EQ(replace.object.object_id, a.object.object_id);
  EXPECT_EQ(replace.object.created_version, 0u);
  ASSERT_TRUE(replace.replaced.has_value());
  EXPECT_EQ(replace.replaced->encoded, a.object.encoded);
  EXPECT_EQ(replace.object.encoded, replaced.object.encoded);
  // Options are stored sorted by key.
  const auto& options = std::get<SourceSpec>(replace.object.spec).options;
  ASSERT_EQ(options.size(), 3u);
  EXPECT_EQ(options[0].key, "rate");
  EXPECT_EQ(options[1].key, "scale");
  EXPECT_EQ(options[1].value, "3");
  EXPECT_EQ(options[2].key, "seed");
  EXPECT_EQ(std::get<ViewSpec>((*log)[1].object.spec), view);

  absl::StatusOr<std::vector<CommittedChange>> tail = history(*client, 3);
  ASSERT_TRUE(tail.ok()) << tail.status();
  ASSERT_EQ(tail->size(), 2u);
  EXPECT_EQ((*tail)[0].version, 3u);
  EXPECT_EQ(history(*client, 5).value().size(), 0u);
  EXPECT_EQ(history(*client, 6).status().code(), absl::StatusCode::kOutOfRange);

  const std::vector<std::set<std::string>> at = {{},         {"a"}, {"a", "b"},
                                                 {"a", "b"}, {"a"}, {"a", "b"}};
  for (uint64_t v = 0; v < at.size(); ++v) {
    absl::StatusOr<CatalogSnapshot> catalog = read(*client, v);
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    EXPECT_EQ(catalog->version, v);
    EXPECT_EQ(names(*catalog), at[v]) << "version " << v;
  }
  EXPECT_EQ(read(*client, 6).status().code(), absl::StatusCode::kOutOfRange);
  const SourceSpec stored{.source = "loadgen:auction",
                          .options = {{"rate", "10"}, {"scale", "3"}, {"seed", "7"}},
                          .tables = {"bids", "users"}};
  EXPECT_TRUE(std::get<SourceSpec>(read(*client, 3)->find("a")->spec) == stored);
}

// An empty store reads as version 0, and reading creates nothing.
TEST(CatalogTest, AnEmptyCatalogReadsAsVersionZero) {
  const Store store = Store::fresh("empty");
  std::unique_ptr<PersistClient> client = store.client();
  absl::StatusOr<CatalogSnapshot> catalog = read(*client);
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  EXPECT_EQ(catalog->version, 0u);
  EXPECT_TRUE(catalog->objects.empty());
  EXPECT_EQ(history(*client).value().size(), 0u);
  EXPECT_EQ(read(*client, 1).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(client->find_shard(kCatalogShard).value(), std::nullopt);
}

// Once a hold lets the since advance and compaction consolidates the versions before it, the
// catalog still reads from the since on; history before it is gone, and says so.
TEST(CatalogTest, ACompactedCatalogReadsFromItsSince) {
  const Store store = Store::fresh("compacted");
  std::unique_ptr<PersistClient> client = store.client();
  persist::ReadHandle hold_since = client->open_reader(kCatalogShard, "test hold").value();
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(
        commit(*client, Change::create("n" + std::to_string(i), hold("r" + std::to_string(i))))
            .ok());
  }
  ASSERT_TRUE(commit(*client, Change::drop("n1")).ok());
  ASSERT_TRUE(commit(*client, Change::drop("n4")).ok());
  ASSERT_TRUE(hold_since.downgrade_since(persist::Frontier(6)).ok());
  ASSERT_TRUE(client->compact(kCatalogShard, {.full = true}).ok());

  absl::StatusOr<CatalogSnapshot> catalog = read(*client);
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  EXPECT_EQ(catalog->version, 8u);
  EXPECT_EQ(names(*catalog), (std::set<std::string>{"n0", "n2", "n3", "n5"}));
  EXPECT_EQ(names(read(*client, 7).value()), (std::set<std::string>{"n0", "n2", "n3", "n4", "n5"}));
  EXPECT_EQ(read(*client, 6).status().code(), absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<std::vector<CommittedChange>> log = history(*client, 7);
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_EQ(log->size(), 1u);
  EXPECT_EQ((*log)[0].object.name, "n4");
  EXPECT_EQ(history(*client, 6).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(commit(*client, Change::drop("n0")).ok());
  EXPECT_EQ(names(read(*client).value()), (std::set<std::string>{"n2", "n3", "n5"}));
  (void)hold_since.expire();
}

}  // namespace
}  // namespace weir::control
