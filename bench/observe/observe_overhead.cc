// observe_overhead ROWS RUNS [-w W] [--stream]: what `--http` costs `ingest_throughput`'s workload
// (a ROWS-row snapshot of the counter generator into persist), scraped every second. With
// --stream, the auction generator's change stream instead: ROWS offsets as fast as it goes, after
// a small snapshot (many small times: the most operator runs, and log events, per row).
//
// Runs the workload RUNS times plain and RUNS times observed, alternating (plain first, then
// observed, ...): observed runs attach RuntimeStats to every worker, count the persist stores
// (IngestObserver::instrument), serve the endpoints, and a client GETs /metrics, /status and
// /graph once a second throughout. Prints each run and the medians; the ratio observed / plain
// rows/s is the figure (target: above 0.98, docs/benchmarks.md "Observability").

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "../runtime/bench_util.h"
#include <sys/resource.h>

#include "weir/ingest/ingest.h"
#include "weir/observe/http_server.h"
#include "weir/observe/ingest_endpoints.h"

namespace fs = std::filesystem;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// CPU time of the whole process (every thread: workers, persist, the server, the scraper).
double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return s(usage.ru_utime) + s(usage.ru_stime);
}

// One run; rows/s, or a negative number on failure. `scrapes`: GETs that answered; `per_cpu`:
// rows per CPU second of the process.
double run_once(uint64_t rows, const weir::Config& workers, bool stream, bool observed,
                int* scrapes, double* per_cpu) {
  const fs::path dir =
      fs::temp_directory_path() / ("weir-observe-overhead-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  weir::ingest::IngestOptions options;
  options.location = weir::persist::PersistLocation::in_directory(dir.string());
  options.workers = workers;
  if (stream) {
    options.source.generator.kind = "auction";
    options.source.rate = 0;
    options.source.until = rows;  // Offsets.
  } else {
    options.source.generator.kind = "counter";
    options.source.generator.snapshot_rows["counter"] = rows;
    options.source.rate = 0;
    options.source.until = 0;  // The snapshot only.
  }
  std::optional<weir::observe::IngestObserver> observer;
  std::atomic<bool> done{false};
  std::thread scraper;
  *scrapes = 0;
  if (observed) {
    observer.emplace(weir::observe::IngestObserverConfig{.kind = "counter", .source = "bench"});
    if (!observer->instrument(options).ok()) return -1;
    // To tell the parts' costs apart: OBSERVE_NO_STATS (no RuntimeStats on the workers),
    // OBSERVE_NO_STORES (persist's stores not metered).
    if (std::getenv("OBSERVE_NO_STATS") != nullptr) options.on_worker = nullptr;  // NOLINT
    if (std::getenv("OBSERVE_NO_STORES") != nullptr) {                            // NOLINT
      options.blob = nullptr;
      options.consensus = nullptr;
    }
    auto port = observer->serve({});
    if (!port.ok()) return -1;
    const std::string address = "127.0.0.1:" + std::to_string(*port);
    // OBSERVE_NO_SCRAPE=1: instrumented and serving, but nobody scrapes (to tell the two apart).
    if (std::getenv("OBSERVE_NO_SCRAPE") == nullptr)  // NOLINT(concurrency-mt-unsafe)
      scraper = std::thread([&done, address, scrapes] {
        while (!done.load()) {
          for (const char* path : {"/metrics", "/status", "/graph"}) {
            if (weir::observe::http_get(address, path, std::chrono::seconds(5)).ok()) ++*scrapes;
          }
          for (int i = 0; i < 100 && !done.load(); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
        }
      });
  }
  const double cpu_before = cpu_seconds();
  weir::bench::Timer timer;
  auto report = weir::ingest::run_ingest(options, observer ? &observer->monitor() : nullptr);
  const double seconds = timer.seconds();
  done.store(true);
  if (scraper.joinable()) scraper.join();
  const double cpu = cpu_seconds() - cpu_before;
  observer.reset();
  fs::remove_all(dir);
  if (!report.ok() || (!stream && report->exports[0].updates != rows)) {
    std::fprintf(
        stderr, "observe_overhead: %s\n",
        report.ok() ? "wrong update count" : std::string(report.status().message()).c_str());
    return -1;
  }
  if (stream) {
    uint64_t updates = 0;
    for (const auto& e : report->exports) updates += e.updates;
    *per_cpu = updates / cpu;
    return updates / seconds;
  }
  *per_cpu = rows / cpu;
  return rows / seconds;
}

}  // namespace

int main(int argc, char** argv) {
  bool stream = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) != "--stream") continue;
    stream = true;
    for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
    --argc;
    break;
  }
  auto args = weir::bench::parse(argc, argv, 2, "observe_overhead ROWS RUNS [-w W] [--stream]");
  const uint64_t rows = args.numbers[0];
  const uint64_t runs = args.numbers[1];
  std::vector<double> plain, observed, plain_cpu, observed_cpu, pairs;
  for (uint64_t r = 0; r < runs; ++r) {
    for (const bool with : {false, true}) {
      int scrapes = 0;
      double per_cpu = 0;
      // OBSERVE_AA=1: both runs of a pair plain (what the order alone does to the figures).
      const bool observe = with && std::getenv("OBSERVE_AA") == nullptr;  // NOLINT
      const double rate = run_once(rows, args.config, stream, observe, &scrapes, &per_cpu);
      if (rate < 0) return 1;
      (with ? observed : plain).push_back(rate);
      (with ? observed_cpu : plain_cpu).push_back(per_cpu);
      if (with) pairs.push_back(rate / plain.back());
      std::printf("run %llu %-8s %12.0f %s/s, %12.0f per CPU second%s\n",
                  static_cast<unsigned long long>(r), with ? "observed" : "plain", rate,
                  stream ? "updates" : "rows", per_cpu,
                  with ? (" (" + std::to_string(scrapes) + " scrapes answered)").c_str() : "");
      std::fflush(stdout);
    }
  }
  const double p = median(plain), o = median(observed);
  const double pc = median(plain_cpu), oc = median(observed_cpu);
  // Stream: updates/s written (every table), snapshot: rows/s.
  std::printf(
      "observe_overhead: %s %llu %s, %zu workers, %llu runs each: plain %.0f, observed %.0f "
      "%s/s (medians), ratio %.3f; median ratio of a pair %.3f; per CPU second %.3f\n",
      stream ? "stream of" : "snapshot of", static_cast<unsigned long long>(rows),
      stream ? "offsets" : "rows", args.config.workers, static_cast<unsigned long long>(runs), p, o,
      stream ? "updates" : "rows", o / p, median(pairs), oc / pc);
  weir::bench::result("observe_plain_rows_per_s", p, "rows/s");
  weir::bench::result("observe_observed_rows_per_s", o, "rows/s");
  weir::bench::result("observe_ratio", o / p, "x");
  // Each observed run over the plain run just before it: drift of the machine cancels.
  weir::bench::result("observe_pair_ratio", median(pairs), "x");
  // Rows per CPU second of the process, observed over plain: the work it adds, whatever the
  // scheduling noise (the scraper, which a real deployment runs elsewhere, counts too).
  weir::bench::result("observe_cpu_ratio", oc / pc, "x");
  return 0;
}
