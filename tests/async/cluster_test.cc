// Async operators in a cluster of several processes (here: threads of this test process joined by
// an in-memory transport): the shutdown button counts presses from every worker of every process.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "testing/harness.h"
#include <gtest/gtest.h>

#include "weir/async/async_operator.h"
#include "weir/weir.h"

namespace weir {
namespace {

using Caps = std::span<CapabilitySet<uint64_t>>;
using testing::step_until;

// Frames between the "processes" of one test, in order per receiver, delivered on one thread per
// receiving process (as a real transport calls its receiver from its own threads).
class LoopbackHub {
 public:
  explicit LoopbackHub(size_t processes) : processes_(processes) {
    for (size_t p = 0; p < processes; ++p) inboxes_.push_back(std::make_unique<Inbox>());
  }
  LoopbackHub(const LoopbackHub&) = delete;
  LoopbackHub& operator=(const LoopbackHub&) = delete;
  ~LoopbackHub() {
    for (size_t p = 0; p < processes_; ++p) close(p);
  }

  TransportFactory factory() {
    return [this](const Config& config,
                  TransportReceiver& receiver) -> absl::StatusOr<std::unique_ptr<Transport>> {
      open(config.process, &receiver);
      return std::unique_ptr<Transport>(new Link(this, config.process));
    };
  }

 private:
  struct Frame {
    bool progress = false;
    uint64_t channel = 0, seq = 0;
    uint32_t from = 0, to = 0;
    std::string payload;
  };
  struct Inbox {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Frame> frames;  // Guarded by mu.
    bool closed = false;       // Guarded by mu.
    std::thread thread;
  };

  class Link final : public Transport {
   public:
    Link(LoopbackHub* hub, size_t process) : hub_(hub), process_(process) {}
    void send_data(size_t process, uint64_t channel, uint32_t from, uint32_t to,
                   std::string payload) override {
      hub_->send(process, Frame{false, channel, 0, from, to, std::move(payload)});
    }
    void send_progress(size_t process, uint64_t channel, uint32_t from, uint64_t seq,
                       std::string payload) override {
      hub_->send(process, Frame{true, channel, seq, from, 0, std::move(payload)});
    }
    absl::Status close() override {
      hub_->close(process_);
      return absl::OkStatus();
    }

   private:
    LoopbackHub* hub_;
    size_t process_;
  };

  // Starts delivering to `receiver` and waits until every process has a receiver.
  void open(size_t process, TransportReceiver* receiver) {
    Inbox& inbox = *inboxes_[process];
    inbox.thread = std::thread([&inbox, receiver] {
      std::unique_lock lock(inbox.mu);
      for (;;) {
        inbox.cv.wait(lock, [&] { return inbox.closed || !inbox.frames.empty(); });
        if (inbox.closed) return;
        Frame frame = std::move(inbox.frames.front());
        inbox.frames.pop_front();
        lock.unlock();
        absl::Status status =
            frame.progress
                ? receiver->deliver_progress(frame.channel, frame.from, frame.seq, frame.payload)
                : receiver->deliver_data(frame.channel, frame.from, frame.to, frame.payload);
        if (!status.ok()) receiver->link_failed(status);
        lock.lock();
      }
    });
    std::unique_lock lock(mu_);
    ++opened_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return opened_ == processes_; });
  }
  void send(size_t process, Frame frame) {
    Inbox& inbox = *inboxes_[process];
    std::lock_guard lock(inbox.mu);
    if (inbox.closed) return;  // That process has finished.
    inbox.frames.push_back(std::move(frame));
    inbox.cv.notify_one();
  }
  void close(size_t process) {
    Inbox& inbox = *inboxes_[process];
    {
      std::lock_guard lock(inbox.mu);
      inbox.closed = true;
    }
    inbox.cv.notify_one();
    if (inbox.thread.joinable()) inbox.thread.join();
  }

  size_t processes_;
  std::vector<std::unique_ptr<Inbox>> inboxes_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t opened_ = 0;  // Guarded by mu_.
};

// 2 processes × 2 workers: the workers press one after another, across processes; no fiber
// unwinds before the last press, and then every one does and the dataflow completes.
TEST(AsyncClusterTest, ShutdownWaitsForEveryWorkerOfEveryProcess) {
  testing::Watchdog watchdog("ShutdownWaitsForEveryWorkerOfEveryProcess");
  constexpr size_t kProcesses = 2;
  constexpr size_t kWorkers = 2;
  constexpr size_t kTotal = kProcesses * kWorkers;
  LoopbackHub hub(kProcesses);
  std::atomic<size_t> presses{0};
  std::atomic<int> unwound{0};
  std::atomic<int> early{0};

  auto run_process = [&](size_t process) {
    Config config;
    config.workers = kWorkers;
    config.processes = kProcesses;
    config.process = process;
    config.transport = hub.factory();
    return execute(config, [&](Worker& worker) {
      ProbeHandle<uint64_t> probe;
      std::optional<ShutdownButton> button;
      bool started = false;
      worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
        AsyncOperatorBuilder<uint64_t> builder("Held", scope);
        auto [out, stream] = builder.add_output<uint64_t>();
        auto built = builder.build([&](AsyncContext& ctx, Caps) {
          started = true;
          struct Check {
            std::atomic<size_t>* presses;
            std::atomic<int>* unwound;
            std::atomic<int>* early;
            ~Check() {
              if (presses->load() < kTotal) ++*early;
              ++*unwound;
            }
          } check{&presses, &unwound, &early};
          ctx.wait_until([] { return false; });
        });
        button.emplace(std::move(built.button));
        stream | probe_with(probe);
      });
      // Global worker w presses once its body runs and w workers have pressed, whatever process
      // they are in. (A body that has not started when its worker presses never starts.)
      EXPECT_TRUE(step_until(worker, [&] { return started && presses.load() >= worker.index(); }));
      EXPECT_TRUE(probe.less_equal(0));
      presses.fetch_add(1);
      button->press();
      return step_until(worker, [&] { return probe.done(); });
    });
  };
  std::optional<absl::StatusOr<std::vector<bool>>> second;
  std::thread other([&] { second.emplace(run_process(1)); });
  auto first = run_process(0);
  other.join();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second->ok()) << second->status();
  for (bool done : *first) EXPECT_TRUE(done);
  for (bool done : **second) EXPECT_TRUE(done);
  EXPECT_EQ(unwound.load(), static_cast<int>(kTotal));
  EXPECT_EQ(early.load(), 0);
}

}  // namespace
}  // namespace weir
