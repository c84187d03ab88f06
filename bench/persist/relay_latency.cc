// relay_latency: append-to-listen latency of a reader that follows a shard, with the upper relay
// (persist/relay.h) against polling alone.
//
//   relay_latency [--appends 400] [--interval-ms 20] [--poll-ms 50] [--dir DIR]
//
// One writer appends a one-row batch every --interval-ms (jittered ±50%) to a shard of a
// `--persist DIR` location (file blobs, SQLite consensus); one reader follows it as persist_source
// and the replica do: it takes the watch's news count, asks its Listen for the next event, and
// when there is none waits for news or for its poll. The writer and the reader have PersistClients
// of their own. Latency: from just before compare_and_append to the reader holding the row. Modes:
// - poll:   no relay; the reader looks every --poll-ms;
// - local:  both clients on one process relay (the default within a process);
// - pubsub: each client linked to a `weir pubsub` server (in this process, over loopback TCP)
//           by a GrpcUpperRelay of its own: news goes writer -> server -> reader.
// Prints p50/p99/max in ms per mode from the append's call, p50/p99 from its return (what a
// reader waits beyond the append itself: what the relay saves), and the append's own p50 (the
// floor: a reader cannot hear of an append before it committed).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "weir/persist/client.h"
#include "weir/pubsub/pubsub.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using weir::persist::Frontier;

struct Options {
  int appends = 400;
  int interval_ms = 20;
  int poll_ms = 50;
  std::string dir;
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "relay_latency: %s\n", what.c_str());
  std::exit(1);
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t i = std::min(values.size() - 1, static_cast<size_t>(p * values.size()));
  return values[i];
}

template <class T>
T value_or_die(absl::StatusOr<T> result, const char* what) {
  if (!result.ok()) die(std::string(what) + ": " + result.status().ToString());
  return *std::move(result);
}

struct Figures {
  std::vector<double> latency_ms;       // From the append's call.
  std::vector<double> after_commit_ms;  // From its return: what the relay saves.
  std::vector<double> append_ms;
};

