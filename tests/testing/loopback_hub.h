// LoopbackHub: an in-process Transport for tests that run several "processes" of one cluster in
// one test binary. Frames between them are delivered in order per receiver, on one thread per
// receiving process (as a real transport calls its receiver from its own threads).
//
// Thread safety: thread-safe.

#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "weir/weir.h"

namespace weir::testing {

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
    enum class Kind { kData, kProgress, kCredit } kind = Kind::kData;
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
      hub_->send(process, Frame{Frame::Kind::kData, channel, 0, from, to, std::move(payload)});
    }
    void send_progress(size_t process, uint64_t channel, uint32_t from, uint64_t seq,
                       std::string payload) override {
      hub_->send(process, Frame{Frame::Kind::kProgress, channel, seq, from, 0, std::move(payload)});
    }
    void send_credit(size_t process, uint64_t channel, uint32_t worker, uint64_t bytes) override {
      // `seq` carries the bytes.
      hub_->send(process, Frame{Frame::Kind::kCredit, channel, bytes, worker, 0, {}});
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
        absl::Status status;
        switch (frame.kind) {
          case Frame::Kind::kData:
            status = receiver->deliver_data(frame.channel, frame.from, frame.to, frame.payload);
            break;
          case Frame::Kind::kProgress:
            status =
                receiver->deliver_progress(frame.channel, frame.from, frame.seq, frame.payload);
            break;
          case Frame::Kind::kCredit:
            status = receiver->deliver_credit(frame.channel, frame.from, frame.seq);
            break;
        }
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

}  // namespace weir::testing
