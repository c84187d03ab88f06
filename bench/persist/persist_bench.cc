// persist_bench: throughput of persist on a file blob and SQLite consensus.
//
//   append    BatchBuilder + compare_and_append of batches of 64 MiB of encoded updates
//             (MB/s of updates, each counted as its data + 8 bytes of time + 8 of diff)
//   floor     a raw sequential write of the same bytes, fsynced per batch
//   snapshot  a consolidated snapshot read through SnapshotCursor (GB/s of decoded updates),
//             as appended (one run per part) and after a full compaction (one run)
//
// Each figure is the median of --runs runs; every run writes a fresh shard.
//
//   persist_bench [--runs 5] [--batches 4] [--batch-mib 64] [--part-mib 8] [--zstd-level -3]
//                 [--store file|mem] [--reads yes|no] [--dir DIR]
//
// --store mem keeps parts and state in memory (no disk, no fsync): the CPU cost alone.
// --reads no skips the snapshot reads and the compaction (to profile the write path).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bench_rows.h"
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "weir/persist/client.h"

namespace {

using weir::bench::BatchData;
using weir::bench::make_batch;
using Clock = std::chrono::steady_clock;
using weir::persist::Frontier;

struct Options {
  int runs = 5;
  int batches = 4;
  size_t batch_mib = 64;
  size_t part_mib = 8;
  int zstd_level = weir::persist::PersistConfig{}.zstd_level;
  bool in_memory = false;  // --store mem: mem:// blob and consensus, to separate CPU from I/O.
  bool reads = true;       // --reads no: append only (for profiling the write path).
  std::string dir;
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "persist_bench: %s\n", what.c_str());
  std::exit(1);
}

template <class T>
T check(absl::StatusOr<T> result, const char* what) {
  if (!result.ok()) {
    die(std::string(what) + ": " + result.status().ToString());
  }
  return *std::move(result);
}

void check(const absl::Status& status, const char* what) {
  if (!status.ok()) {
    die(std::string(what) + ": " + status.ToString());
  }
}

// CPU time of the process so far (user + system), in seconds.
double cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The floor: the same bytes (data, time, diff per update) written sequentially and fsynced once
// per batch.
double raw_write_mbps(const std::vector<BatchData>& batches, const std::string& path) {
  std::vector<std::string> buffers;
  for (const BatchData& batch : batches) {
    std::string buffer;
    buffer.reserve(batch.update_bytes);
    for (size_t i = 0; i < batch.size(); ++i) {
      buffer.append(batch.data(i));
      const int64_t diff = 1;
      buffer.append(reinterpret_cast<const char*>(&batch.times[i]), 8);
      buffer.append(reinterpret_cast<const char*>(&diff), 8);
    }
    buffers.push_back(std::move(buffer));
  }
  uint64_t bytes = 0;
  const Clock::time_point start = Clock::now();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    die("open " + path + ": " + std::strerror(errno));
  }
  for (const std::string& buffer : buffers) {
    for (size_t done = 0; done < buffer.size();) {
      const ssize_t n = ::write(fd, buffer.data() + done, buffer.size() - done);
      if (n < 0) {
        die(std::string("write: ") + std::strerror(errno));
      }
      done += static_cast<size_t>(n);
    }
    if (::fsync(fd) != 0) {
      die(std::string("fsync: ") + std::strerror(errno));
    }
    bytes += buffer.size();
  }
  ::close(fd);
  const double elapsed = seconds_since(start);
  std::filesystem::remove(path);
  return static_cast<double>(bytes) / elapsed / 1e6;
}

struct RunResult {
  double raw_mbps = 0;
  double append_mbps = 0;
  double append_cores = 0;  // CPU seconds per second of the append.
  double snapshot_gbps = 0;
  double snapshot_cores = 0;  // CPU seconds per second of the as-appended snapshot.
  double compacted_snapshot_gbps = 0;
  size_t runs_as_appended = 0;
};

// The read's GB/s; its CPU seconds per second go to `cores`.
double snapshot_gbps(weir::persist::ReadHandle& reader, uint64_t as_of, uint64_t expected_bytes,
                     double& cores) {
  const Clock::time_point start = Clock::now();
  const double cpu_start = cpu_seconds();
  weir::persist::SnapshotCursor cursor = check(reader.snapshot_cursor(as_of), "snapshot");
  uint64_t rows = 0;
  while (cursor.next()) {
    ++rows;
  }
  check(cursor.status(), "snapshot");
  const double elapsed = seconds_since(start);
  cores = (cpu_seconds() - cpu_start) / elapsed;
  if (cursor.update_bytes() != expected_bytes) {
    die("snapshot read " + std::to_string(cursor.update_bytes()) + " bytes, expected " +
        std::to_string(expected_bytes));
  }
  return static_cast<double>(cursor.update_bytes()) / elapsed / 1e9;
}

