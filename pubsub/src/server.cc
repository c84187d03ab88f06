#include <algorithm>
#include <atomic>
#include <charconv>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"

#include "weir/escape.h"
#include "weir/mutex.h"
#include "weir/pubsub/pubsub.h"
#include "weir/pubsub/v1/pubsub.grpc.pb.h"

namespace weir::pubsub {
namespace {

// Every message is a shard id and a number: a few dozen bytes.
constexpr int kMaxMessageBytes = 4096;

}  // namespace

absl::Status check_address(const std::string& address, bool allow_port_zero) {
  const size_t colon = address.rfind(':');
  const std::string_view port_text =
      colon == std::string::npos ? std::string_view() : std::string_view(address).substr(colon + 1);
  int port = -1;
  const auto [end, error] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  const bool port_ok = !port_text.empty() && error == std::errc() &&
                       end == port_text.data() + port_text.size() && port <= 65535 &&
                       (port > 0 || (allow_port_zero && port == 0));
  if (colon == 0 || colon == std::string::npos || !port_ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("pubsub address \"", escape(address), "\" is not HOST:PORT (a port from ",
                     allow_port_zero ? 0 : 1, " to 65535), e.g. ", kDefaultListen));
  }
  return absl::OkStatus();
}

// The server: one handler thread per session reads what the client sends; a writer thread per
// session sends it news, coalesced per shard while the client reads slowly.
class PubSubServer::Impl final : public v1::PubSub::Service {
 public:
  explicit Impl(PubSubServerOptions options) : options_(std::move(options)) {}

