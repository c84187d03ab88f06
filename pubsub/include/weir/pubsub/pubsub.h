// News of shards' uppers between processes (persist/relay.h has the idea): PubSubServer is what
// `weir pubsub --listen ADDR` runs; GrpcUpperRelay links a process to it, so that an append in
// one process wakes the readers of that shard in every other.
//
//   auto server = pubsub::PubSubServer::start({.listen = "0.0.0.0:6876"}).value();
//   ...
//   persist::PersistConfig config;
//   config.relay = std::make_shared<pubsub::GrpcUpperRelay>(
//       pubsub::GrpcRelayOptions{.address = "pubsub-host:6876"});
//
// News is a hint (see relay.h): the relay never blocks an append, drops nothing a reader needs
// (readers poll as well) and, while the server is away, readers poll at their usual interval and
// the relay reconnects with backoff. A client that reads slowly gets the latest upper of each
// shard it follows, not every one: what the server keeps for a session is bounded by its
// subscriptions.
//
// Hostile input: a message that is not a shard id, more subscriptions or sessions than the limits
// allow, or an oversized message ends that session with an error naming it; the others go on.
// The server trusts its clients to say true uppers (a false one costs readers a consensus read):
// listen on a network only weir's processes reach.
//
// Thread safety: thread-safe.

#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

#include "weir/persist/relay.h"

namespace weir::pubsub {

inline constexpr char kDefaultListen[] = "127.0.0.1:6876";

struct PubSubServerOptions {
  std::string listen = kDefaultListen;  // HOST:PORT; port 0 picks a free one (see port()).
  size_t max_sessions = 1024;
  size_t max_subscriptions = 100000;  // Per session.
};

class PubSubServer {
 public:
  struct Stats {
    size_t sessions = 0;            // Open now.
    uint64_t pushes = 0;            // Uppers received.
    uint64_t news_sent = 0;         // Uppers sent to subscribers.
    uint64_t sessions_refused = 0;  // Ended for bad input or a limit.
  };

  // Listens on options.listen: InvalidArgument for an address that does not parse, Unavailable
  // if it cannot be bound (both naming it).
  static absl::StatusOr<std::unique_ptr<PubSubServer>> start(PubSubServerOptions options);
  ~PubSubServer();  // shutdown().

  int port() const;
  Stats stats() const;
  // Ends every session and stops listening. Idempotent.
  void shutdown();
  // Blocks until shutdown() (from another thread or a signal handler's thread).
  void wait();

 private:
  class Impl;
  explicit PubSubServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct GrpcRelayOptions {
  std::string address;  // HOST:PORT of a `weir pubsub`.
  // Between two connection attempts: doubling from the first to the second while it fails.
  std::chrono::milliseconds backoff_initial{100};
  std::chrono::milliseconds backoff_max{5000};
  // How long destruction waits for pushes not sent yet (a `weir ctl` that commits and exits).
  std::chrono::milliseconds flush_timeout{500};
  // Told of each change of connection (true: connected), with the reason when lost. May be null.
  std::function<void(bool connected, const std::string& why)> on_connection;
};

// A persist::UpperRelay that delivers news to this process's subscribers at once and through a
// `weir pubsub` to every other process's.
class GrpcUpperRelay : public persist::UpperRelay {
 public:
  explicit GrpcUpperRelay(GrpcRelayOptions options);
  ~GrpcUpperRelay() override;

  void publish(const persist::ShardId& shard, uint64_t upper) override;
  Subscription subscribe(const persist::ShardId& shard, Notify notify) override;
  // True while connected to the server (its Hello received).
  bool hears_other_processes() const override;

  // Connections made so far (1 after the first; more after each reconnection).
  uint64_t connections() const;

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

// InvalidArgument unless `address` is HOST:PORT with a port from 1 to 65535 (0 too if
// `allow_port_zero`): a check for flags.
absl::Status check_address(const std::string& address, bool allow_port_zero = false);

}  // namespace weir::pubsub
