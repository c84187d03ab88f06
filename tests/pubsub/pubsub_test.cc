// weir pubsub: news crosses processes (here: relays that share nothing but the server), survives
// the server going away, and hostile sessions end with an error naming what was wrong.

#include "weir/pubsub/pubsub.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "weir/mutex.h"
#include "weir/persist/client.h"
#include "weir/pubsub/v1/pubsub.grpc.pb.h"

namespace weir::pubsub {
namespace {

using std::chrono::milliseconds;

// Polls `condition` until it holds; false after a generous deadline (a failure, not a timing).
bool eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

std::unique_ptr<PubSubServer> start_server(const std::string& listen = "127.0.0.1:0",
                                           size_t max_sessions = 1024,
                                           size_t max_subscriptions = 100000) {
  return PubSubServer::start({.listen = listen,
                              .max_sessions = max_sessions,
                              .max_subscriptions = max_subscriptions})
      .value();
}

GrpcRelayOptions options_for(const std::string& address) {
  GrpcRelayOptions options;
  options.address = address;
  options.backoff_initial = milliseconds(20);
  options.backoff_max = milliseconds(200);
  return options;
}

std::shared_ptr<GrpcUpperRelay> relay_to(int port) {
  return std::make_shared<GrpcUpperRelay>(options_for("127.0.0.1:" + std::to_string(port)));
}

// What a subscriber heard.
struct Heard {
  weir::Mutex mu;
  std::vector<uint64_t> uppers ABSL_GUARDED_BY(mu);
  persist::UpperRelay::Notify notify() {
    return [this](uint64_t upper) {
      weir::MutexLock lock(mu);
      uppers.push_back(upper);
    };
  }
  bool has(uint64_t upper) {
    weir::MutexLock lock(mu);
    return std::find(uppers.begin(), uppers.end(), upper) != uppers.end();
  }
};

TEST(PubSubTest, NewsOfAnAppendReachesAnotherProcesssSubscribers) {
  auto server = start_server();
  auto writer_relay = relay_to(server->port());
  auto reader_relay = relay_to(server->port());
  const persist::ShardId shard = persist::ShardId::random();
  Heard heard;
  auto subscription = reader_relay->subscribe(shard, heard.notify());
  ASSERT_TRUE(eventually([&] {
    return writer_relay->hears_other_processes() && reader_relay->hears_other_processes();
  }));
  // The subscription reaches the server after the Hello: push until the news comes through.
  ASSERT_TRUE(eventually([&] {
    writer_relay->publish(shard, 7);
    return heard.has(7);
  }));
  EXPECT_GE(server->stats().pushes, 1u);
  // Counted once the server's Write returns, which may be after the client has read it.
  EXPECT_TRUE(eventually([&] { return server->stats().news_sent >= 1; }));
}

TEST(PubSubTest, AnAppendThroughAPersistClientWakesAReaderOfAnotherClient) {
  auto server = start_server();
  persist::PersistConfig writer_config;
  writer_config.relay = relay_to(server->port());
  persist::PersistConfig reader_config;
  reader_config.relay = relay_to(server->port());
  // A fresh store each run (--gtest_repeat): mem:// stores live as long as the process.
  const std::string store = "mem://pubsub-append-" + persist::ShardId::random().str();
  const persist::PersistLocation location{store, store};
  auto writer_client = persist::PersistClient::open(location, writer_config).value();
  auto reader_client = persist::PersistClient::open(location, reader_config).value();
  persist::WriteHandle writer = writer_client->open_writer("orders").value();
  persist::ReadHandle reader = reader_client->open_reader("orders").value();
  persist::UpperWatch watch(reader_client->relay(), reader.shard_id());
  ASSERT_TRUE(eventually([&] { return reader_config.relay->hears_other_processes(); }));
  std::this_thread::sleep_for(milliseconds(50));  // The subscription on its way (no harm if not).
  uint64_t time = 0;
  ASSERT_TRUE(eventually([&] {
    const uint64_t seen = watch.news();
    const std::vector<persist::Update> row{{"row", time, 1}};
    EXPECT_TRUE(writer.compare_and_append(row, persist::Frontier(time), persist::Frontier(time + 1))
                    .value()
                    .is_appended());
    ++time;
    return watch.wait(seen, milliseconds(200));
  }));
}

TEST(PubSubTest, ReadersLearnThatTheServerIsAwayAndTheRelayReconnects) {
  auto server = start_server();
  const int port = server->port();
  std::atomic<int> lost{0};
  GrpcRelayOptions options = options_for("127.0.0.1:" + std::to_string(port));
  options.on_connection = [&](bool connected, const std::string&) {
    if (!connected) ++lost;
  };
  auto reader_relay = std::make_shared<GrpcUpperRelay>(options);
  auto writer_relay = relay_to(port);
  const persist::ShardId shard = persist::ShardId::random();
  Heard heard;
  auto subscription = reader_relay->subscribe(shard, heard.notify());
  ASSERT_TRUE(eventually([&] { return reader_relay->hears_other_processes(); }));

  server->shutdown();
  server.reset();
  ASSERT_TRUE(eventually([&] { return !reader_relay->hears_other_processes(); }));
  EXPECT_GE(lost.load(), 1);
  // News published meanwhile is not lost locally; other processes' readers poll.
  writer_relay->publish(shard, 3);

  server = start_server("127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(eventually([&] {
    return reader_relay->hears_other_processes() && writer_relay->hears_other_processes();
  }));
  EXPECT_GE(reader_relay->connections(), 2u);
  // The subscription was sent again on the new session.
  ASSERT_TRUE(eventually([&] {
    writer_relay->publish(shard, 11);
    return heard.has(11);
  }));
}

