#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"

#include "weir/mutex.h"
#include "weir/pubsub/pubsub.h"
#include "weir/pubsub/v1/pubsub.grpc.pb.h"

namespace weir::pubsub {

// One thread keeps a session to the server: it connects (with backoff while that fails), sends
// the subscriptions and pushes, and while a session is open a second thread reads its news.
class GrpcUpperRelay::Impl {
 public:
  explicit Impl(GrpcRelayOptions options) : options_(std::move(options)) {}

  void start(const std::shared_ptr<Impl>& self) {
    session_thread_ = std::thread([self] { self->run(); });
  }

  // Waits (at most flush_timeout) for pushes not sent yet, then ends the session: gracefully
  // (the server has read every push once it closes the stream) unless the deadline passes first.
  void stop() {
    {
      weir::MutexLock lock(mu_);
      const auto deadline = std::chrono::steady_clock::now() + options_.flush_timeout;
      while (!pushes_.empty() || sending_) {
        if (!changed_.wait_until(mu_, deadline)) break;
      }
      stopping_ = true;
      changed_.notify_all();
      while (!finished_) {
        if (!changed_.wait_until(mu_, deadline)) break;
      }
      if (!finished_ && context_ != nullptr) context_->TryCancel();
    }
    if (session_thread_.joinable()) session_thread_.join();
  }

  void publish(const persist::ShardId& shard, uint64_t upper) {
    local_.publish(shard, upper);
    {
      weir::MutexLock lock(mu_);
      uint64_t& pending = pushes_[shard.str()];
      pending = std::max(pending, upper);
    }
    changed_.notify_all();
  }

  persist::UpperRelay::Subscription subscribe(const std::shared_ptr<Impl>& self,
                                              const persist::ShardId& shard, Notify notify) {
    persist::UpperRelay::Subscription local = local_.subscribe(shard, std::move(notify));
    {
      weir::MutexLock lock(mu_);
      if (subscribed_[shard.str()]++ == 0) ops_.emplace_back(true, shard.str());
    }
    changed_.notify_all();
    return persist::UpperRelay::Subscription(
        [self, key = shard.str(), local = std::make_shared<Subscription>(std::move(local))] {
          local->reset();
          {
            weir::MutexLock lock(self->mu_);
            auto it = self->subscribed_.find(key);
            if (it == self->subscribed_.end() || --it->second > 0) return;
            self->subscribed_.erase(it);
            self->ops_.emplace_back(false, key);
          }
          self->changed_.notify_all();
        });
  }

  bool connected() const { return connected_.load(std::memory_order_acquire); }
  uint64_t connections() const { return connections_.load(std::memory_order_relaxed); }

 private:
  using Stream = grpc::ClientReaderWriter<v1::ClientMessage, v1::ServerMessage>;

  void run() {
    run_sessions();
    weir::MutexLock lock(mu_);
    finished_ = true;
    changed_.notify_all();
  }

