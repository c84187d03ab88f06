// persist_source_bench: how fast persist_source reads a shard into a dataflow, against persist's
// own snapshot read of the same data (SnapshotCursor on one thread: persist_bench's "snapshot
// read, as appended").
//
//   persist_source_bench [--updates 10000000] [--runs 5] [--workers 1,2] [--part-mib 8]
//                        [--batch-mib 64] [--dir DIR]
//
// The shard (file blob + SQLite consensus, rows as persist_bench's) is written once. Each run
// then reads it whole: once with the cursor, then with persist_source on W workers for each W
// (as_of = upper - 1, until = upper: the snapshot, then the dataflow completes), every worker
// counting the updates and bytes it receives. Each figure is checked (every update, every byte)
// and is the median over the runs, in millions of updates per second.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_rows.h"
#include <unistd.h>

#include "weir/operators/inspect.h"
#include "weir/persist/client.h"
#include "weir/sources/persist_source.h"
#include "weir/worker/execute.h"

namespace {

using Clock = std::chrono::steady_clock;
using weir::persist::Frontier;

struct Options {
  uint64_t updates = 10'000'000;
  int runs = 5;
  std::vector<size_t> workers = {1, 2};
  size_t part_mib = 8;
  size_t batch_mib = 64;
  std::string dir;
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "persist_source_bench: %s\n", what.c_str());
  std::exit(1);
}

template <class T>
T check(absl::StatusOr<T> result, const char* what) {
  if (!result.ok()) die(std::string(what) + ": " + result.status().ToString());
  return *std::move(result);
}