RunResult run_once(const Options& options, const std::vector<BatchData>& batches, int run) {
  RunResult result;
  const std::string dir = options.dir + "/run-" + std::to_string(run);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  result.raw_mbps = raw_write_mbps(batches, dir + "/raw");

  weir::persist::PersistConfig config;
  config.part_target_bytes = options.part_mib << 20;
  config.zstd_level = options.zstd_level;
  const weir::persist::PersistLocation location =
      options.in_memory ? weir::persist::PersistLocation{"mem://bench-" + std::to_string(run),
                                                         "mem://bench-" + std::to_string(run)}
                        : weir::persist::PersistLocation::in_directory(dir);
  std::unique_ptr<weir::persist::PersistClient> client =
      check(weir::persist::PersistClient::open(location, config), "open");
  weir::persist::WriteHandle writer = check(client->open_writer("bench"), "open_writer");
  weir::persist::ReadHandle reader = check(client->open_reader("bench"), "open_reader");
  uint64_t bytes = 0;
  const Clock::time_point start = Clock::now();
  const double cpu_start = cpu_seconds();
  for (size_t b = 0; b < batches.size(); ++b) {
    const BatchData& batch = batches[b];
    const Frontier lower(b * 1000);
    const Frontier upper((b + 1) * 1000);
    weir::persist::BatchBuilder builder = writer.builder(lower);
    for (size_t i = 0; i < batch.size(); ++i) {
      check(builder.add(batch.data(i), batch.times[i], 1), "add");
    }
    const weir::persist::Batch built = check(builder.finish(upper), "finish");
    const weir::persist::AppendResult appended =
        check(writer.compare_and_append(built, lower, upper), "compare_and_append");
    if (!appended.is_appended()) {
      die("append refused");
    }
    bytes += batch.update_bytes;
  }
  result.append_mbps = static_cast<double>(bytes) / seconds_since(start) / 1e6;
  result.append_cores = (cpu_seconds() - cpu_start) / seconds_since(start);

  const uint64_t as_of = batches.size() * 1000 - 1;
  if (options.reads) {
    for (const auto& batch : check(client->describe("bench"), "describe").batches) {
      result.runs_as_appended += batch.num_runs;
    }
    result.snapshot_gbps = snapshot_gbps(reader, as_of, bytes, result.snapshot_cores);
    check(client->compact("bench", {.full = true}).status(), "compact");
    double compacted_cores = 0;
    result.compacted_snapshot_gbps = snapshot_gbps(reader, as_of, bytes, compacted_cores);
  }
  check(reader.expire(), "expire");
  check(writer.expire(), "expire");
  client.reset();
  std::filesystem::remove_all(dir);
  return result;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      die("missing value for " + flag);
    }
    const std::string value = argv[++i];
    if (flag == "--runs") {
      options.runs = std::stoi(value);
    } else if (flag == "--batches") {
      options.batches = std::stoi(value);
    } else if (flag == "--batch-mib") {
      options.batch_mib = std::stoul(value);
    } else if (flag == "--part-mib") {
      options.part_mib = std::stoul(value);
    } else if (flag == "--zstd-level") {
      options.zstd_level = std::stoi(value);
    } else if (flag == "--store") {
      if (value != "file" && value != "mem") {
        die("--store takes file or mem");
      }
      options.in_memory = value == "mem";
    } else if (flag == "--reads") {
      if (value != "yes" && value != "no") {
        die("--reads takes yes or no");
      }
      options.reads = value == "yes";
    } else if (flag == "--dir") {
      options.dir = value;
    } else {
      die("unknown flag " + flag);
    }
  }
  if (options.dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    options.dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/weir-persist-bench-" +
                  std::to_string(::getpid());
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  std::mt19937_64 rng(42);
  std::vector<BatchData> batches;
  uint64_t updates = 0;
  uint64_t bytes = 0;
  for (int b = 0; b < options.batches; ++b) {
    batches.push_back(make_batch(rng, static_cast<uint64_t>(b), options.batch_mib << 20));
    updates += batches.back().size();
    bytes += batches.back().update_bytes;
  }
  std::printf(
      "persist_bench: %d batches of %zu MiB of encoded updates (%llu updates of %.0f B on "
      "average), parts of %zu MiB, zstd level %d, file blob + SQLite consensus in %s\n",
      options.batches, options.batch_mib, static_cast<unsigned long long>(updates),
      static_cast<double>(bytes) / static_cast<double>(updates), options.part_mib,
      options.zstd_level, options.dir.c_str());
  std::vector<RunResult> results;
  for (int run = 0; run < options.runs; ++run) {
    results.push_back(run_once(options, batches, run));
    const RunResult& r = results.back();
    std::printf(
        "  run %d: raw write %.0f MB/s, append %.0f MB/s (%.1f cores busy), snapshot %.2f GB/s "
        "(%zu runs, %.1f cores busy), after compaction %.2f GB/s\n",
        run + 1, r.raw_mbps, r.append_mbps, r.append_cores, r.snapshot_gbps, r.runs_as_appended,
        r.snapshot_cores, r.compacted_snapshot_gbps);
    std::fflush(stdout);
  }
  std::filesystem::remove_all(options.dir);
  const auto column = [&](auto field) {
    std::vector<double> values;
    for (const RunResult& r : results) {
      values.push_back(r.*field);
    }
    return values;
  };
  const double raw = median(column(&RunResult::raw_mbps));
  const double append = median(column(&RunResult::append_mbps));
  const auto row = [](const char* what, std::vector<double> values, const char* unit) {
    std::sort(values.begin(), values.end());
    std::printf("%-44s %9.2f %9.2f %9.2f  %s\n", what, median(values), values.front(),
                values.back(), unit);
  };
  std::printf("\n%-44s %9s %9s %9s\n", "", "median", "min", "max");
  row("floor: raw sequential write + fsync", column(&RunResult::raw_mbps), "MB/s");
  row("append (BatchBuilder + compare_and_append)", column(&RunResult::append_mbps), "MB/s");
  row("snapshot read, as appended", column(&RunResult::snapshot_gbps), "GB/s");
  row("snapshot read, after full compaction", column(&RunResult::compacted_snapshot_gbps), "GB/s");
  std::printf("\nappend / raw write = %.0f %% (target >= 50 %%)\n", 100.0 * append / raw);
  return 0;
}
