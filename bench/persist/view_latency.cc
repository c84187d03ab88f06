// view_latency: how long after an append to its input a maintained view's output shard holds it,
// while `weir ingest` writes the input at a steady rate.
//
//   view_latency --weir PATH [--rate 100000] [--seconds 30] [--warmup 5] [--view bids-per-auction]
//                [-w 1] [--poll-us 500] [--dir DIR]
//
// Starts `weir ingest --source loadgen:auction --rate R` and `weir view VIEW` (both -w W) on one
// persist directory, then polls the uppers of the view's input (auction.bids) and of its output
// (view.VIEW) every --poll-us: each input upper is stamped when first seen, and its latency is
// the time until the output's upper reaches it (every output upper >= u holds everything the
// input held below u). After --warmup seconds, --seconds of latencies are kept. Figures: p50, p99
// and max in milliseconds, and the input's achieved rate (offsets per second: the loadgen
// changes at most one row per offset). The poll interval bounds the resolution. With
// VIEW_LATENCY_TRACE set, every latency goes to stderr (seconds since the view started, upper).

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "weir/persist/client.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string weir;
  uint64_t rate = 100000;
  double seconds = 30;
  double warmup = 5;
  std::string view = "bids-per-auction";
  std::string workers = "1";
  int poll_us = 500;
  std::string dir;
};

std::vector<pid_t> children;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "view_latency: %s\n", what.c_str());
  for (pid_t pid : children) ::kill(pid, SIGKILL);
  std::exit(1);
}

// Starts `args` with stdout and stderr to `log`.
pid_t spawn(const std::vector<std::string>& args, const fs::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int error = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) die("cannot start " + args[0] + ": " + std::strerror(error));
  children.push_back(pid);
  return pid;
}

// The shard's upper as a number (UINT64_MAX once empty); nullopt while it does not exist.
class UpperPoller {
 public:
  UpperPoller(std::shared_ptr<weir::persist::PersistClient> client, std::string shard)
      : client_(std::move(client)), shard_(std::move(shard)) {}

  std::optional<uint64_t> poll() {
    if (!reader_) {
      auto id = client_->find_shard(shard_);
      if (!id.ok() || !id->has_value()) return std::nullopt;
      auto reader = client_->open_reader(shard_, "view_latency");
      if (!reader.ok()) die(reader.status().ToString());
      reader_.emplace(*std::move(reader));
    }
    (void)reader_->heartbeat_if_due();
    auto upper = reader_->fetch_recent_upper();
    if (!upper.ok()) die("upper of " + shard_ + ": " + upper.status().ToString());
    return upper->is_empty() ? UINT64_MAX : upper->time();
  }

  void expire() {
    if (reader_) (void)reader_->expire();
  }

