// The upper relay: appends publish their uppers; watches wake on news past what they know.

#include "weir/persist/relay.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "test_stores.h"

#include "weir/persist/client.h"

namespace weir::persist {
namespace {

using std::chrono::milliseconds;

std::unique_ptr<PersistClient> client_with(std::shared_ptr<UpperRelay> relay,
                                           const PersistLocation& location) {
  PersistConfig config;
  config.relay = std::move(relay);
  return PersistClient::open(location, config).value();
}

std::vector<Update> row_at(uint64_t time) { return {Update{"row", time, 1}}; }

TEST(RelayTest, AnAppendPublishesItsUpperToTheShardsSubscribers) {
  const PersistLocation location = testing::fresh_location("mem");
  auto relay = std::make_shared<LocalUpperRelay>();
  auto writer_client = client_with(relay, location);
  auto reader_client = client_with(relay, location);
  WriteHandle writer = writer_client->open_writer("orders").value();
  ReadHandle reader = reader_client->open_reader("orders").value();

  std::vector<uint64_t> heard;
  UpperRelay::Subscription subscription =
      relay->subscribe(reader.shard_id(), [&](uint64_t upper) { heard.push_back(upper); });
  ASSERT_TRUE(writer.compare_and_append(row_at(0), Frontier(0), Frontier(3)).value().is_appended());
  ASSERT_TRUE(writer.compare_and_append(row_at(3), Frontier(3), Frontier(7)).value().is_appended());
  // A mismatch moves nothing: no news.
  ASSERT_FALSE(
      writer.compare_and_append(row_at(3), Frontier(3), Frontier(9)).value().is_appended());
  ASSERT_TRUE(writer.compare_and_append(std::vector<Update>{}, Frontier(7), Frontier::empty())
                  .value()
                  .is_appended());
  EXPECT_EQ(heard, (std::vector<uint64_t>{3, 7, UINT64_MAX}));

  subscription.reset();
  EXPECT_EQ(relay->subscribers(reader.shard_id()), 0u);
  WriteHandle other = writer_client->open_writer("other").value();
  ASSERT_TRUE(other.compare_and_append(row_at(0), Frontier(0), Frontier(1)).ok());
  EXPECT_EQ(heard.size(), 3u);
}

TEST(RelayTest, ClientsPublishToTheProcessRelayByDefault) {
  const PersistLocation location = testing::fresh_location("mem");
  auto client = PersistClient::open(location).value();
  EXPECT_EQ(client->relay(), process_relay());
  WriteHandle writer = client->open_writer("orders").value();
  UpperWatch watch(process_relay(), writer.shard_id());
  const uint64_t seen = watch.news();
  ASSERT_TRUE(writer.compare_and_append(row_at(0), Frontier(0), Frontier(1)).ok());
  EXPECT_TRUE(watch.wait(seen, milliseconds(0)));
  EXPECT_EQ(watch.news(), seen + 1);
}

TEST(RelayTest, AWatchCountsOnlyNewsPastWhatItsReaderKnows) {
  auto relay = std::make_shared<LocalUpperRelay>();
  const ShardId shard = ShardId::random();
  int woken = 0;
  UpperWatch watch(relay, shard, [&] { ++woken; });
  watch.set_known(Frontier(5));
  relay->publish(shard, 3);
  relay->publish(shard, 5);
  relay->publish(ShardId::random(), 9);  // Another shard's.
  EXPECT_EQ(watch.news(), 0u);
  EXPECT_EQ(woken, 0);
  relay->publish(shard, 6);
  EXPECT_EQ(watch.news(), 1u);
  EXPECT_EQ(woken, 1);
  watch.set_known(Frontier(6));  // The reader read up to 6...
  watch.set_known(Frontier(4));  // ...and what it knows never goes back.
  relay->publish(shard, 6);
  EXPECT_EQ(watch.news(), 1u);
  relay->wake_all();  // "Unknown: read to learn".
  EXPECT_EQ(watch.news(), 2u);
}

TEST(RelayTest, AWaitReturnsOnNewsFromAnotherThreadAndTimesOutWithout) {
  auto relay = std::make_shared<LocalUpperRelay>();
  const ShardId shard = ShardId::random();
  UpperWatch watch(relay, shard);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(watch.wait(watch.news(), milliseconds(20)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(20));

  const uint64_t seen = watch.news();
  std::thread publisher([&] {
    std::this_thread::sleep_for(milliseconds(10));
    relay->publish(shard, 1);
  });
  // Woken by the news, long before the timeout (a generous bound: no timing is measured here).
  EXPECT_TRUE(watch.wait(seen, std::chrono::minutes(5)));
  publisher.join();
}

// A wait "for ever" (nanoseconds::max(), as AsyncContext::sleep_for takes it) waits for news; it
// must not overflow the clock into a deadline in the past and return at once (a reader's loop
// would spin).
TEST(RelayTest, AWaitWithoutEndWaitsForNews) {
  auto relay = std::make_shared<LocalUpperRelay>();
  const ShardId shard = ShardId::random();
  UpperWatch watch(relay, shard);
  std::atomic<bool> published{false};
  std::thread publisher([&] {
    std::this_thread::sleep_for(milliseconds(50));
    published = true;
    relay->publish(shard, 1);
  });
  const uint64_t seen = watch.news();
  EXPECT_TRUE(watch.wait(seen, std::chrono::nanoseconds::max()));
  EXPECT_TRUE(published.load());
  publisher.join();
}

TEST(RelayTest, WithoutARelayClientsAppendAndWatchesOnlySleep) {
  const PersistLocation location = testing::fresh_location("mem");
  auto client = client_with(nullptr, location);
  WriteHandle writer = client->open_writer("orders").value();
  ASSERT_TRUE(writer.compare_and_append(row_at(0), Frontier(0), Frontier(1)).ok());
  UpperWatch watch(nullptr, writer.shard_id());
  EXPECT_FALSE(watch.wait(watch.news(), milliseconds(1)));
  EXPECT_EQ(watch.poll_interval(milliseconds(50), milliseconds(1000)), milliseconds(50));
}

// A relay that says it hears every process: readers poll at the slower safety interval.
class LinkedRelay : public LocalUpperRelay {
 public:
  bool hears_other_processes() const override { return true; }
};

TEST(RelayTest, AReaderPollsSlowlyOnlyWhileItsRelayHearsEveryProcess) {
  auto local = std::make_shared<LocalUpperRelay>();
  auto linked = std::make_shared<LinkedRelay>();
  const ShardId shard = ShardId::random();
  EXPECT_EQ(UpperWatch(local, shard).poll_interval(milliseconds(50), milliseconds(1000)),
            milliseconds(50));
  EXPECT_EQ(UpperWatch(linked, shard).poll_interval(milliseconds(50), milliseconds(1000)),
            milliseconds(1000));
}

}  // namespace
}  // namespace weir::persist
