// ingest_throughput ROWS [-w W]: rows/s into persist for a ROWS-row snapshot (the counter
// generator's one table, no changes), and the process's peak resident memory.

#include <cstdio>
#include <filesystem>
#include <string>

#include "../runtime/bench_util.h"
#include <sys/resource.h>

#include "weir/ingest/ingest.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  auto args = weir::bench::parse(argc, argv, 1, "ingest_throughput ROWS [-w W]");
  const uint64_t rows = args.numbers[0];
  const fs::path dir =
      fs::temp_directory_path() / ("weir-ingest-throughput-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  weir::ingest::IngestOptions options;
  options.location = weir::persist::PersistLocation::in_directory(dir.string());
  options.workers = args.config;
  options.source.generator.kind = "counter";
  options.source.generator.snapshot_rows["counter"] = rows;
  options.source.rate = 0;
  options.source.until = 0;  // The snapshot only.
  weir::bench::Timer timer;
  auto report = weir::ingest::run_ingest(options);
  const double seconds = timer.seconds();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  uint64_t bytes = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) bytes += entry.file_size();
  }
  fs::remove_all(dir);
  if (!report.ok()) {
    std::fprintf(stderr, "ingest_throughput: %s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  if (report->exports[0].updates != rows) {
    std::fprintf(stderr, "ingest_throughput: wrote %llu updates, expected %llu\n",
                 static_cast<unsigned long long>(report->exports[0].updates),
                 static_cast<unsigned long long>(rows));
    return 1;
  }
  std::printf(
      "ingest_throughput: %llu rows on %zu workers in %.2f s, %.1f MiB on disk, peak RSS %.1f "
      "MiB\n",
      static_cast<unsigned long long>(rows), args.config.workers, seconds, bytes / 1048576.0,
      usage.ru_maxrss / 1024.0);
  weir::bench::result("ingest_rows_per_s", rows / seconds, "rows/s");
  weir::bench::result("ingest_peak_rss_mib", usage.ru_maxrss / 1024.0, "MiB");
  return 0;
}