void check(const absl::Status& status, const char* what) {
  if (!status.ok()) die(std::string(what) + ": " + status.ToString());
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

struct Written {
  uint64_t updates = 0;
  uint64_t bytes = 0;  // Update bytes: data + 16 per update.
  uint64_t upper = 0;
};

// Appends batches of `batch_mib` of rows until `options.updates` are written (the last batch is
// cut to size); each batch at times [b * 1000, (b + 1) * 1000).
Written write_shard(weir::persist::PersistClient& client, const Options& options) {
  weir::persist::WriteHandle writer = check(client.open_writer("bench"), "open_writer");
  std::mt19937_64 rng(42);
  Written written;
  for (uint64_t b = 0; written.updates < options.updates; ++b) {
    const weir::bench::BatchData batch = weir::bench::make_batch(rng, b, options.batch_mib << 20);
    const Frontier lower(b * 1000);
    const Frontier upper((b + 1) * 1000);
    weir::persist::BatchBuilder builder = writer.builder(lower);
    for (size_t i = 0; i < batch.size() && written.updates < options.updates; ++i) {
      check(builder.add(batch.data(i), batch.times[i], 1), "add");
      ++written.updates;
      written.bytes += weir::persist::update_bytes(batch.data(i));
    }
    const weir::persist::Batch built = check(builder.finish(upper), "finish");
    if (!check(writer.compare_and_append(built, lower, upper), "append").is_appended()) {
      die("append refused");
    }
    written.upper = (b + 1) * 1000;
  }
  check(writer.expire(), "expire");
  return written;
}

// Seconds to read the whole shard through SnapshotCursor.
double cursor_seconds(weir::persist::PersistClient& client, const Written& written) {
  weir::persist::ReadHandle reader = check(client.open_reader("bench"), "open_reader");
  const Clock::time_point start = Clock::now();
  weir::persist::SnapshotCursor cursor = check(reader.snapshot_cursor(written.upper - 1), "cursor");
  uint64_t updates = 0;
  while (cursor.next()) ++updates;
  check(cursor.status(), "cursor");
  const double elapsed = seconds_since(start);
  if (updates != written.updates || cursor.update_bytes() != written.bytes) {
    die("cursor read " + std::to_string(updates) + " updates, expected " +
        std::to_string(written.updates));
  }
  check(reader.expire(), "expire");
  return elapsed;
}

// Seconds to read the whole shard with persist_source on `workers` workers.
double source_seconds(const std::shared_ptr<weir::persist::PersistClient>& client,
                      const Written& written, size_t workers) {
  std::atomic<uint64_t> updates{0};
  std::atomic<uint64_t> bytes{0};
  weir::Config config;
  config.workers = workers;
  const Clock::time_point start = Clock::now();
  check(weir::execute(config,
                      [&](weir::Worker& worker) {
                        // Counted per worker, added up when the worker's dataflow is dropped.
                        struct Counts {
                          std::atomic<uint64_t>* updates;
                          std::atomic<uint64_t>* bytes;
                          uint64_t n = 0;
                          uint64_t b = 0;
                          ~Counts() {
                            updates->fetch_add(n);
                            bytes->fetch_add(b);
                          }
                        };
                        auto counts = std::make_shared<Counts>(Counts{&updates, &bytes});
                        worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
                          weir::sources::PersistSourceConfig source;
                          source.shard = "bench";
                          source.client = client;
                          source.as_of = written.upper - 1;
                          source.until = written.upper;
                          auto read = weir::sources::persist_source(scope, source);
                          read.updates | weir::inspect([counts](const weir::sources::Update& u) {
                            ++counts->n;
                            counts->b += weir::persist::update_bytes(u.first);
                          });
                          for (auto& f : read.failures) {
                            f | weir::inspect([](const weir::AsyncError& e) {
                              die(e.operator_name + ": " + e.status.ToString());
                            });
                          }
                        });
                      }),
        "execute");
  const double elapsed = seconds_since(start);
  if (updates.load() != written.updates || bytes.load() != written.bytes) {
    die("persist_source read " + std::to_string(updates.load()) + " updates (" +
        std::to_string(bytes.load()) + " bytes), expected " + std::to_string(written.updates) +
        " (" + std::to_string(written.bytes) + ")");
  }
  return elapsed;
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) die("missing value for " + flag);
    const std::string value = argv[++i];
    if (flag == "--updates") {
      options.updates = std::stoull(value);
    } else if (flag == "--runs") {
      options.runs = std::stoi(value);
    } else if (flag == "--workers") {
      options.workers.clear();
      std::stringstream list(value);
      for (std::string w; std::getline(list, w, ',');) options.workers.push_back(std::stoul(w));
    } else if (flag == "--part-mib") {
      options.part_mib = std::stoul(value);
    } else if (flag == "--batch-mib") {
      options.batch_mib = std::stoul(value);
    } else if (flag == "--dir") {
      options.dir = value;
    } else {
      die("unknown flag " + flag);
    }
  }
  if (options.updates == 0 || options.runs <= 0 || options.workers.empty()) {
    die("--updates, --runs and --workers must be positive");
  }
  if (options.dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    options.dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/weir-persist-source-bench-" +
                  std::to_string(::getpid());
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  std::filesystem::remove_all(options.dir);
  weir::persist::PersistConfig config;
  config.part_target_bytes = options.part_mib << 20;
  std::shared_ptr<weir::persist::PersistClient> client =
      check(weir::persist::PersistClient::open(
                weir::persist::PersistLocation::in_directory(options.dir), config),
            "open");
  const Clock::time_point write_start = Clock::now();
  const Written written = write_shard(*client, options);
  const auto described = check(client->describe("bench"), "describe");
  std::printf(
      "persist_source_bench: %llu updates (%.0f MB of update bytes, %zu batches) written in "
      "%.1f s, parts of %zu MiB, file blob + SQLite consensus in %s\n",
      static_cast<unsigned long long>(written.updates), static_cast<double>(written.bytes) / 1e6,
      described.batches.size(), seconds_since(write_start), options.part_mib, options.dir.c_str());
  std::vector<double> cursor;
  std::vector<std::vector<double>> source(options.workers.size());
  const auto rate = [&](double seconds) {
    return static_cast<double>(written.updates) / seconds / 1e6;
  };
  for (int run = 0; run < options.runs; ++run) {
    cursor.push_back(rate(cursor_seconds(*client, written)));
    std::printf("  run %d: cursor %.2f M updates/s", run + 1, cursor.back());
    for (size_t i = 0; i < options.workers.size(); ++i) {
      source[i].push_back(rate(source_seconds(client, written, options.workers[i])));
      std::printf(", persist_source -w %zu %.2f", options.workers[i], source[i].back());
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  const double floor = median(cursor);
  std::printf("RESULT snapshot_cursor_mupdates_per_s %.3f\n", floor);
  for (size_t i = 0; i < options.workers.size(); ++i) {
    const double m = median(source[i]);
    std::printf("RESULT persist_source_w%zu_mupdates_per_s %.3f\n", options.workers[i], m);
    std::printf("RESULT persist_source_w%zu_ratio %.3f\n", options.workers[i], m / floor);
  }
  client.reset();
  std::filesystem::remove_all(options.dir);
  return 0;
}