 private:
  std::shared_ptr<weir::persist::PersistClient> client_;
  std::string shard_;
  std::optional<weir::persist::ReadHandle> reader_;
};

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t i = std::min(values.size() - 1, static_cast<size_t>(p * values.size()));
  return values[i];
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) die("missing value for " + flag);
    const std::string value = argv[++i];
    if (flag == "--weir") {
      options.weir = value;
    } else if (flag == "--rate") {
      options.rate = std::stoull(value);
    } else if (flag == "--seconds") {
      options.seconds = std::stod(value);
    } else if (flag == "--warmup") {
      options.warmup = std::stod(value);
    } else if (flag == "--view") {
      options.view = value;
    } else if (flag == "-w") {
      options.workers = value;
    } else if (flag == "--poll-us") {
      options.poll_us = std::stoi(value);
    } else if (flag == "--dir") {
      options.dir = value;
    } else {
      die("unknown flag " + flag);
    }
  }
  if (options.weir.empty()) die("--weir PATH (the weir tool) is required");
  if (options.dir.empty()) {
    options.dir =
        (fs::temp_directory_path() / ("weir-view-latency-" + std::to_string(::getpid()))).string();
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  const fs::path dir = options.dir;
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string persist = (dir / "persist").string();
  const pid_t ingest =
      spawn({options.weir, "ingest", "--source", "loadgen:auction", "--persist", persist, "-w",
             options.workers, "--rate", std::to_string(options.rate), "--quiet"},
            dir / "ingest.log");
  auto client =
      weir::persist::PersistClient::open(weir::persist::PersistLocation::in_directory(persist));
  if (!client.ok()) die(client.status().ToString());
  std::shared_ptr<weir::persist::PersistClient> shared = *std::move(client);
  UpperPoller input(shared, "auction.bids");
  UpperPoller output(shared, "view." + options.view);
  // The view starts once its input exists (it would create it otherwise, as an empty shard).
  const Clock::time_point started = Clock::now();
  while (!input.poll()) {
    if (Clock::now() - started > std::chrono::seconds(60)) die("ingest wrote nothing in 60 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const pid_t view =
      spawn({options.weir, "view", "--persist", persist, options.view, "-w", options.workers},
            dir / "view.log");

  std::deque<std::pair<uint64_t, Clock::time_point>> pending;  // Input uppers not yet in output.
  std::vector<double> latencies_ms;
  const Clock::time_point view_started = Clock::now();
  const auto measuring_from = view_started + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(options.warmup));
  const auto end = measuring_from + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(options.seconds));
  const bool trace = std::getenv("VIEW_LATENCY_TRACE") != nullptr;
  uint64_t first_upper = 0;
  uint64_t last_upper = 0;
  Clock::time_point first_seen;
  Clock::time_point last_seen;
  while (Clock::now() < end) {
    const Clock::time_point now = Clock::now();
    if (const std::optional<uint64_t> in = input.poll();
        in && (pending.empty() || *in > pending.back().first) && *in > last_upper) {
      pending.emplace_back(*in, now);
      if (now >= measuring_from && first_upper == 0) {
        first_upper = *in;
        first_seen = now;
      }
      last_upper = *in;
      last_seen = now;
    }
    if (const std::optional<uint64_t> out = output.poll()) {
      const Clock::time_point seen = Clock::now();
      while (!pending.empty() && pending.front().first <= *out) {
        if (pending.front().second >= measuring_from) {
          latencies_ms.push_back(
              std::chrono::duration<double, std::milli>(seen - pending.front().second).count());
          if (trace) {
            std::fprintf(stderr, "%.3f s: upper %llu after %.1f ms\n",
                         std::chrono::duration<double>(seen - view_started).count(),
                         static_cast<unsigned long long>(pending.front().first),
                         latencies_ms.back());
          }
        }
        pending.pop_front();
      }
    }
    for (pid_t pid : {ingest, view}) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        die(std::string(pid == ingest ? "weir ingest" : "weir view") + " exited early; see " +
            (dir / (pid == ingest ? "ingest.log" : "view.log")).string());
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(options.poll_us));
  }
  for (pid_t pid : {view, ingest}) {
    ::kill(pid, SIGINT);
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
  input.expire();
  output.expire();
  const double rate = last_seen > first_seen
                          ? static_cast<double>(last_upper - first_upper) /
                                std::chrono::duration<double>(last_seen - first_seen).count()
                          : 0;
  std::printf(
      "view_latency: %s over weir ingest at --rate %llu (-w %s): %zu input uppers measured, "
      "%zu still pending at the end, input at %.0f offsets/s\n",
      options.view.c_str(), static_cast<unsigned long long>(options.rate), options.workers.c_str(),
      latencies_ms.size(), pending.size(), rate);
  std::printf("RESULT view_latency_p50_ms %.1f\n", percentile(latencies_ms, 0.5));
  std::printf("RESULT view_latency_p99_ms %.1f\n", percentile(latencies_ms, 0.99));
  std::printf("RESULT view_latency_max_ms %.1f\n", percentile(latencies_ms, 1.0));
  std::printf("RESULT view_input_offsets_per_s %.0f\n", rate);
  shared.reset();
  fs::remove_all(dir);
  return 0;
}
