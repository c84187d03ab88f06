// `weir replica`'s endpoints (ReplicaObserver), scraped over real HTTP while a replica runs
// in-process on in-memory stores: /readyz flips to ready once the catalog is reconciled and every
// object is past starting, /status and /metrics say what runs, and other paths are 404.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "http_get.h"
#include "testing/eventually.h"
#include "testing/shards.h"
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "weir/control/catalog.h"
#include "weir/control/replica.h"
#include "weir/observe/replica_endpoints.h"

namespace weir::observe {
namespace {

using testing::http_get;

using weir::testing::eventually;

using weir::testing::make_shard;

TEST(ReplicaObserverTest, ReadyzFlipsOnceEveryObjectIsPastStartingAndStatusSaysWhatRuns) {
  const std::string url = "mem://replica-observer";
  std::shared_ptr<persist::Blob> blob = persist::Blob::open(url).value();
  std::shared_ptr<persist::Consensus> consensus = persist::Consensus::open(url).value();
  std::shared_ptr<persist::PersistClient> client = persist::PersistClient::create(blob, consensus);
  make_shard(*client, "bids");
  ASSERT_TRUE(control::commit(
                  *client, control::Change::create("audit", control::HoldSpec{"bids", "auditor"}))
                  .ok());

  // The hold's runner stays starting until released.
  auto release = std::make_shared<std::atomic<bool>>(false);
  control::ReplicaOptions options;
  options.blob = blob;
  options.consensus = consensus;
  options.poll = std::chrono::milliseconds(10);
  options.stop = std::make_shared<std::atomic<bool>>(false);
  options.runners = [release](const control::CatalogObject&) -> absl::StatusOr<control::Runner> {
    return control::Runner([release](const control::RunContext& ctx) -> absl::Status {
      while (!release->load() && !ctx.stop->load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      ctx.running();
      while (!ctx.stop->load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return absl::OkStatus();
    });
  };
  auto reconciled = std::make_shared<std::atomic<int>>(0);
  options.on_reconciled = [reconciled](const control::ReplicaState&) { ++*reconciled; };

  ReplicaObserver observer(client);
  observer.instrument(options);
  const absl::StatusOr<int> port = observer.serve({});
  ASSERT_TRUE(port.ok()) << port.status();

  EXPECT_EQ(http_get(*port, "/healthz").status, 200);
  EXPECT_EQ(http_get(*port, "/nope").status, 404);
  EXPECT_EQ(http_get(*port, "/status/x").status, 404);
  auto ready = http_get(*port, "/readyz");
  EXPECT_EQ(ready.status, 503) << ready.body;

  std::thread replica([&options] { EXPECT_TRUE(control::run_replica(options).ok()); });
  ASSERT_TRUE(eventually([&] { return reconciled->load() > 0; }));
  ASSERT_TRUE(eventually(
      [&] { return http_get(*port, "/status").body.find("\"starting\"") != std::string::npos; }));
  ready = http_get(*port, "/readyz");
  EXPECT_EQ(ready.status, 503) << ready.body;
  EXPECT_NE(ready.body.find("audit"), std::string::npos) << ready.body;

  release->store(true);
  ASSERT_TRUE(eventually([&] { return http_get(*port, "/readyz").status == 200; }))
      << http_get(*port, "/readyz").body;
  const nlohmann::json status = nlohmann::json::parse(http_get(*port, "/status").body);
  EXPECT_EQ(status["command"], "replica");
  EXPECT_EQ(status["execution"], 0);
  EXPECT_EQ(status["catalog_version"], 1);
  EXPECT_EQ(status["reconciled_version"], 1);
  EXPECT_EQ(status["ready"], true);
  ASSERT_EQ(status["objects"].size(), 1u) << status.dump();
  EXPECT_EQ(status["objects"][0]["name"], "audit");
  EXPECT_EQ(status["objects"][0]["kind"], "hold");
  EXPECT_EQ(status["objects"][0]["health"], "running");
  EXPECT_EQ(status["objects"][0]["error"], "");
  EXPECT_EQ(status["objects"][0]["restarts"], 0);

  const auto metrics = http_get(*port, "/metrics");
  ASSERT_EQ(metrics.status, 200);
  std::string error;
  const auto samples = testing::parse_prometheus(metrics.body, &error);
  ASSERT_TRUE(samples.has_value()) << error << "\n" << metrics.body;
  EXPECT_EQ(testing::sample_value(*samples, "weir_replica_execution"), 0.0);
  EXPECT_EQ(testing::sample_value(*samples, "weir_catalog_version"), 1.0);
  EXPECT_EQ(testing::sample_value(*samples, "weir_object_health",
                                  {{"object", "audit"}, {"state", "running"}}),
            1.0);
  EXPECT_EQ(testing::sample_value(*samples, "weir_object_health",
                                  {{"object", "audit"}, {"state", "starting"}}),
            0.0);
  EXPECT_EQ(testing::sample_value(*samples, "weir_object_restarts_total", {{"object", "audit"}}),
            0.0);

  // A later change: ready again once it is reconciled and its object runs.
  make_shard(*client, "asks");
  ASSERT_TRUE(control::commit(
                  *client, control::Change::create("audit2", control::HoldSpec{"asks", "auditor"}))
                  .ok());
  ASSERT_TRUE(eventually([&] { return http_get(*port, "/readyz").status == 200; }))
      << http_get(*port, "/readyz").body;
  EXPECT_EQ(nlohmann::json::parse(http_get(*port, "/status").body)["objects"].size(), 2u);

  options.stop->store(true);
  replica.join();
}

}  // namespace
}  // namespace weir::observe
