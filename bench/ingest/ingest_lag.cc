// ingest_lag [--mode concurrent|serial] [--rows N] [-w W]: per-export progress. Two small tables
// (users, auctions) stream at 1000 changes/s; after 2 s a third table (bids) is added whose
// snapshot has N rows (default sized to take at least 30 s here). While that snapshot runs, the
// small tables' lag (how long ago the upstream reached their shard's upper) is sampled every
// 100 ms. Figures: lag p50 and p99 in seconds, and the snapshot's duration. With INGEST_LAG_TRACE
// set, every sample goes to stderr (seconds into the snapshot, table, lag, upper).

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "weir/ingest/ingest.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  std::string mode = "concurrent";
  uint64_t rows = 160'000'000;  // Serial mode snapshots ~10M rows/s on a quiet machine here.
  size_t workers = 2;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mode" && i + 1 < argc) {
      mode = argv[++i];
    } else if (a == "--rows" && i + 1 < argc) {
      rows = std::stoull(argv[++i]);
    } else if (a == "-w" && i + 1 < argc) {
      workers = std::stoul(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: ingest_lag [--mode concurrent|serial] [--rows N] [-w W]\n");
      return 2;
    }
  }
  const fs::path dir =
      fs::temp_directory_path() / ("weir-ingest-lag-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  weir::ingest::IngestOptions options;
  options.location = weir::persist::PersistLocation::in_directory(dir.string());
  options.workers.workers = workers;
  options.source.generator.kind = "auction";
  options.source.generator.snapshot_rows["bids"] = rows;
  options.source.rate = 1000;
  auto parsed = weir::sources::parse_progress_mode(mode);
  if (!parsed.ok()) {
    std::fprintf(stderr, "ingest_lag: %s\n", std::string(parsed.status().message()).c_str());
    return 2;
  }
  options.source.mode = *parsed;
  options.tables = {"users", "auctions"};
  options.add_table = "bids";
  options.add_after = std::chrono::seconds(2);
  options.stop = std::make_shared<std::atomic<bool>>(false);

  weir::ingest::IngestMonitor monitor;
  std::vector<double> lags;
  double snapshot_seconds = 0;
  std::thread sampler([&] {
    std::chrono::steady_clock::time_point snapshot_start{};
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      auto views = monitor.exports();
      if (views.size() < 3) continue;
      const auto& bids = views[2];
      if (!bids.snapshotting || bids.snapshot_total == 0) continue;
      if (snapshot_start == std::chrono::steady_clock::time_point{})
        snapshot_start = std::chrono::steady_clock::now();
      if (bids.persisted_upper > 0) {  // The snapshot is in the shard.
        snapshot_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - snapshot_start)
                .count();
        options.stop->store(true);
        return;
      }
      for (size_t e = 0; e < 2; ++e) {
        lags.push_back(monitor.lag(views[e].persisted_upper).count());
        if (std::getenv("INGEST_LAG_TRACE") != nullptr) {
          std::fprintf(
              stderr, "%.1f s %s lag %.3f s upper %llu\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - snapshot_start)
                  .count(),
              views[e].table.c_str(), lags.back(),
              static_cast<unsigned long long>(views[e].persisted_upper));
        }
      }
    }
  });
  auto report = weir::ingest::run_ingest(options, &monitor);
  options.stop->store(true);
  sampler.join();
  fs::remove_all(dir);
  if (!report.ok()) {
    std::fprintf(stderr, "ingest_lag: %s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  if (lags.empty()) {
    std::fprintf(stderr, "ingest_lag: no samples taken during the snapshot\n");
    return 1;
  }
  std::sort(lags.begin(), lags.end());
  auto pct = [&](double p) {
    return lags[std::min(lags.size() - 1, static_cast<size_t>(p * lags.size()))];
  };
  std::printf(
      "ingest_lag: mode %s, %llu-row snapshot took %.1f s; small tables' lag over %zu samples: p50 "
      "%.3f s, p99 %.3f s\n",
      mode.c_str(), static_cast<unsigned long long>(rows), snapshot_seconds, lags.size(), pct(0.5),
      pct(0.99));
  std::printf(
      "RESULT ingest_lag_p50_%s %.6g s\nRESULT ingest_lag_p99_%s %.6g s\nRESULT "
      "ingest_lag_snapshot_seconds %.6g s\n",
      mode.c_str(), pct(0.5), mode.c_str(), pct(0.99), snapshot_seconds);
  return 0;
}
