// The gRPC transport in one process: two or three transports linked over loopback, each with
// its own receiver. Frames arrive in order, close() ends links cleanly, a lost peer and a failed
// peer are reported naming the peer, and a Hello from another cluster is refused. Issue 14: a
// forged Hello (another cluster, a newer incarnation, no proof of the secret) changes nothing,
// refusals tell the caller nothing about this process, only processes that know the cluster
// secret link, and floods (before and after Hello) keep memory bounded.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "frame.h"
#include "grpc_transport.h"
#include "testing/ports.h"
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "weir/communication/allocator.h"
#include "weir/sanitizers.h"

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

std::string address_of(const std::string& hostfile, size_t process) {
  std::ifstream in(hostfile);
  std::string line;
  for (size_t i = 0; i <= process; ++i) std::getline(in, line);
  return line;
}

// A Link.Connect call made by hand: what anyone who can reach the port can send.
class RawCall {
 public:
  explicit RawCall(const std::string& address)
      : stub_(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    call_ = stub_.PrepareCall(&context_, "/weir.protocol.v1.Link/Connect", &cq_);
    call_->StartCall(this);
    next();
  }
  ~RawCall() {
    context_.TryCancel();
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
    }
  }
  RawCall(const RawCall&) = delete;
  RawCall& operator=(const RawCall&) = delete;

  bool write(const grpc::Slice& slice) {
    grpc::ByteBuffer buffer(&slice, 1);
    call_->Write(buffer, this);
    return next();
  }
  bool write(const std::string& bytes) { return write(grpc::Slice(bytes)); }
  // The next message, or nullopt when the stream ended.
  std::optional<std::string> read() {
    grpc::ByteBuffer buffer;
    call_->Read(&buffer, this);
    if (!next()) return std::nullopt;
    grpc::Slice slice;
    EXPECT_TRUE(buffer.DumpToSingleSlice(&slice).ok());
    return std::string(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  grpc::Status finish() {
    grpc::Status status;
    call_->Finish(&status, this);
    next();
    return status;
  }

 private:
  bool next() {
    void* tag = nullptr;
    bool ok = false;
    if (!cq_.Next(&tag, &ok)) return false;
    return ok;
  }

  grpc::GenericStub stub_;
  grpc::CompletionQueue cq_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
};

Hello forged_hello(const std::string& cluster_id, uint32_t process, uint32_t processes,
                   uint32_t workers, uint64_t incarnation) {
  Hello hello;
  hello.cluster_id = cluster_id;
  hello.process = process;
  hello.processes = processes;
  hello.workers = workers;
  hello.incarnation = incarnation;
  hello.nonce = std::string(kNonceBytes, 'x');
  hello.flow_window = Config::kDefaultFlowWindowBytes;  // As the processes' (their default).
  return hello;
}

std::string hello_bytes(const Hello& hello) {
  std::string bytes;
  append_hello(hello, bytes);
  return bytes;
}

// Resident memory of this process, in bytes.
size_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
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

// Issue 14, item 2. On main, a 21-byte Hello from another cluster with a newer incarnation made
// process 0 declare itself stale (before any check) and fail: a running cluster ended.
TEST(TransportTest, ForgedHelloDoesNotStopARunningCluster) {
  const std::string hostfile = write_hostfile(2);
  Recorder r0, r1;
  auto transports =
      connect_all({config_for(hostfile, 2, 0), config_for(hostfile, 2, 1)}, {&r0, &r1});
  for (auto& t : transports) ASSERT_TRUE(t.ok()) << t.status();
  const std::string address = address_of(hostfile, 0);

  // Another cluster, other -n and -w, a newer incarnation.
  {
    RawCall call(address);
    call.write(hello_bytes(forged_hello("not-this-cluster", 1, 9, 7, 1)));
    EXPECT_EQ(call.read(), std::nullopt);
    const grpc::Status status = call.finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    // Nothing about process 0: not its cluster id, -n, -w or incarnation.
    const std::string& said = status.error_message();
    EXPECT_EQ(said.find("transport-test"), std::string::npos) << said;
    EXPECT_EQ(said.find("-n 2"), std::string::npos) << said;
    EXPECT_EQ(said.find("-w 1"), std::string::npos) << said;
    EXPECT_EQ(said.find("incarnation"), std::string::npos) << said;
    EXPECT_NE(said.find("refused"), std::string::npos) << said;
  }
  // This cluster's id, -n and -w (guessed) and a newer incarnation, without the proof.
  for (const std::string& proof : {std::string(32, 'p'), std::string("garbage")}) {
    RawCall call(address);
    call.write(hello_bytes(forged_hello("transport-test", 1, 2, 1, 5)));
    std::optional<std::string> answer = call.read();  // Process 0's Hello, and its proof.
    ASSERT_TRUE(answer.has_value());
    std::string bytes;
    append_proof(proof, bytes);
    call.write(bytes);
    EXPECT_EQ(call.read(), std::nullopt);
    EXPECT_EQ(call.finish().error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  }
  // A caller that says Hello and then nothing is dropped after the handshake timeout.
  {
    RawCall call(address);
    call.write(hello_bytes(forged_hello("transport-test", 1, 2, 1, 5)));
    ASSERT_TRUE(call.read().has_value());
    EXPECT_EQ(call.read(), std::nullopt);  // Ended by process 0 (within 2 s).
  }
  // The cluster still runs.
  (*transports[1])->send_data(0, 3, 1, 0, "still here");
  ASSERT_TRUE(r0.wait([](const Recorder& r) { return r.data_size() == 1; }));
  EXPECT_TRUE(r0.failures().empty()) << r0.failures()[0];
  EXPECT_TRUE(r1.failures().empty()) << r1.failures()[0];
  std::filesystem::remove(hostfile);
}

// Issue 14, item 4: processes link only if they know the same secret; it never crosses.
TEST(TransportTest, OnlyProcessesThatKnowTheSecretLink) {
  const std::string secret = "0123456789abcdef0123456789abcdef";
  const std::string hostfile = write_hostfile(2);
  {
    Recorder r0, r1;
    Config c0 = config_for(hostfile, 2, 0), c1 = config_for(hostfile, 2, 1);
    c0.cluster_secret = c1.cluster_secret = secret;
    auto transports = connect_all({c0, c1}, {&r0, &r1});
    for (auto& t : transports) ASSERT_TRUE(t.ok()) << t.status();
    (*transports[1])->send_data(0, 3, 1, 0, "member");
    ASSERT_TRUE(r0.wait([](const Recorder& r) { return r.data_size() == 1; }));

    // A caller that knows the cluster id, -n and -w but not the secret.
    RawCall call(address_of(hostfile, 0));
    const Hello forged = forged_hello("transport-test", 1, 2, 1, 0);
    call.write(hello_bytes(forged));
    std::optional<std::string> answer = call.read();
    ASSERT_TRUE(answer.has_value());
    EXPECT_EQ(answer->find(secret), std::string::npos);  // Not in clear.
    v1::FrameBatch batch;
    ASSERT_TRUE(parse_batch(*answer, batch).ok());
    absl::StatusOr<Hello> theirs = read_hello(batch);
    ASSERT_TRUE(theirs.ok());
    std::string proof;  // What a non-member can compute: the MAC with a guessed secret.
    append_proof(handshake_mac("transport-test", Role::kDialer, forged, *theirs), proof);
    call.write(proof);
    EXPECT_EQ(call.read(), std::nullopt);
    EXPECT_EQ(call.finish().error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_TRUE(r0.failures().empty()) << r0.failures()[0];
    std::vector<std::future<absl::Status>> closes;
    for (auto& t : transports) {
      closes.push_back(std::async(std::launch::async, [&t] { return (*t)->close(); }));
    }
    for (auto& c : closes) EXPECT_TRUE(c.get().ok());
  }
  {
    // A process with another secret: neither links; both say why.
    Recorder r0, r1;
    Config c0 = config_for(hostfile, 2, 0), c1 = config_for(hostfile, 2, 1);
    c0.cluster_secret = secret;
    c1.cluster_secret = "another secret, 32 bytes long..";
    c0.startup_timeout = c1.startup_timeout = milliseconds(3000);
    auto transports = connect_all({c0, c1}, {&r0, &r1});
    ASSERT_FALSE(transports[0].ok());
    ASSERT_FALSE(transports[1].ok());
    EXPECT_TRUE(mentions(transports[0].status(), "did not prove the cluster secret"))
        << transports[0].status();
    EXPECT_TRUE(mentions(transports[1].status(), "did not prove the cluster secret"))
        << transports[1].status();
  }
  {
    // Too short a secret is a configuration error.
    Recorder r0;
    Config c0 = config_for(hostfile, 2, 0);
    c0.cluster_secret = "short";
    auto transport = connect_grpc(c0, r0);
    ASSERT_FALSE(transport.ok());
    EXPECT_TRUE(mentions(transport.status(), "at least 16")) << transport.status();
  }
  std::filesystem::remove(hostfile);
}

// Issue 14, item 5. On main, a caller that never said Hello was buffered to 1.85 GB in 5 s (the
// receive limit was unlimited).
TEST(TransportTest, FloodsKeepMemoryBounded) {
  const std::string hostfile = write_hostfile(2);
  Recorder r0, r1;
  Config c0 = config_for(hostfile, 2, 0), c1 = config_for(hostfile, 2, 1);
  c0.cluster_secret = c1.cluster_secret = "flood-test-secret-0123456789abcdef";
  // The flooders run in this process, on the same cores as both transports: on a loaded 2-core
  // host (4 of these tests at once, load 8) they starved a poller past the default 5 s and the
  // link was failed as silent, as the heartbeat is meant to. What is tested here is memory, and
  // that the flood itself breaks no link.
  c0.heartbeat_timeout = c1.heartbeat_timeout = std::chrono::seconds(60);
  auto transports = connect_all({c0, c1}, {&r0, &r1});
  for (auto& t : transports) ASSERT_TRUE(t.ok()) << t.status();
  const std::string address = address_of(hostfile, 0);
  const size_t baseline = rss_bytes();

  std::atomic<bool> stop{false};
  std::atomic<size_t> peak{baseline};
  std::thread sampler([&] {
    while (!stop) {
      size_t now = rss_bytes();
      size_t seen = peak.load();
      while (now > seen && !peak.compare_exchange_weak(seen, now)) {
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
  });
  // Messages the same buffer backs (no copy per call).
  static const std::string big(size_t{24} << 20, 'B');   // Over the limit.
  static const std::string under(size_t{7} << 20, 'u');  // Under it.
  const grpc::Slice big_slice(big.data(), big.size(), grpc::Slice::STATIC_SLICE);
  const grpc::Slice under_slice(under.data(), under.size(), grpc::Slice::STATIC_SLICE);
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);  // As the issue asks.
  std::vector<std::thread> flooders;
  for (int kind = 0; kind < 3; ++kind) {
    flooders.emplace_back([&, kind] {
      while (std::chrono::steady_clock::now() < until) {
        RawCall call(address);
        if (kind == 0) {  // Before Hello: a message far over the limit.
          call.write(big_slice);
        } else if (kind == 1) {  // Before Hello: messages under the limit, as fast as possible.
          for (int i = 0; i < 4 && call.write(under_slice); ++i) {
          }
        } else {  // After a Hello that matches: large "proofs".
          call.write(hello_bytes(forged_hello("transport-test", 1, 2, 1, 0)));
          call.read();
          for (int i = 0; i < 4 && call.write(under_slice); ++i) {
          }
        }
        call.read();
      }
    });
  }
  // Callers that open calls and say nothing.
  std::vector<std::unique_ptr<RawCall>> silent;
  for (int i = 0; i < 64; ++i) silent.push_back(std::make_unique<RawCall>(address));
  for (auto& f : flooders) f.join();
  silent.clear();

  // Frames on channels no worker has built: refused past the cap, counted even when empty.
  ProcessShared process(1, 2, 0);
  absl::Status held;
  uint64_t frames = 0;
  for (; frames < 10'000'000 && held.ok(); ++frames) {
    held = process.deliver_data(1000 + frames, 1, 0, "");
  }
  EXPECT_EQ(held.code(), absl::StatusCode::kResourceExhausted) << held;
  EXPECT_LE(frames, ProcessShared::kMaxPendingFrames + 1);

  stop = true;
  sampler.join();
  const size_t grown = peak.load() - baseline;
  std::printf("FloodsKeepMemoryBounded: RSS grew by %zu MiB at most\n", grown >> 20);
  // ThreadSanitizer's shadow memory grows with every byte the flood touches (322 MiB seen);
  // AddressSanitizer keeps up to 256 MiB of freed memory in its quarantine, resident, and pads
  // every allocation (389 MiB seen in a full asan-all run).
  size_t bound = size_t{256} << 20;
#if defined(WEIR_TSAN)
  bound = size_t{1024} << 20;
#elif defined(WEIR_ASAN)
  bound = size_t{768} << 20;
#endif
  EXPECT_LT(grown, bound) << "RSS grew by " << (grown >> 20) << " MiB";
  // And the cluster still runs.
  (*transports[1])->send_data(0, 3, 1, 0, "still here");
  const bool arrived = r0.wait([](const Recorder& r) { return r.data_size() == 1; });
  for (const absl::Status& failure : r0.failures()) ADD_FAILURE() << failure;
  EXPECT_TRUE(arrived);
  std::filesystem::remove(hostfile);
}

}  // namespace
}  // namespace weir::protocol