Figures run_mode(const Options& options, const std::string& mode, const std::string& dir,
                 std::shared_ptr<weir::persist::UpperRelay> writer_relay,
                 std::shared_ptr<weir::persist::UpperRelay> reader_relay) {
  const auto location = weir::persist::PersistLocation::in_directory(dir);
  weir::persist::PersistConfig writer_config;
  writer_config.relay = writer_relay;
  weir::persist::PersistConfig reader_config;
  reader_config.relay = reader_relay;
  auto writer_client =
      value_or_die(weir::persist::PersistClient::open(location, writer_config), "open");
  auto reader_client =
      value_or_die(weir::persist::PersistClient::open(location, reader_config), "open");
  const std::string shard = "relay." + mode;
  auto writer = value_or_die(writer_client->open_writer(shard, "relay_latency"), "writer");
  auto reader = value_or_die(reader_client->open_reader(shard, "relay_latency"), "reader");
  // Time 0 holds nothing: the listen starts after it.
  const std::vector<weir::persist::Update> none;
  value_or_die(writer.compare_and_append(none, Frontier(0), Frontier(1)), "append");
  auto listen = value_or_die(reader.listen(0), "listen");
  if (reader_relay != nullptr && reader_relay != writer_relay) {
    // A linked relay: wait until both ends are connected and subscribed.
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!(reader_relay->hears_other_processes() && writer_relay->hears_other_processes())) {
      if (Clock::now() > deadline) die("pubsub: not connected after 10 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  std::vector<Clock::time_point> started(options.appends);
  std::vector<Clock::time_point> finished(options.appends);
  std::vector<Clock::time_point> seen(options.appends);
  std::atomic<int> written{0};
  Figures figures;
  std::thread reading([&] {
    weir::persist::UpperWatch watch(reader_client->relay(), reader.shard_id());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // The subscription travels.
    int got = 0;
    while (got < options.appends) {
      const uint64_t news = watch.news();
      auto event = value_or_die(listen.next(), "listen");
      if (!event.has_value()) {
        watch.set_known(listen.frontier());
        watch.wait(news, watch.poll_interval(std::chrono::milliseconds(options.poll_ms),
                                             std::chrono::milliseconds(1000)));
        continue;
      }
      const auto now = Clock::now();
      for (const auto& update : event->updates) {
        const int i = std::stoi(update.data);
        if (i >= 0 && i < options.appends) {
          seen[i] = now;
          ++got;
        }
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> jitter(options.interval_ms / 2, options.interval_ms * 3 / 2);
  for (int i = 0; i < options.appends; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(jitter(rng)));
    const uint64_t t = static_cast<uint64_t>(i) + 1;
    const std::vector<weir::persist::Update> row = {{std::to_string(i), t, 1}};
    started[i] = Clock::now();
    auto appended =
        value_or_die(writer.compare_and_append(row, Frontier(t), Frontier(t + 1)), "append");
    if (!appended.is_appended()) die("append: upper mismatch");
    finished[i] = Clock::now();
    figures.append_ms.push_back(
        std::chrono::duration<double, std::milli>(finished[i] - started[i]).count());
    written = i + 1;
  }
  reading.join();
  for (int i = 0; i < options.appends; ++i) {
    figures.latency_ms.push_back(
        std::chrono::duration<double, std::milli>(seen[i] - started[i]).count());
    // A reader woken by the relay may hold the row before the writer's call returned.
    figures.after_commit_ms.push_back(
        std::max(0.0, std::chrono::duration<double, std::milli>(seen[i] - finished[i]).count()));
  }
  (void)writer.expire();
  (void)reader.expire();
  return figures;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto next = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value after " + arg);
      return argv[++i];
    };
    if (arg == "--appends") {
      options.appends = std::stoi(next());
    } else if (arg == "--interval-ms") {
      options.interval_ms = std::stoi(next());
    } else if (arg == "--poll-ms") {
      options.poll_ms = std::stoi(next());
    } else if (arg == "--dir") {
      options.dir = next();
    } else {
      die("unknown argument " + arg);
    }
  }
  if (options.appends < 1 || options.interval_ms < 2 || options.poll_ms < 1) die("bad arguments");
  const bool own_dir = options.dir.empty();
  if (own_dir) {
    options.dir =
        (fs::temp_directory_path() / ("relay_latency." + std::to_string(getpid()))).string();
  }
  fs::create_directories(options.dir);

  auto server =
      value_or_die(weir::pubsub::PubSubServer::start(
                       {.listen = "127.0.0.1:0", .max_sessions = 16, .max_subscriptions = 16}),
                   "pubsub");
  const std::string address = "127.0.0.1:" + std::to_string(server->port());
  const auto linked = [&] {
    weir::pubsub::GrpcRelayOptions relay_options;
    relay_options.address = address;
    return std::make_shared<weir::pubsub::GrpcUpperRelay>(relay_options);
  };
  auto local = std::make_shared<weir::persist::LocalUpperRelay>();

  struct Mode {
    std::string name;
    std::shared_ptr<weir::persist::UpperRelay> writer, reader;
  };
  std::vector<Mode> modes = {{"poll", nullptr, nullptr}, {"local", local, local}};
  {
    auto writer = linked();
    auto reader = linked();
    modes.push_back({"pubsub", writer, reader});
  }
  for (const Mode& mode : modes) {
    const Figures figures = run_mode(options, mode.name, options.dir, mode.writer, mode.reader);
    const struct {
      const char* name;
      const std::vector<double>& values;
      double p;
    } results[] = {{"p50", figures.latency_ms, 0.5},
                   {"p99", figures.latency_ms, 0.99},
                   {"max", figures.latency_ms, 1.0},
                   {"after_commit_p50", figures.after_commit_ms, 0.5},
                   {"after_commit_p99", figures.after_commit_ms, 0.99},
                   {"append_p50", figures.append_ms, 0.5}};
    for (const auto& result : results) {
      std::printf("RESULT relay_%s_%s_ms %.2f\n", mode.name.c_str(), result.name,
                  percentile(result.values, result.p));
    }
    std::fflush(stdout);
  }
  modes.clear();
  server->shutdown();
  if (own_dir) fs::remove_all(options.dir);
  return 0;
}