  void run_sessions() {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(4096);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
                static_cast<int>(options_.backoff_initial.count()));
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(options_.backoff_max.count()));
    const std::shared_ptr<grpc::Channel> channel =
        grpc::CreateCustomChannel(options_.address, grpc::InsecureChannelCredentials(), args);
    const std::unique_ptr<v1::PubSub::Stub> stub = v1::PubSub::NewStub(channel);
    std::chrono::milliseconds backoff = options_.backoff_initial;
    for (;;) {
      auto context = std::make_unique<grpc::ClientContext>();
      {
        weir::MutexLock lock(mu_);
        if (stopping_) return;
        context_ = context.get();
      }
      const std::string why = session(*stub, *context);
      {
        weir::MutexLock lock(mu_);
        context_ = nullptr;
        if (stopping_) return;
      }
      if (connected_.exchange(false, std::memory_order_acq_rel)) {
        if (options_.on_connection) options_.on_connection(false, why);
        backoff = options_.backoff_initial;
      }
      weir::MutexLock lock(mu_);
      const auto deadline = std::chrono::steady_clock::now() + backoff;
      while (!stopping_ && changed_.wait_until(mu_, deadline)) {
      }
      backoff = std::min(backoff * 2, options_.backoff_max);
    }
  }

  // One session, until it fails or the relay stops; the reason it ended.
  std::string session(v1::PubSub::Stub& stub, grpc::ClientContext& context) {
    std::unique_ptr<Stream> stream = stub.Session(&context);
    std::atomic<bool> reading{true};
    std::thread reader([&] {
      read_news(*stream);
      {
        weir::MutexLock lock(mu_);  // So that the wait below cannot miss it.
        reading.store(false, std::memory_order_release);
      }
      changed_.notify_all();
    });
    // Every subscription again: the server forgot them with the last session.
    std::vector<std::pair<bool, std::string>> ops;
    {
      weir::MutexLock lock(mu_);
      ops_.clear();
      for (const auto& [shard, count] : subscribed_) ops.emplace_back(true, shard);
    }
    bool open = true;
    absl::flat_hash_map<std::string, uint64_t> pushes;
    for (;;) {
      v1::ClientMessage message;
      for (const auto& [subscribe, shard] : ops) {
        if (subscribe) {
          message.set_subscribe(shard);
        } else {
          message.set_unsubscribe(shard);
        }
        open = stream->Write(message);
        if (!open) break;
      }
      ops.clear();
      for (auto it = pushes.begin(); open && it != pushes.end();) {
        v1::Upper* push = message.mutable_push();
        push->set_shard_id(it->first);
        push->set_upper(it->second);
        open = stream->Write(message);
        if (open) pushes.erase(it++);
      }
      weir::MutexLock lock(mu_);
      // What this session could not send goes with the next one.
      for (const auto& [shard, upper] : pushes) {
        uint64_t& pending = pushes_[shard];
        pending = std::max(pending, upper);
      }
      pushes.clear();
      sending_ = false;
      changed_.notify_all();  // A stop() may wait for pushes to be sent.
      if (!open) break;
      while (!stopping_ && reading.load(std::memory_order_acquire) && ops_.empty() &&
             (pushes_.empty() || !connected())) {
        changed_.wait(mu_);
      }
      if (stopping_ || !reading.load(std::memory_order_acquire)) break;
      ops.swap(ops_);
      if (connected()) {
        pushes.swap(pushes_);
        sending_ = !pushes.empty();
      }
    }
    bool graceful = false;
    {
      weir::MutexLock lock(mu_);
      graceful = open && stopping_;
    }
    // Stopping: the server reads what was written, then ends the session (or stop() cancels it
    // at its deadline). Otherwise the session failed: cancelled at once.
    if (!graceful || !stream->WritesDone()) context.TryCancel();
    reader.join();
    const grpc::Status status = stream->Finish();
    return status.ok() ? "the server ended the session"
                       : absl::StrCat(status.error_message(), " (gRPC code ",
                                      static_cast<int>(status.error_code()), ")");
  }

  void read_news(Stream& stream) {
    v1::ServerMessage message;
    if (!stream.Read(&message) || !message.has_hello()) return;
    {
      weir::MutexLock lock(mu_);
      connected_.store(true, std::memory_order_release);
    }
    connections_.fetch_add(1, std::memory_order_relaxed);
    changed_.notify_all();  // Pushes held while away may go now.
    if (options_.on_connection) options_.on_connection(true, "");
    // What happened while away went unheard: every reader reads once to learn it.
    local_.wake_all();
    while (stream.Read(&message)) {
      if (!message.has_news()) continue;
      absl::StatusOr<persist::ShardId> shard = persist::ShardId::parse(message.news().shard_id());
      if (shard.ok()) local_.publish(*shard, message.news().upper());
    }
  }

  const GrpcRelayOptions options_;
  persist::LocalUpperRelay local_;
  std::thread session_thread_;
  std::atomic<bool> connected_{false};
  std::atomic<uint64_t> connections_{0};
  weir::Mutex mu_;
  weir::CondVar changed_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // run() returned.
  bool sending_ ABSL_GUARDED_BY(mu_) = false;   // Pushes taken from pushes_, being written.
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::flat_hash_map<std::string, size_t> subscribed_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<bool, std::string>> ops_ ABSL_GUARDED_BY(mu_);  // (subscribe?, shard)
  absl::flat_hash_map<std::string, uint64_t> pushes_ ABSL_GUARDED_BY(mu_);
};

GrpcUpperRelay::GrpcUpperRelay(GrpcRelayOptions options)
    : impl_(std::make_shared<Impl>(std::move(options))) {
  impl_->start(impl_);
}

GrpcUpperRelay::~GrpcUpperRelay() { impl_->stop(); }

void GrpcUpperRelay::publish(const persist::ShardId& shard, uint64_t upper) {
  impl_->publish(shard, upper);
}

persist::UpperRelay::Subscription GrpcUpperRelay::subscribe(const persist::ShardId& shard,
                                                            Notify notify) {
  return impl_->subscribe(impl_, shard, std::move(notify));
}

bool GrpcUpperRelay::hears_other_processes() const { return impl_->connected(); }
uint64_t GrpcUpperRelay::connections() const { return impl_->connections(); }

}  // namespace weir::pubsub