  absl::Status start() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options_.listen, grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) {
      server_.reset();
      return absl::UnavailableError(
          absl::StrCat("pubsub: cannot listen on ", options_.listen,
                       ": the port is in use or the host is not this machine's"));
    }
    return absl::OkStatus();
  }

  int port() const { return port_; }

  Stats stats() const {
    Stats out;
    {
      weir::MutexLock lock(mu_);
      out.sessions = sessions_;
    }
    out.pushes = pushes_.load(std::memory_order_relaxed);
    out.news_sent = news_sent_.load(std::memory_order_relaxed);
    out.sessions_refused = refused_.load(std::memory_order_relaxed);
    return out;
  }

  void shutdown() {
    {
      weir::MutexLock lock(mu_);
      if (shut_down_) return;
      shut_down_ = true;
    }
    shut_down_changed_.notify_all();
    // Sessions are long calls: cancelled at once rather than waited for.
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
    if (server_) server_->Wait();
  }

  void wait() {
    weir::MutexLock lock(mu_);
    while (!shut_down_) shut_down_changed_.wait(mu_);
  }

  grpc::Status Session(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::ServerMessage, v1::ClientMessage>* stream) override {
    const std::string peer = context->peer();
    {
      weir::MutexLock lock(mu_);
      if (sessions_ >= options_.max_sessions) {
        refused_.fetch_add(1, std::memory_order_relaxed);
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                            absl::StrCat("pubsub: ", sessions_,
                                         " sessions are open, the most this server allows "
                                         "(max_sessions); session from ",
                                         peer, " refused"));
      }
      ++sessions_;
    }
    auto session = std::make_shared<SessionState>();
    std::thread writer([this, session, stream] { write_news(*session, *stream); });

    absl::flat_hash_set<std::string> subscriptions;
    grpc::Status result = grpc::Status::OK;
    v1::ClientMessage message;
    while (result.ok() && stream->Read(&message)) {
      result = handle(message, session.get(), subscriptions, peer);
    }
    if (!result.ok()) refused_.fetch_add(1, std::memory_order_relaxed);

    {
      weir::MutexLock lock(mu_);
      for (const std::string& shard : subscriptions) unroute(shard, session.get());
      --sessions_;
    }
    {
      weir::MutexLock lock(session->mu);
      session->done = true;
    }
    session->changed.notify_all();
    // A writer blocked on a client that stopped reading is let go by cancelling the call.
    {
      weir::MutexLock lock(session->mu);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      while (!session->writer_done) {
        if (!session->changed.wait_until(session->mu, deadline)) break;
      }
      if (!session->writer_done) context->TryCancel();
    }
    writer.join();
    return result;
  }

 private:
  struct SessionState {
    weir::Mutex mu;
    weir::CondVar changed;
    // The latest upper of each shard not sent yet.
    absl::flat_hash_map<std::string, uint64_t> pending ABSL_GUARDED_BY(mu);
    bool done ABSL_GUARDED_BY(mu) = false;
    bool writer_done ABSL_GUARDED_BY(mu) = false;
  };

  void write_news(SessionState& session,
                  grpc::ServerReaderWriter<v1::ServerMessage, v1::ClientMessage>& stream) {
    v1::ServerMessage message;
    message.mutable_hello()->set_version(1);
    bool open = stream.Write(message);
    absl::flat_hash_map<std::string, uint64_t> sending;
    while (open) {
      {
        weir::MutexLock lock(session.mu);
        while (!session.done && session.pending.empty()) session.changed.wait(session.mu);
        if (session.done) break;
        sending.swap(session.pending);
      }
      for (const auto& [shard, upper] : sending) {
        v1::Upper* news = message.mutable_news();
        news->set_shard_id(shard);
        news->set_upper(upper);
        if (!stream.Write(message)) {
          open = false;
          break;
        }
        news_sent_.fetch_add(1, std::memory_order_relaxed);
      }
      sending.clear();
    }
    {
      weir::MutexLock lock(session.mu);
      session.writer_done = true;
    }
    session.changed.notify_all();
  }

  grpc::Status handle(const v1::ClientMessage& message, SessionState* session,
                      absl::flat_hash_set<std::string>& subscriptions, const std::string& peer) {
    const auto refuse = [&](const std::string& what) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("pubsub session from ", peer, ": ", what));
    };
    const auto check_id = [&](const std::string& id) -> grpc::Status {
      if (persist::ShardId::parse(id).ok()) return grpc::Status::OK;
      return refuse(absl::StrCat("\"", escape(id.substr(0, 64)), id.size() > 64 ? "..." : "",
                                 "\" is not a shard id"));
    };
    switch (message.message_case()) {
      case v1::ClientMessage::kSubscribe: {
        const std::string& shard = message.subscribe();
        if (grpc::Status status = check_id(shard); !status.ok()) return status;
        if (subscriptions.contains(shard)) return grpc::Status::OK;
        if (subscriptions.size() >= options_.max_subscriptions) {
          return grpc::Status(
              grpc::StatusCode::RESOURCE_EXHAUSTED,
              absl::StrCat("pubsub session from ", peer, ": more than ", options_.max_subscriptions,
                           " subscriptions (max_subscriptions)"));
        }
        subscriptions.insert(shard);
        {
          weir::MutexLock lock(mu_);
          routes_[shard].insert(session);
        }
        // From here on every push of the shard reaches the session; one processed before may
        // have been missed. The upper "unknown" (2^64 - 1) has the client's readers read once,
        // after which nothing they need can be missed.
        {
          weir::MutexLock lock(session->mu);
          session->pending[shard] = UINT64_MAX;
        }
        session->changed.notify_all();
        return grpc::Status::OK;
      }
      case v1::ClientMessage::kUnsubscribe: {
        const std::string& shard = message.unsubscribe();
        if (grpc::Status status = check_id(shard); !status.ok()) return status;
        if (subscriptions.erase(shard) == 0) return grpc::Status::OK;
        {
          weir::MutexLock lock(mu_);
          unroute(shard, session);
        }
        // News not sent yet of a shard no longer followed: dropped, so that what the server keeps
        // for a client that does not read stays bounded by its subscriptions.
        weir::MutexLock lock(session->mu);
        session->pending.erase(shard);
        return grpc::Status::OK;
      }
      case v1::ClientMessage::kPush: {
        const v1::Upper& push = message.push();
        if (grpc::Status status = check_id(push.shard_id()); !status.ok()) return status;
        pushes_.fetch_add(1, std::memory_order_relaxed);
        weir::MutexLock lock(mu_);
        auto route = routes_.find(push.shard_id());
        if (route == routes_.end()) return grpc::Status::OK;
        for (SessionState* other : route->second) {
          if (other == session) continue;
          {
            weir::MutexLock other_lock(other->mu);
            uint64_t& pending = other->pending[push.shard_id()];
            pending = std::max(pending, push.upper());
          }
          other->changed.notify_all();
        }
        return grpc::Status::OK;
      }
      case v1::ClientMessage::MESSAGE_NOT_SET:
        break;
    }
    return refuse("a message with none of subscribe, unsubscribe or push");
  }

  void unroute(const std::string& shard, SessionState* session) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto route = routes_.find(shard);
    if (route == routes_.end()) return;
    route->second.erase(session);
    if (route->second.empty()) routes_.erase(route);
  }

  const PubSubServerOptions options_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  mutable weir::Mutex mu_;
  weir::CondVar shut_down_changed_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  size_t sessions_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, absl::flat_hash_set<SessionState*>> routes_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> pushes_{0};
  std::atomic<uint64_t> news_sent_{0};
  std::atomic<uint64_t> refused_{0};
};

absl::StatusOr<std::unique_ptr<PubSubServer>> PubSubServer::start(PubSubServerOptions options) {
  if (absl::Status valid = check_address(options.listen, /*allow_port_zero=*/true); !valid.ok()) {
    return valid;
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  if (absl::Status started = impl->start(); !started.ok()) return started;
  return std::unique_ptr<PubSubServer>(new PubSubServer(std::move(impl)));
}

PubSubServer::PubSubServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PubSubServer::~PubSubServer() { shutdown(); }
int PubSubServer::port() const { return impl_->port(); }
PubSubServer::Stats PubSubServer::stats() const { return impl_->stats(); }
void PubSubServer::shutdown() { impl_->shutdown(); }
void PubSubServer::wait() { impl_->wait(); }

}  // namespace weir::pubsub