TEST(PubSubTest, ARelayWithNoServerStillDeliversInItsOwnProcessAndEndsPromptly) {
  Heard heard;
  const persist::ShardId shard = persist::ShardId::random();
  const auto start = std::chrono::steady_clock::now();
  {
    // Port 1: nothing listens there.
    GrpcRelayOptions options = options_for("127.0.0.1:1");
    options.flush_timeout = milliseconds(100);
    GrpcUpperRelay relay(options);
    auto subscription = relay.subscribe(shard, heard.notify());
    relay.publish(shard, 5);
    EXPECT_TRUE(heard.has(5));
    EXPECT_FALSE(relay.hears_other_processes());
  }
  // The flush timeout and a connection attempt, not a hang (a generous bound).
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

// A raw client of the wire, for what GrpcUpperRelay never sends.
class RawSession {
 public:
  explicit RawSession(int port)
      : stub_(v1::PubSub::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                      grpc::InsecureChannelCredentials()))),
        stream_(stub_->Session(&context_)) {}
  bool send(const v1::ClientMessage& message) { return stream_->Write(message); }
  bool subscribe(const std::string& shard) {
    v1::ClientMessage message;
    message.set_subscribe(shard);
    return send(message);
  }
  // Reads to the end; the status the server ended the session with.
  grpc::Status finish() {
    stream_->WritesDone();
    v1::ServerMessage message;
    while (stream_->Read(&message)) {
    }
    return stream_->Finish();
  }
  bool read(v1::ServerMessage& message) { return stream_->Read(&message); }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<v1::PubSub::Stub> stub_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ClientMessage, v1::ServerMessage>> stream_;
};

