// The gRPC transport in one process: two or three transports linked over loopback, each with
// its own receiver. Frames arrive in order, close() ends links cleanly, a lost peer and a failed
// peer are reported naming the peer, and a Hello from another cluster is refused.

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "grpc_transport.h"
#include "testing/ports.h"
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "weir/communication/allocator.h"

namespace weir::protocol {
namespace {

using std::chrono::milliseconds;

using weir::testing::free_ports;

std::string write_hostfile(size_t processes) {
  static int counter = 0;
  std::string path =
      (std::filesystem::temp_directory_path() /
       ("weir_transport_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
          .string();
  std::ofstream out(path);
  for (int port : free_ports(processes)) out << "127.0.0.1:" << port << "\n";
  return path;
}

// A thread-safe receiver that records frames and failures.
class Recorder final : public TransportReceiver {
 public:
  absl::Status deliver_data(uint64_t channel, uint32_t from, uint32_t to,
                            std::string_view payload) override {
    std::lock_guard lock(mu_);
    data_.push_back(std::to_string(channel) + ":" + std::to_string(from) + ">" +
                    std::to_string(to) + ":" + std::string(payload));
    cv_.notify_all();
    return absl::OkStatus();
  }
  absl::Status deliver_progress(uint64_t channel, uint32_t from, uint64_t seq,
                                std::string_view payload) override {
    std::lock_guard lock(mu_);
    progress_.push_back(std::to_string(channel) + ":" + std::to_string(from) + "#" +
                        std::to_string(seq) + ":" + std::string(payload));
    cv_.notify_all();
    return absl::OkStatus();
  }
  void link_failed(absl::Status status) override {
    std::lock_guard lock(mu_);
    failures_.push_back(std::move(status));
    cv_.notify_all();
  }

  // Waits (up to a generous deadline) until `done` holds; false if it never did.
  bool wait(const std::function<bool(const Recorder&)>& done) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [&] { return done(*this); });
  }
  std::vector<std::string> data() const {
    std::lock_guard lock(mu_);
    return data_;
  }
  std::vector<std::string> progress() const {
    std::lock_guard lock(mu_);
    return progress_;
  }
  std::vector<absl::Status> failures() const {
    std::lock_guard lock(mu_);
    return failures_;
  }
  size_t data_size() const { return data_.size(); }          // REQUIRES: inside wait().
  size_t progress_size() const { return progress_.size(); }  // REQUIRES: inside wait().
  size_t failure_count() const { return failures_.size(); }  // REQUIRES: inside wait().

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> data_, progress_;
  std::vector<absl::Status> failures_;
};

Config config_for(const std::string& hostfile, size_t processes, size_t process) {
  Config config;
  config.processes = processes;
  config.process = process;
  config.workers = 1;
  config.hostfile = hostfile;
  config.cluster_id = "transport-test";
  config.startup_timeout = milliseconds(30000);
  return config;
}

// Connects every process of `configs` at once (each connect waits for its peers).
std::vector<absl::StatusOr<std::unique_ptr<Transport>>> connect_all(
    const std::vector<Config>& configs, const std::vector<TransportReceiver*>& receivers) {
  std::vector<std::future<absl::StatusOr<std::unique_ptr<Transport>>>> futures;
  for (size_t i = 0; i < configs.size(); ++i) {
    futures.push_back(
        std::async(std::launch::async, [&, i] { return connect_grpc(configs[i], *receivers[i]); }));
  }
  std::vector<absl::StatusOr<std::unique_ptr<Transport>>> out;
  for (auto& f : futures) out.push_back(f.get());
  return out;
}

bool mentions(const absl::Status& status, const std::string& words) {
  return status.message().find(words) != std::string::npos;
}

TEST(TransportTest, FramesArriveInOrderAndCloseEndsCleanly) {
  const std::string hostfile = write_hostfile(3);
  Recorder r0, r1, r2;
  auto transports = connect_all(
      {config_for(hostfile, 3, 0), config_for(hostfile, 3, 1), config_for(hostfile, 3, 2)},
      {&r0, &r1, &r2});
  for (auto& t : transports) ASSERT_TRUE(t.ok()) << t.status();

  // Process 2 sends to 0 and 1 from two threads; each thread's frames must stay in order.
  constexpr size_t kFrames = 2000;
  std::vector<std::thread> senders;
  for (uint32_t channel : {1u, 2u}) {
    senders.emplace_back([&, channel] {
      for (size_t i = 0; i < kFrames; ++i) {
        (*transports[2])->send_data(0, channel, 2, 0, std::to_string(i));
        (*transports[2])->send_progress(1, channel, 2, i, std::string(i % 100, 'p'));
      }
    });
  }
  for (auto& s : senders) s.join();
  (*transports[0])->send_data(1, 9, 0, 1, "from 0");
  ASSERT_TRUE(r0.wait([](const Recorder& r) { return r.data_size() == 2 * kFrames; }));
  ASSERT_TRUE(r1.wait(
      [](const Recorder& r) { return r.data_size() == 1 && r.progress_size() == 2 * kFrames; }));

  std::vector<int> next(3, 0);
  for (const std::string& frame : r0.data()) {
    const uint32_t channel = frame[0] - '0';
    EXPECT_EQ(frame, std::to_string(channel) + ":2>0:" + std::to_string(next[channel]++));
  }
  EXPECT_EQ(r1.data(), std::vector<std::string>{"9:0>1:from 0"});
  const auto progress = r1.progress();
  ASSERT_EQ(progress.size(), 2u * kFrames);
  next.assign(3, 0);
  for (const std::string& frame : progress) {
    const uint32_t channel = frame[0] - '0';
    const int i = next[channel]++;
    EXPECT_EQ(frame, std::to_string(channel) + ":2#" + std::to_string(i) + ":" +
                         std::string(i % 100, 'p'));
  }

  std::vector<std::future<absl::Status>> closes;
  for (auto& t : transports) {
    closes.push_back(std::async(std::launch::async, [&t] { return (*t)->close(); }));
  }
  for (auto& c : closes) EXPECT_TRUE(c.get().ok());
  for (Recorder* r : {&r0, &r1, &r2}) EXPECT_TRUE(r->failures().empty()) << r->failures()[0];
  std::filesystem::remove(hostfile);
}

TEST(TransportTest, LostPeerFailsTheLinkNamingIt) {
  const std::string hostfile = write_hostfile(2);
  Recorder r0, r1;
  auto transports =
      connect_all({config_for(hostfile, 2, 0), config_for(hostfile, 2, 1)}, {&r0, &r1});
  for (auto& t : transports) ASSERT_TRUE(t.ok()) << t.status();
  transports[1]->reset();  // Gone without Goodbye (the destructor cancels its calls).
  ASSERT_TRUE(r0.wait([](const Recorder& r) { return r.failure_count() > 0; }));
  const absl::Status lost = r0.failures()[0];
  EXPECT_TRUE(mentions(lost, "process 1")) << lost;
  EXPECT_FALSE((*transports[0])->close().ok());  // Returns (does not wait on the dead peer).
  std::filesystem::remove(hostfile);
}

TEST(TransportTest, FailedPeerSaysWhyInItsGoodbye) {
  const std::string hostfile = write_hostfile(2);
  Recorder r0;
  ProcessShared p1(1, 2, 1);  // The runtime's receiver: close() asks it whether workers failed.
  auto transports =
      connect_all({config_for(hostfile, 2, 0), config_for(hostfile, 2, 1)}, {&r0, &p1});
  for (auto& t : transports) ASSERT_TRUE(t.ok()) << t.status();
  p1.fail(absl::InternalError("operator 'Boom' failed: injected"));
  (*transports[1])->close().IgnoreError();
  ASSERT_TRUE(r0.wait([](const Recorder& r) { return r.failure_count() > 0; }));
  const absl::Status failed = r0.failures()[0];
  EXPECT_TRUE(mentions(failed, "process 1")) << failed;
  EXPECT_TRUE(mentions(failed, "operator 'Boom' failed: injected")) << failed;
  EXPECT_FALSE((*transports[0])->close().ok());
  std::filesystem::remove(hostfile);
}

TEST(TransportTest, HelloFromAnotherClusterIsRefused) {
  const std::string hostfile = write_hostfile(2);
  Recorder r0, r1;
  Config c0 = config_for(hostfile, 2, 0), c1 = config_for(hostfile, 2, 1);
  // Process 0 waits this long in any case; long enough for process 1 to be refused first even
  // under ThreadSanitizer on a loaded 2-core machine (3 s was not).
  c0.startup_timeout = milliseconds(10000);
  c1.cluster_id = "another-cluster";
  auto transports = connect_all({c0, c1}, {&r0, &r1});
  ASSERT_FALSE(transports[1].ok());
  EXPECT_TRUE(mentions(transports[1].status(), "refused")) << transports[1].status();
  EXPECT_TRUE(mentions(transports[1].status(), "another-cluster")) << transports[1].status();
  ASSERT_FALSE(transports[0].ok());  // Gave up waiting for a process 1 of its own cluster.
  EXPECT_TRUE(mentions(transports[0].status(), "process 1")) << transports[0].status();
  EXPECT_TRUE(mentions(transports[0].status(), "refused")) << transports[0].status();
  std::filesystem::remove(hostfile);
}

TEST(TransportTest, OlderIncarnationIsRefused) {
  const std::string hostfile = write_hostfile(2);
  Recorder r0, r1;
  Config c0 = config_for(hostfile, 2, 0), c1 = config_for(hostfile, 2, 1);
  c0.startup_timeout = milliseconds(10000);  // As in HelloFromAnotherClusterIsRefused.
  c0.incarnation = 5;
  c1.incarnation = 4;
  auto transports = connect_all({c0, c1}, {&r0, &r1});
  ASSERT_FALSE(transports[1].ok());
  EXPECT_TRUE(mentions(transports[1].status(), "stale")) << transports[1].status();
  EXPECT_FALSE(transports[0].ok());
  std::filesystem::remove(hostfile);
}

TEST(TransportTest, HeartbeatsKeepAnIdleLinkAlive) {
  const std::string hostfile = write_hostfile(2);
  Recorder r0, r1;
  Config c0 = config_for(hostfile, 2, 0), c1 = config_for(hostfile, 2, 1);
  c0.heartbeat_timeout = c1.heartbeat_timeout = milliseconds(1500);
  auto transports = connect_all({c0, c1}, {&r0, &r1});
  for (auto& t : transports) ASSERT_TRUE(t.ok()) << t.status();
  // Idle for three timeouts: only heartbeats cross, and neither side may call the other lost.
  std::this_thread::sleep_for(milliseconds(4500));
  EXPECT_TRUE(r0.failures().empty()) << r0.failures()[0];
  EXPECT_TRUE(r1.failures().empty()) << r1.failures()[0];
  (*transports[1])->send_data(0, 3, 1, 0, "still here");
  ASSERT_TRUE(r0.wait([](const Recorder& r) { return r.data_size() == 1; }));
  std::filesystem::remove(hostfile);
}

}  // namespace
}  // namespace weir::protocol