TEST(PubSubTest, HostileSessionsEndWithAnErrorNamingWhatWasWrongAndOthersGoOn) {
  auto server = start_server("127.0.0.1:0", 1024, /*max_subscriptions=*/3);
  auto reader_relay = relay_to(server->port());
  auto writer_relay = relay_to(server->port());
  const persist::ShardId shard = persist::ShardId::random();
  Heard heard;
  auto subscription = reader_relay->subscribe(shard, heard.notify());

  {
    RawSession session(server->port());
    session.subscribe("s; DROP TABLE\n\xff");
    const grpc::Status status = session.finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("is not a shard id"), std::string::npos)
        << status.error_message();
    EXPECT_NE(status.error_message().find("\\n\\xff"), std::string::npos) << status.error_message();
  }
  {
    RawSession session(server->port());
    v1::ClientMessage push;
    push.mutable_push()->set_shard_id(std::string(100000, 's'));  // Over the message limit.
    session.send(push);
    EXPECT_FALSE(session.finish().ok());
  }
  {
    RawSession session(server->port());
    session.send(v1::ClientMessage());  // Nothing set.
    const grpc::Status status = session.finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("none of subscribe"), std::string::npos);
  }
  {
    RawSession session(server->port());
    for (int i = 0; i < 4; ++i) session.subscribe(persist::ShardId::random().str());
    const grpc::Status status = session.finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_NE(status.error_message().find("max_subscriptions"), std::string::npos);
  }
  // The oversized message is refused by gRPC itself, before the server sees it.
  EXPECT_GE(server->stats().sessions_refused, 3u);
  // The well-behaved sessions were not disturbed.
  ASSERT_TRUE(eventually([&] {
    writer_relay->publish(shard, 9);
    return heard.has(9);
  }));
}

TEST(PubSubTest, SessionsPastTheLimitAreRefused) {
  auto server = start_server("127.0.0.1:0", /*max_sessions=*/1);
  RawSession first(server->port());
  v1::ServerMessage hello;
  ASSERT_TRUE(first.read(hello));
  ASSERT_TRUE(hello.has_hello());
  RawSession second(server->port());
  const grpc::Status status = second.finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(status.error_message().find("max_sessions"), std::string::npos);
}

TEST(PubSubTest, AddressesAreChecked) {
  EXPECT_TRUE(check_address("127.0.0.1:6876").ok());
  EXPECT_TRUE(check_address("[::1]:6876").ok());
  EXPECT_TRUE(check_address("pubsub-host:1").ok());
  for (const char* bad : {"", "6876", ":6876", "host:", "host:0", "host:65536", "host:x1"}) {
    const absl::Status status = check_address(bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(status.message().find("HOST:PORT"), std::string::npos) << bad;
  }
  EXPECT_TRUE(check_address("127.0.0.1:0", /*allow_port_zero=*/true).ok());
  PubSubServerOptions nonsense;
  nonsense.listen = "nonsense";
  EXPECT_EQ(PubSubServer::start(nonsense).status().code(), absl::StatusCode::kInvalidArgument);
}

// A `weir ctl` commits and exits: the relay's destruction waits (flush_timeout) for the push to
// reach the server, so that readers elsewhere wake now rather than at their next slow poll.
TEST(PubSubTest, APushPublishedJustBeforeTheRelayIsDestroyedReachesTheServer) {
  auto server = start_server();
  auto reader_relay = relay_to(server->port());
  const persist::ShardId shard = persist::ShardId::random();
  Heard heard;
  auto subscription = reader_relay->subscribe(shard, heard.notify());
  {
    auto probe = relay_to(server->port());
    ASSERT_TRUE(eventually([&] {
      probe->publish(shard, 1);
      return heard.has(1);
    }));
  }
  for (uint64_t upper = 100; upper < 110; ++upper) {
    {
      GrpcRelayOptions options = options_for("127.0.0.1:" + std::to_string(server->port()));
      options.flush_timeout = std::chrono::seconds(5);
      GrpcUpperRelay writer(options);
      writer.publish(shard, upper);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (!heard.has(upper) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(5));
    }
    EXPECT_TRUE(heard.has(upper)) << "the push of " << upper << " was lost";
  }
}

// A client that subscribes and never reads blocks only its own session's writer: pushes, other
// sessions and shutdown go on.
TEST(PubSubTest, AClientThatNeverReadsHoldsUpNeitherPushesNorOthersNorShutdown) {
  auto server = start_server();
  const persist::ShardId shard = persist::ShardId::random();
  RawSession stuck(server->port());
  ASSERT_TRUE(stuck.subscribe(shard.str()));
  auto reader_relay = relay_to(server->port());
  Heard heard;
  auto subscription = reader_relay->subscribe(shard, heard.notify());
  RawSession pusher(server->port());
  v1::ClientMessage push;
  push.mutable_push()->set_shard_id(shard.str());
  // Enough news, one upper at a time, to fill the stuck client's windows many times over.
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t upper = 1; upper <= 200000; ++upper) {
    push.mutable_push()->set_upper(upper);
    ASSERT_TRUE(pusher.send(push));
  }
  ASSERT_TRUE(eventually([&] { return server->stats().pushes >= 200000; }));
  ASSERT_TRUE(eventually([&] { return heard.has(200000); }));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  const auto shutdown_start = std::chrono::steady_clock::now();
  server->shutdown();
  EXPECT_LT(std::chrono::steady_clock::now() - shutdown_start, std::chrono::seconds(5));
}

// A "server" that takes the connection and never answers (no HTTP/2): the relay neither counts
// itself connected nor hangs its destruction past the flush timeout.
TEST(PubSubTest, ARelayToAServerThatNeverAnswersEndsWithinItsFlushTimeout) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(listener, 16), 0);  // The kernel accepts; nobody reads.
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const persist::ShardId shard = persist::ShardId::random();
  for (int i = 0; i < 3; ++i) {
    Heard heard;
    const auto start = std::chrono::steady_clock::now();
    {
      GrpcRelayOptions options =
          options_for("127.0.0.1:" + std::to_string(ntohs(address.sin_port)));
      options.flush_timeout = milliseconds(200);
      GrpcUpperRelay relay(options);
      auto subscription = relay.subscribe(shard, heard.notify());
      relay.publish(shard, 4);
      EXPECT_TRUE(heard.has(4));
      std::this_thread::sleep_for(milliseconds(i * 100));
      EXPECT_FALSE(relay.hears_other_processes());
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  }
  close(listener);
}

// A reader subscribes, reads the shard, then waits: an append after its read must wake it even
// when the writer's push reaches the server before the reader's subscription does (else the
// reader sleeps until its slow safety poll). Here the "read" is instant: the push follows the
// subscription at once.
TEST(PubSubTest, AnAppendRightAfterASubscriptionWakesTheSubscriber) {
  auto server = start_server();
  auto reader_relay = relay_to(server->port());
  auto writer_relay = relay_to(server->port());
  ASSERT_TRUE(eventually([&] {
    return reader_relay->hears_other_processes() && writer_relay->hears_other_processes();
  }));
  int missed = 0;
  for (int i = 0; i < 40; ++i) {
    const persist::ShardId shard = persist::ShardId::random();
    Heard heard;
    auto subscription = reader_relay->subscribe(shard, heard.notify());
    writer_relay->publish(shard, 5);
    const auto deadline = std::chrono::steady_clock::now() + milliseconds(500);
    while (!heard.has(5) && !heard.has(UINT64_MAX) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    if (!heard.has(5) && !heard.has(UINT64_MAX)) ++missed;
  }
  EXPECT_EQ(missed, 0) << "of 40 subscribers, " << missed << " never heard of the append";
}

// A server that says Hello and then hangs (it never reads again, never ends the session): a
// relay's destruction still ends within its flush timeout (then it cancels the session).
class HangingService final : public v1::PubSub::Service {
 public:
  grpc::Status Session(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::ServerMessage, v1::ClientMessage>* stream) override {
    v1::ServerMessage hello;
    hello.mutable_hello()->set_version(1);
    stream->Write(hello);
    while (!context->IsCancelled() && !released_) std::this_thread::sleep_for(milliseconds(5));
    return grpc::Status::OK;
  }
  std::atomic<bool> released_{false};
};

TEST(PubSubTest, ARelayWhoseServerHangsAfterItsHelloEndsWithinItsFlushTimeout) {
  HangingService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  const persist::ShardId shard = persist::ShardId::random();
  GrpcRelayOptions options = options_for("127.0.0.1:" + std::to_string(port));
  options.flush_timeout = milliseconds(300);
  auto relay = std::make_unique<GrpcUpperRelay>(options);
  ASSERT_TRUE(eventually([&] { return relay->hears_other_processes(); }));
  relay->publish(shard, 8);
  const auto start = std::chrono::steady_clock::now();
  relay.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  service.released_ = true;
  server->Shutdown(std::chrono::system_clock::now());
}

}  // namespace
}  // namespace weir::pubsub
