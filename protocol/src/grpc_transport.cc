#include "grpc_transport.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <fstream>
#include <list>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frame.h"
#include "hostfile.h"
#include <dlfcn.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <pthread.h>

#include "weir/communication/allocator.h"
#include "weir/mutex.h"
#include "weir/protocol/v1/link.grpc.pb.h"
#include "weir/sanitizers.h"
#include "weir/status.h"

#if defined(WEIR_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

namespace weir::protocol {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kConnectMethod[] = "/weir.protocol.v1.Link/Connect";
// Queued bytes on one link beyond which send_* waits for writes to complete.
constexpr size_t kMaxQueuedBytes = size_t{64} << 20;
// The largest message a link accepts (gRPC refuses a larger one before buffering it), the size
// at which writes are split (at frame boundaries), and so the largest frame a sender may queue.
constexpr int kMaxMessageBytes = 8 << 20;
constexpr size_t kWriteChunkBytes = size_t{4} << 20;
constexpr size_t kMaxFrameBytes = size_t{kMaxMessageBytes} - 1024;
// A caller must finish the handshake (Hello, then Proof) within this, and at most this many
// callers may be in it at once; more are refused at once.
constexpr milliseconds kHandshakeTimeout{2000};
constexpr size_t kMaxHandshakes = 16;
// The largest Hello or Proof message read (a dialer's Proof may share its message with a few
// frames queued after it).
constexpr size_t kMaxHandshakeMessageBytes = size_t{64} << 10;
// The cluster secret, if given, has at least this many bytes.
constexpr size_t kMinSecretBytes = 16;
// Between attempts to dial a peer that is not up yet.
constexpr milliseconds kRetryInterval{100};
// How long a failing process waits, before cancelling its links, for each peer to have read its
// Goodbye (with the error): until the peer's own Goodbye or the end of its stream arrives.
// Cancelling as soon as the Goodbye was written lost it now and then: a peer's gRPC drops the
// messages it has received but not yet handed over when the stream is reset, and the peer
// reported a broken link instead of the error (1 in 10-30 runs of FailingWorkerFailsEveryProcess).
constexpr milliseconds kFailureGoodbyeWait{2000};
// How long the orderly end of a link (after both Goodbyes) may take before it is cancelled.
constexpr milliseconds kTeardownGrace{2000};
constexpr uint32_t kUnknownPeer = ~uint32_t{0};

// Makes gRPC run the work it would hand to its default executor threads on the thread at hand.
//
// gRPC 1.51 moves the rest of a transport's work to an executor thread whenever two threads
// meet in a transport's lock, which here is every time a worker's write meets the poller's
// read on the same link (both sides of a barrier send at once): a write, or the completion it
// posts, then takes one more thread hand-off (a wake-up, tens of µs on a small VM) and the
// executor thread competes for the cores with the workers. Inline, the worker's write reaches
// the socket at once and the poller finishes the reads it began. Measured with 2 processes on 2
// cores: exchange +20% records/s, and less CPU per barrier round.
//
// The switch is gRPC's grpc_core::Executor::SetThreadingDefault, which its own tests use; it is
// not a public API, so it is looked up at run time and skipped where it is missing (another
// gRPC release): the transport then works as before, only slower. It affects every gRPC user
// in the process and stays off until gRPC shuts down (grpc_init turns it on again, so each
// transport repeats it). The resolver executor (blocking DNS look-ups) is left alone.
// REQUIRES: gRPC initialized, with nothing queued on the executor yet (its threads are joined).
void run_grpc_executor_inline() {
  using SetThreading = void (*)(bool);
  static const auto set_threading = reinterpret_cast<SetThreading>(
      dlsym(RTLD_DEFAULT, "_ZN9grpc_core8Executor19SetThreadingDefaultEb"));
  // gRPC's switch is not safe for two callers at once (transports of one process may start
  // together, as in tests): both would join and free the same threads.
  static weir::Mutex mu;
  if (set_threading == nullptr) return;
  weir::MutexLock lock(mu);
  set_threading(false);
}

absl::StatusOr<std::string> read_file(const std::string& path, const char* flag) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read ", flag, " file ", path));
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// Error if a hostfile address is not loopback and the links would go without TLS, unless the
// user allowed that (--insecure-links): the cluster secret authenticates the handshake only, so
// whoever is on the network between two hosts could read and alter every frame after it.
absl::Status check_links_protected(const Config& config,
                                   const std::vector<std::string>& addresses) {
  const bool has_secret = !config.cluster_secret.empty() || !config.cluster_secret_file.empty();
  const bool has_tls = !config.tls_cert.empty() || !config.tls_key.empty();
  // Incomplete TLS flags are refused when the credentials are made. TLS without a CA encrypts
  // but does not ask callers for a certificate: members are then known by the secret alone.
  if (config.insecure_links || !config.tls_ca.empty() || (has_tls && has_secret)) {
    return absl::OkStatus();
  }
  for (size_t p = 0; p < addresses.size(); ++p) {
    if (is_loopback(addresses[p])) continue;
    const char* why =
        has_tls ? "TLS without --tls-ca does not ask callers for a certificate, so anyone who "
                  "reaches the port could join: add --tls-ca (mutual TLS) or a cluster secret "
                  "(--cluster-secret-file)"
                : "the links have no TLS: give every process --tls-cert, --tls-key and --tls-ca "
                  "(mutual TLS with a certificate per process, see docs/cluster.md, \"Mutual "
                  "TLS\")";
    return absl::FailedPreconditionError(
        absl::StrCat("hostfile ", config.hostfile, " lists ", addresses[p], " (process ", p,
                     "), which is not a loopback address, and ", why,
                     ", or, on a network you trust, allow it with --insecure-links (or "
                     "$WEIR_INSECURE_LINKS=1)"));
  }
  return absl::OkStatus();
}

// The URI subjectAltName that binds a TLS certificate to a process index.
std::string process_san(uint32_t process) { return absl::StrCat("weir:process:", process); }

// OK if the peer's certificate, as gRPC's `auth` context shows it, has the URI subjectAltName
// process_san(process); otherwise an error naming the subjectAltNames it has. With mutual TLS the
// CA's signature says only that a certificate is one of the cluster's; this says whose, so that
// a certificate of one process cannot claim another's index.
absl::Status check_certificate_names(const std::shared_ptr<const grpc::AuthContext>& auth,
                                     uint32_t process) {
  const std::string wanted = process_san(process);
  if (auth == nullptr || !auth->IsPeerAuthenticated()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "it presented no TLS certificate (it needs one with the URI subjectAltName ", wanted, ")"));
  }
  // peer_uri holds the URI subjectAltNames only: a DNS name or a subject spelled like one does
  // not count.
  for (const grpc::string_ref& uri : auth->FindPropertyValues(GRPC_PEER_URI_PROPERTY_NAME)) {
    if (uri == grpc::string_ref(wanted)) return absl::OkStatus();
  }
  std::vector<std::string> seen;
  for (const grpc::string_ref& san : auth->FindPropertyValues(GRPC_X509_SAN_PROPERTY_NAME)) {
    seen.emplace_back(san.data(), san.size());
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "its TLS certificate does not name process ", process, " (it needs the URI subjectAltName ",
      wanted, "; its subjectAltNames: ", seen.empty() ? "none" : absl::StrJoin(seen, ", "), ")"));
}

class GrpcTransport;
struct Connection;

// A completion-queue tag: the poller runs `handler` on the transport when the operation ends.
struct Tag {
  using Handler = void (GrpcTransport::*)(Connection*, bool);
  Connection* connection;
  Handler handler;
};

// The completion queue orders what a thread did before it started an operation before what the
// poller does once the operation's tag comes back; Debian's gRPC is not built for
// ThreadSanitizer, which cannot see that order unless it is told (a release on the tag when the
// operation starts, an acquire when the poller takes it).
void handed_to_queue([[maybe_unused]] const Tag* tag) {
#if defined(WEIR_TSAN)
  __tsan_release(const_cast<Tag*>(tag));
#endif
}
void taken_from_queue([[maybe_unused]] const Tag* tag) {
#if defined(WEIR_TSAN)
  __tsan_acquire(const_cast<Tag*>(tag));
#endif
}

// One gRPC call: a link to a peer once both Hellos went through, before that a handshake.
struct Connection {
  enum class Side { kDialer, kAcceptor };
  // kHello: waiting for the peer's Hello; kProof: an acceptor that answered, waiting for the
  // dialer's Proof; a dialer whose peer is stale stays in kHello until the call ends.
  enum class Phase { kStarting, kHello, kProof, kOpen, kEnding, kDone };

  Connection(Side s, uint32_t p, std::string a) : side(s), peer(p), address(std::move(a)) {}

  const Side side;
  uint32_t peer;        // kUnknownPeer for an acceptor before its Hello.
  std::string address;  // The peer's hostfile address (or, before Hello, where it called from).

  // The call: a dialer's client side or an acceptor's server side.
  std::unique_ptr<grpc::ClientContext> client_context;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> client_stream;
  grpc::ServerContext server_context;
  grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> server_stream{&server_context};
  grpc::ByteBuffer read_buffer;
  grpc::Status finish_status;
  std::optional<FrameReader> reader;  // Once open; used only by the poller thread.
  // The handshake's Hellos (used only by the poller thread): what this side sent and received.
  Hello hello_sent, hello_received;
  std::string handshake_error;  // Why a dialer gave up on this call (it then dials again).

  Tag accept_tag, start_tag, read_tag, write_tag, writes_done_tag, finish_tag;
  std::atomic<int> ops{0};  // Operations in flight.

  weir::Mutex mu;
  weir::CondVar space;  // Signalled when `pending` shrinks or writes close.
  Phase phase ABSL_GUARDED_BY(mu) = Phase::kStarting;
  // Frames for the next writes: one message each, of at most kWriteChunkBytes unless one frame
  // is larger.
  std::deque<std::string> pending ABSL_GUARDED_BY(mu);
  size_t pending_bytes ABSL_GUARDED_BY(mu) = 0;
  bool writing ABSL_GUARDED_BY(mu) = false;       // A write is in flight.
  bool write_closed ABSL_GUARDED_BY(mu) = false;  // No more writes (broken, failed, shut down).
  bool goodbye_queued ABSL_GUARDED_BY(mu) = false;
  bool goodbye_written ABSL_GUARDED_BY(mu) = false;
  bool goodbye_received ABSL_GUARDED_BY(mu) = false;
  bool read_ended ABSL_GUARDED_BY(mu) = false;
  bool writes_done_sent ABSL_GUARDED_BY(mu) = false;
  bool writes_done ABSL_GUARDED_BY(mu) = false;
  bool finish_sent ABSL_GUARDED_BY(mu) = false;
  bool failed ABSL_GUARDED_BY(mu) = false;      // Reported to the receiver.
  bool registered ABSL_GUARDED_BY(mu) = false;  // In GrpcTransport::links_.
  Clock::time_point since ABSL_GUARDED_BY(mu);  // When the phase began.
  Clock::time_point last_read ABSL_GUARDED_BY(mu);
  Clock::time_point last_queued ABSL_GUARDED_BY(mu);
  Clock::time_point ended_at ABSL_GUARDED_BY(mu);  // Both Goodbyes exchanged.

  std::string name() const {
    return peer == kUnknownPeer ? absl::StrCat("a connection from ", address)
                                : absl::StrCat("process ", peer, " (", address, ")");
  }
  void cancel() {
    if (side == Side::kDialer) {
      if (client_context) client_context->TryCancel();
    } else {
      server_context.TryCancel();
    }
  }
  bool link_done() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return failed || phase == Phase::kDone || (goodbye_received && write_closed);
  }
};

class GrpcTransport final : public Transport {
 public:
  GrpcTransport(const Config& config, std::vector<std::string> addresses, Hello mine,
                TransportReceiver& receiver)
      : addresses_(std::move(addresses)),
        mine_(std::move(mine)),
        heartbeat_timeout_(config.heartbeat_timeout),
        startup_timeout_(config.startup_timeout),
        heartbeat_interval_(std::max(milliseconds(1), config.heartbeat_timeout / 4)),
        tick_(std::clamp(config.heartbeat_timeout / 10, milliseconds(5), milliseconds(100))),
        receiver_(receiver),
        links_(addresses_.size(), nullptr),
        dials_(addresses_.size()) {}

  ~GrpcTransport() override {
    shutdown();
    if (grpc_initialized_) grpc_shutdown();
  }

  absl::Status start(const Config& config);
  absl::Status await_startup(Clock::time_point deadline);

  void send_data(size_t process, uint64_t channel, uint32_t from, uint32_t to,
                 std::string payload) override {
    Connection* link = links_[process];
    if (link == nullptr || !fits(payload, "data batch", channel)) return;
    enqueue(link, Frame::kData,
            [&](std::string& batch) { append_data(channel, from, to, payload, batch); });
  }
  void send_progress(size_t process, uint64_t channel, uint32_t from, uint64_t seq,
                     std::string payload) override {
    Connection* link = links_[process];
    if (link == nullptr || !fits(payload, "progress batch", channel)) return;
    enqueue(link, Frame::kProgress,
            [&](std::string& batch) { append_progress(channel, from, seq, payload, batch); });
  }
  void send_credit(size_t process, uint64_t channel, uint32_t worker, uint64_t bytes) override {
    Connection* link = links_[process];
    if (link == nullptr) return;
    enqueue(link, Frame::kCredit,
            [&](std::string& batch) { append_credit(channel, worker, bytes, batch); });
  }
  absl::Status close() override;

  // Completion handlers, run by the poller thread.
  void on_accept(Connection* c, bool ok);
  void on_start(Connection* c, bool ok);
  void on_read(Connection* c, bool ok);
  void on_write(Connection* c, bool ok);
  void on_writes_done(Connection* c, bool ok);
  void on_finish(Connection* c, bool ok);

 private:
  enum class Frame { kHello, kProof, kData, kProgress, kCredit, kHeartbeat, kGoodbye };
  // False (and the execution fails) if a frame of `payload` would not fit a message.
  bool fits(const std::string& payload, const char* what, uint64_t channel) {
    if (payload.size() <= kMaxFrameBytes) return true;
    set_fatal(absl::ResourceExhaustedError(
        absl::StrCat("process ", mine_.process, " cannot send a ", what, " of ", payload.size(),
                     " bytes on channel ", channel, ": a link carries messages of at most ",
                     kMaxMessageBytes, " bytes")));
    return false;
  }
  struct Dial {
    bool active = false;
    Clock::time_point next;
    std::string last_error;
  };

  Connection* add_connection(Connection::Side side, uint32_t peer, std::string address);
  // Starts an operation on `c` that ends with `tag` (`start(&tag)`), unless the completion queue is
  // shutting down.
  template <class F>
  bool issue(Connection* c, Tag& tag, F&& start);
  void accept_next();
  void dial(uint32_t peer);
  void start_read(Connection* c);
  template <class Append>
  void enqueue(Connection* c, Frame kind, Append&& append);
  void write(Connection* c, std::string bytes);
  void on_hello(Connection* c, absl::Status parsed, const v1::FrameBatch& batch);
  void on_proof(Connection* c, absl::Status parsed, const v1::FrameBatch& batch);
  // With mutual TLS: OK if the peer's certificate names `process` (check_certificate_names).
  absl::Status check_peer_certificate(Connection* c, uint32_t process);
  // Registers an established link and starts reading; frames of `batch` from the `first`th on
  // are the first the link delivers.
  void open_link(Connection* c, const v1::FrameBatch* batch, int first);
  // After frames were delivered: the next read, Goodbye, or the failure of the link.
  void after_frames(Connection* c, absl::Status status);
  // Ends a handshake: `local` (what differs, naming this process's settings) is kept for this
  // process's errors; the caller is told only `for_peer`.
  void refuse(Connection* c, const absl::Status& local, absl::string_view for_peer,
              grpc::StatusCode code = grpc::StatusCode::FAILED_PRECONDITION);
  void on_read_ended(Connection* c);
  void maybe_finish(Connection* c);
  void fail_link(Connection* c, absl::Status status);
  void set_fatal(absl::Status status);
  void poll();
  void tick();
  // The local workers' error, or "" if they did not fail.
  std::string local_failure() const;
  void shutdown();

  const std::vector<std::string> addresses_;
  const Hello mine_;
  std::string secret_;  // The cluster secret (may be empty); set by start().
  // Peers present certificates (--tls-ca), which must name their process; set by start().
  bool mutual_tls_ = false;
  const milliseconds heartbeat_timeout_, startup_timeout_, heartbeat_interval_, tick_;
  TransportReceiver& receiver_;

  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;  // Per lower-numbered peer.
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  v1::Link::WithRawMethod_Connect<v1::Link::Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::thread poller_;
  std::thread ticker_;

  // Operations start under a shared lock while cq_open_; shutdown takes it exclusively to close
  // the queue, so no operation starts on a shut-down queue.
  std::shared_mutex cq_mu_;
  bool cq_open_ = false;  // Guarded by cq_mu_ (a shared mutex: not annotated).

  // Lock order: mu_ before any Connection::mu.
  mutable weir::Mutex mu_;
  weir::CondVar changed_;  // Links, Goodbyes, failures.
  weir::CondVar stop_ticker_;
  std::list<std::unique_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
  // Established links by process. Written only before connect_grpc returns (no sender runs
  // yet), so send_* reads it without the lock.
  std::vector<Connection*> links_;
  std::vector<Dial> dials_ ABSL_GUARDED_BY(mu_);
  size_t established_ ABSL_GUARDED_BY(mu_) = 0;
  bool startup_done_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // The ticker stops, nothing new starts.
  absl::Status fatal_ ABSL_GUARDED_BY(mu_);     // The first link failure or start-up error.
  std::string last_refusal_ ABSL_GUARDED_BY(mu_);
  bool closed_ = false;
  bool shut_down_ = false;
  bool grpc_initialized_ = false;  // This transport holds a grpc_init reference.
};

// ---- Start-up ----

absl::Status GrpcTransport::start(const Config& config) {
  WEIR_RETURN_IF_ERROR(check_links_protected(config, addresses_));
  // Before any server, channel or call exists, so the executor has nothing queued.
  grpc_init();
  grpc_initialized_ = true;
  run_grpc_executor_inline();
  if (!config.cluster_secret.empty() && !config.cluster_secret_file.empty()) {
    return absl::InvalidArgumentError(
        "the cluster secret is given twice ($WEIR_CLUSTER_SECRET, and --cluster-secret-file or "
        "$WEIR_CLUSTER_SECRET_FILE): give it once");
  }
  secret_ = config.cluster_secret;
  if (!config.cluster_secret_file.empty()) {
    WEIR_ASSIGN_OR_RETURN(secret_, read_file(config.cluster_secret_file, "--cluster-secret-file"));
    if (!secret_.empty() && secret_.back() == '\n') secret_.pop_back();
    if (secret_.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--cluster-secret-file ", config.cluster_secret_file, " is empty"));
    }
  }
  if (!secret_.empty() && secret_.size() < kMinSecretBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the cluster secret has ", secret_.size(),
                                                   " bytes; it needs at least ", kMinSecretBytes,
                                                   " (for example 32 random bytes, hex-encoded)"));
  }
  std::shared_ptr<grpc::ServerCredentials> server_credentials = grpc::InsecureServerCredentials();
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials =
      grpc::InsecureChannelCredentials();
  if (!config.tls_cert.empty() || !config.tls_key.empty() || !config.tls_ca.empty()) {
    if (config.tls_cert.empty() || config.tls_key.empty()) {
      return absl::InvalidArgumentError(
          "TLS needs both --tls-cert and --tls-key (and --tls-ca for mutual TLS)");
    }
    WEIR_ASSIGN_OR_RETURN(std::string cert, read_file(config.tls_cert, "--tls-cert"));
    WEIR_ASSIGN_OR_RETURN(std::string key, read_file(config.tls_key, "--tls-key"));
    std::string ca;
    if (!config.tls_ca.empty()) {
      WEIR_ASSIGN_OR_RETURN(ca, read_file(config.tls_ca, "--tls-ca"));
    }
    grpc::SslServerCredentialsOptions server_options(
        ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                   : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    server_options.pem_root_certs = ca;
    server_options.pem_key_cert_pairs.push_back({key, cert});
    server_credentials = grpc::SslServerCredentials(server_options);
    grpc::SslCredentialsOptions channel_options;
    channel_options.pem_root_certs = ca;  // Empty: the system's roots.
    channel_options.pem_private_key = key;
    channel_options.pem_cert_chain = cert;
    channel_credentials = grpc::SslCredentials(channel_options);
    mutual_tls_ = !ca.empty();
  }

  const std::string& address = addresses_[mine_.process];
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, server_credentials, &port);
  builder.RegisterService(&service_);
  // Bounded: a caller cannot make this process buffer a message larger than this, whatever
  // it says (senders split their writes well below it).
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  // Without this, gRPC listens with SO_REUSEPORT, and a second process on the same port would
  // silently share it instead of failing.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  cq_ = builder.AddCompletionQueue();
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat(
        "process ", mine_.process, " cannot listen on ", address,
        " (its line in the hostfile): the port is in use or not on this host, or the TLS "
        "certificate and key are not valid"));
  }
  {
    std::unique_lock lock(cq_mu_);
    cq_open_ = true;
  }

  stubs_.resize(mine_.process);
  for (uint32_t p = 0; p < mine_.process; ++p) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxMessageBytes);
    args.SetMaxSendMessageSize(kMaxMessageBytes);
    // Retry quickly while the peer is starting (gRPC's default backoff starts at 1 s).
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // Our own connections, not shared with another transport in this process.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    stubs_[p] = std::make_unique<grpc::GenericStub>(
        grpc::CreateCustomChannel(addresses_[p], channel_credentials, args));
  }

  poller_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "weir-link");
    poll();
  });
  accept_next();
  for (uint32_t p = 0; p < mine_.process; ++p) dial(p);
  ticker_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "weir-heartbeat");
    tick();
  });
  return absl::OkStatus();
}

absl::Status GrpcTransport::await_startup(Clock::time_point deadline) {
  weir::MutexLock lock(mu_);
  const size_t peers = addresses_.size() - 1;
  while (established_ != peers && fatal_.ok()) {
    if (!changed_.wait_until(mu_, deadline)) break;
  }
  if (!fatal_.ok()) return fatal_;
  if (established_ == peers) {
    startup_done_ = true;
    return absl::OkStatus();
  }
  std::vector<std::string> missing;
  std::string errors;
  for (uint32_t p = 0; p < addresses_.size(); ++p) {
    if (p == mine_.process || links_[p] != nullptr) continue;
    missing.push_back(absl::StrCat(p, " (", addresses_[p], ")"));
    if (p < mine_.process && !dials_[p].last_error.empty()) {
      absl::StrAppend(&errors, "; dialing process ", p, ": ", dials_[p].last_error);
    }
  }
  if (!last_refusal_.empty()) absl::StrAppend(&errors, "; last refused: ", last_refusal_);
  return absl::DeadlineExceededError(
      absl::StrCat("process ", mine_.process, " gave up waiting for process",
                   missing.size() > 1 ? "es " : " ", absl::StrJoin(missing, ", "), " after ",
                   startup_timeout_.count(), " ms (--startup-timeout-ms)", errors));
}

Connection* GrpcTransport::add_connection(Connection::Side side, uint32_t peer,
                                          std::string address) {
  auto owned = std::make_unique<Connection>(side, peer, std::move(address));
  Connection* c = owned.get();
  for (Tag* tag : {&c->accept_tag, &c->start_tag, &c->read_tag, &c->write_tag, &c->writes_done_tag,
                   &c->finish_tag}) {
    tag->connection = c;
  }
  c->accept_tag.handler = &GrpcTransport::on_accept;
  c->start_tag.handler = &GrpcTransport::on_start;
  c->read_tag.handler = &GrpcTransport::on_read;
  c->write_tag.handler = &GrpcTransport::on_write;
  c->writes_done_tag.handler = &GrpcTransport::on_writes_done;
  c->finish_tag.handler = &GrpcTransport::on_finish;
  {
    // Not shared yet; the lock costs nothing and keeps the analysis exact.
    weir::MutexLock link_lock(c->mu);
    c->since = c->last_read = c->last_queued = Clock::now();
  }
  weir::MutexLock lock(mu_);
  if (stopping_) return nullptr;
  connections_.push_back(std::move(owned));
  return c;
}

template <class F>
bool GrpcTransport::issue(Connection* c, Tag& tag, F&& start) {
  std::shared_lock lock(cq_mu_);
  if (!cq_open_) return false;
  // Relaxed: the poller's decrement (acq_rel) follows the completion of this very operation.
  c->ops.fetch_add(1, std::memory_order_relaxed);
  handed_to_queue(&tag);
  start(&tag);
  return true;
}

void GrpcTransport::accept_next() {
  Connection* c = add_connection(Connection::Side::kAcceptor, kUnknownPeer, "");
  if (c == nullptr) return;
  issue(c, c->accept_tag, [&](Tag* tag) {
    service_.RequestConnect(&c->server_context, &c->server_stream, cq_.get(), cq_.get(), tag);
  });
}

void GrpcTransport::dial(uint32_t peer) {
  Connection* c = add_connection(Connection::Side::kDialer, peer, addresses_[peer]);
  if (c == nullptr) return;
  {
    weir::MutexLock lock(mu_);
    dials_[peer].active = true;
  }
  c->client_context = std::make_unique<grpc::ClientContext>();
  c->client_stream = stubs_[peer]->PrepareCall(c->client_context.get(), kConnectMethod, cq_.get());
  issue(c, c->start_tag, [&](Tag* tag) { c->client_stream->StartCall(tag); });
}

void GrpcTransport::start_read(Connection* c) {
  issue(c, c->read_tag, [&](Tag* tag) {
    if (c->side == Connection::Side::kDialer) {
      c->client_stream->Read(&c->read_buffer, tag);
    } else {
      c->server_stream.Read(&c->read_buffer, tag);
    }
  });
}

// ---- Sending ----

template <class Append>
void GrpcTransport::enqueue(Connection* c, Frame kind, Append&& append) {
  std::string bytes;
  {
    weir::MutexLock lock(c->mu);
    if (kind == Frame::kData || kind == Frame::kProgress) {
      // Backpressure: wait while the peer is behind (a lost peer closes the link's writes).
      while (c->pending_bytes >= kMaxQueuedBytes && !c->write_closed) c->space.wait(c->mu);
    }
    // After Goodbye only the orderly end follows; frames for a peer that is gone are dropped.
    if (c->write_closed || (c->goodbye_queued && kind != Frame::kHello)) return;
    if (kind == Frame::kGoodbye) c->goodbye_queued = true;
    if (c->pending.empty()) c->pending.emplace_back();
    std::string& chunk = c->pending.back();
    const size_t before = chunk.size();
    append(chunk);
    c->pending_bytes += chunk.size() - before;
    if (chunk.size() > kWriteChunkBytes && before > 0) {
      // Messages stay below the receivers' limit: this frame starts the next one.
      std::string next = chunk.substr(before);
      chunk.resize(before);
      c->pending.push_back(std::move(next));
    }
    c->last_queued = Clock::now();
    if (c->writing) return;  // Goes out with the next write: coalesced.
    c->writing = true;
    bytes.swap(c->pending.front());
    c->pending.pop_front();
    c->pending_bytes -= bytes.size();
  }
  write(c, std::move(bytes));
}

void GrpcTransport::write(Connection* c, std::string bytes) {
  // The slice owns the bytes: no copy on the way into gRPC.
  auto* owned = new std::string(std::move(bytes));
  grpc::Slice slice(
      owned->data(), owned->size(), [](void* p) { delete static_cast<std::string*>(p); }, owned);
  grpc::ByteBuffer buffer(&slice, 1);
  const bool started = issue(c, c->write_tag, [&](Tag* tag) {
    if (c->side == Connection::Side::kDialer) {
      c->client_stream->Write(buffer, tag);
    } else {
      c->server_stream.Write(buffer, tag);
    }
  });
  if (!started) {
    weir::MutexLock lock(c->mu);
    c->writing = false;
    c->write_closed = true;
    c->space.notify_all();
  }
}

void GrpcTransport::on_write(Connection* c, bool ok) {
  std::string next;
  bool notify = !ok;
  {
    weir::MutexLock lock(c->mu);
    if (!ok) {
      // The stream broke: the read side reports it (or the handshake retries).
      c->writing = false;
      c->write_closed = true;
      c->pending.clear();
      c->pending_bytes = 0;
    } else if (c->pending.empty()) {
      c->writing = false;
      if (c->goodbye_queued) c->goodbye_written = notify = true;
    } else {
      next.swap(c->pending.front());
      c->pending.pop_front();
      c->pending_bytes -= next.size();
    }
    c->space.notify_all();
  }
  if (!next.empty()) {
    write(c, std::move(next));
    return;
  }
  maybe_finish(c);
  if (notify) changed_.notify_all();
}

// ---- Receiving ----

void GrpcTransport::on_accept(Connection* c, bool ok) {
  if (!ok) {  // The server is shutting down.
    weir::MutexLock lock(c->mu);
    c->phase = Connection::Phase::kDone;
    return;
  }
  accept_next();
  size_t handshakes = 0;
  {
    weir::MutexLock lock(mu_);
    for (const auto& other : connections_) {
      if (other.get() == c || other->side != Connection::Side::kAcceptor) continue;
      weir::MutexLock link_lock(other->mu);
      if (other->phase == Connection::Phase::kHello || other->phase == Connection::Phase::kProof) {
        ++handshakes;
      }
    }
  }
  {
    weir::MutexLock lock(c->mu);
    c->address = c->server_context.peer();
    c->phase = Connection::Phase::kHello;
    c->since = Clock::now();
  }
  if (handshakes >= kMaxHandshakes) {
    // Each caller in the handshake may hold a message's worth of memory: a bounded number.
    refuse(c,
           absl::ResourceExhaustedError(
               absl::StrCat("process ", mine_.process, " refused a link from ", c->address, ": ",
                            kMaxHandshakes, " other callers were in the handshake")),
           "refused: too many callers are linking at once");
    return;
  }
  start_read(c);
}

void GrpcTransport::on_start(Connection* c, bool ok) {
  {
    weir::MutexLock lock(c->mu);
    c->phase = Connection::Phase::kHello;
    c->since = Clock::now();
    if (!ok) c->read_ended = true;
  }
  if (!ok) {
    maybe_finish(c);
    return;
  }
  c->hello_sent = mine_;
  c->hello_sent.nonce = make_nonce();
  enqueue(c, Frame::kHello, [&](std::string& batch) { append_hello(c->hello_sent, batch); });
  start_read(c);
}

void GrpcTransport::on_read(Connection* c, bool ok) {
  if (!ok) {
    on_read_ended(c);
    return;
  }
  Connection::Phase phase;
  {
    weir::MutexLock lock(c->mu);
    phase = c->phase;
    c->last_read = Clock::now();
  }
  grpc::ByteBuffer buffer;
  buffer.Swap(&c->read_buffer);

  grpc::Slice slice;
  absl::Status parsed = absl::OkStatus();
  google::protobuf::Arena arena;
  auto* batch = google::protobuf::Arena::CreateMessage<v1::FrameBatch>(&arena);
  const bool handshake = phase == Connection::Phase::kHello || phase == Connection::Phase::kProof;
  if (handshake && buffer.Length() > kMaxHandshakeMessageBytes) {
    // A Hello or a Proof is a few dozen bytes: not copied or parsed.
    parsed = absl::InvalidArgumentError(
        absl::StrCat("malformed frame: a handshake message of ", buffer.Length(), " bytes"));
  } else if (!buffer.DumpToSingleSlice(&slice).ok()) {
    parsed = absl::InvalidArgumentError("malformed frame: an unreadable message");
  } else {
    parsed = parse_batch(
        std::string_view(reinterpret_cast<const char*>(slice.begin()), slice.size()), *batch);
  }
  if (phase == Connection::Phase::kHello) {
    on_hello(c, parsed, *batch);
    return;
  }
  if (phase == Connection::Phase::kProof) {
    on_proof(c, parsed, *batch);
    return;
  }
  if (phase != Connection::Phase::kOpen) return;
  after_frames(c, parsed.ok() ? c->reader->on_batch(*batch) : parsed);
}

void GrpcTransport::after_frames(Connection* c, absl::Status status) {
  // The next batch: after this one is delivered, so a waiting worker hears of it first.
  if (status.ok()) start_read(c);
  if (c->reader->goodbye_received()) {
    {
      weir::MutexLock lock(c->mu);
      c->goodbye_received = true;
    }
    changed_.notify_all();
  }
  if (!status.ok()) {
    if (absl::IsAborted(status)) {
      fail_link(c, absl::AbortedError(absl::StrCat(c->name(), " ", status.message())));
    } else {
      fail_link(c, absl::Status(status.code(),
                                absl::StrCat(c->name(),
                                             " sent a frame this process refuses, so its link "
                                             "is closed: ",
                                             status.message())));
    }
    return;
  }
  maybe_finish(c);
}

void GrpcTransport::on_hello(Connection* c, absl::Status parsed, const v1::FrameBatch& batch) {
  absl::StatusOr<Hello> hello = parsed.ok() ? read_hello(batch) : parsed;
  absl::Status status = hello.ok() ? check_membership(mine_, *hello) : hello.status();
  if (status.ok() && hello->nonce.size() != kNonceBytes) {
    status = absl::InvalidArgumentError(
        absl::StrCat("its nonce has ", hello->nonce.size(), " bytes, not ", kNonceBytes));
  }
  if (c->side == Connection::Side::kDialer) {
    // The acceptor's answer to our Hello.
    if (status.ok() && hello->process != c->peer) {
      status =
          absl::FailedPreconditionError(absl::StrCat("it says it is process ", hello->process));
    }
    if (!status.ok()) {
      set_fatal(absl::FailedPreconditionError(
          absl::StrCat("process ", mine_.process, " dialed ", c->name(),
                       ", which answered with a Hello this process refuses: ", status.message())));
      c->cancel();
      return;
    }
    if (absl::Status named = check_peer_certificate(c, c->peer); !named.ok()) {
      // Whoever answers holds a certificate the CA signed, but not process c->peer's: it cannot
      // be that process. As with one that does not prove the secret, we dial again until the
      // start-up timeout, whose error names it; the call ends without a Proof.
      c->handshake_error =
          absl::StrCat("process ", mine_.process, " refused whoever answers at ", c->address,
                       " (saying it is process ", c->peer, "): ", named.message());
      c->cancel();
      start_read(c);  // Fails at once: the call then finishes, and the dial is retried.
      return;
    }
    const Hello& theirs = *hello;
    if (!mac_matches(handshake_mac(secret_, Role::kAcceptor, c->hello_sent, theirs),
                     theirs.proof)) {
      // Whoever answers there does not know the secret: not a member, and nothing it said
      // counts. Our proof goes out all the same (it shows nothing but that we hold a key), so
      // that a member with another secret can say why it refuses us; then we dial again (the
      // real process may not be up yet) until the start-up timeout.
      c->handshake_error = absl::StrCat(
          "whoever answers at ", c->address,
          " did not prove the cluster secret (is the secret the same for every process?)");
      const std::string mac = handshake_mac(secret_, Role::kDialer, c->hello_sent, theirs);
      enqueue(c, Frame::kProof, [&](std::string& out) { append_proof(mac, out); });
      start_read(c);
      return;
    }
    // A member: now its incarnation counts.
    absl::Status current = check_incarnation(mine_, theirs);
    if (!current.ok() && theirs.incarnation > mine_.incarnation) {
      set_fatal(absl::FailedPreconditionError(
          absl::StrCat("process ", mine_.process, " is stale: ", c->name(),
                       " answered its Hello, and ", current.message())));
      c->cancel();
      return;
    }
    const std::string mac = handshake_mac(secret_, Role::kDialer, c->hello_sent, theirs);
    enqueue(c, Frame::kProof, [&](std::string& out) { append_proof(mac, out); });
    if (!current.ok()) {
      // The acceptor is stale: with our proof it knows it and exits; the call then ends and we
      // dial again, for a current process.
      start_read(c);
      return;
    }
    c->hello_received = theirs;
    open_link(c, nullptr, 0);
    return;
  }
  // An acceptor: a caller's Hello. Nothing it says is acted on until it proves the secret.
  if (status.ok() && hello->process < mine_.process) {
    status = absl::FailedPreconditionError(
        absl::StrCat("it says it is process ", hello->process,
                     ", but only higher-numbered processes dial lower-numbered ones (is the "
                     "hostfile the same for every process?)"));
  }
  if (!status.ok()) {
    refuse(c,
           absl::FailedPreconditionError(
               absl::StrCat("process ", mine_.process, " (", addresses_[mine_.process],
                            ") refused a link from ", c->address, ": ", status.message())),
           hello.ok() ? refusal_for_peer(*hello) : std::string(status.message()));
    return;
  }
  if (absl::Status named = check_peer_certificate(c, hello->process); !named.ok()) {
    // Told only that it was refused, like any other refused caller.
    refuse(c,
           absl::FailedPreconditionError(absl::StrCat(
               "process ", mine_.process, " (", addresses_[mine_.process], ") refused a link from ",
               c->address, " (saying it is process ", hello->process, "): ", named.message())),
           refusal_for_peer(*hello));
    return;
  }
  c->hello_received = *hello;
  c->hello_sent = mine_;
  c->hello_sent.nonce = make_nonce();
  c->hello_sent.proof = handshake_mac(secret_, Role::kAcceptor, c->hello_received, c->hello_sent);
  {
    weir::MutexLock lock(c->mu);
    c->phase = Connection::Phase::kProof;
  }
  enqueue(c, Frame::kHello, [&](std::string& out) { append_hello(c->hello_sent, out); });
  start_read(c);
}

void GrpcTransport::on_proof(Connection* c, absl::Status parsed, const v1::FrameBatch& batch) {
  const Hello& theirs = c->hello_received;
  auto refused = [&](absl::string_view why) {
    refuse(c,
           absl::FailedPreconditionError(absl::StrCat(
               "process ", mine_.process, " (", addresses_[mine_.process], ") refused a link from ",
               c->address, " (saying it is process ", theirs.process, "): ", why)),
           refusal_for_peer(theirs));
  };
  absl::StatusOr<std::string> mac = parsed.ok() ? read_proof(batch) : parsed;
  if (!mac.ok()) {
    refused(mac.status().message());
    return;
  }
  if (!mac_matches(handshake_mac(secret_, Role::kDialer, theirs, c->hello_sent), *mac)) {
    refused("it did not prove the cluster secret (is the secret the same for every process?)");
    return;
  }
  // A member: its incarnation counts now, and it may be told why it is refused.
  absl::Status current = check_incarnation(mine_, theirs);
  if (!current.ok()) {
    const std::string why =
        absl::StrCat("process ", mine_.process, " (", addresses_[mine_.process],
                     ") refused a link from process ", theirs.process, ": ", current.message());
    if (theirs.incarnation > mine_.incarnation) {
      set_fatal(absl::FailedPreconditionError(
          absl::StrCat("process ", mine_.process, " is stale: its incarnation ", mine_.incarnation,
                       " is older than that of process ", theirs.process, " (", theirs.incarnation,
                       "), which connected from ", c->address)));
      // Not FAILED_PRECONDITION: the newer dialer keeps trying, for a current process.
      refuse(c, absl::FailedPreconditionError(why), why, grpc::StatusCode::ABORTED);
    } else {
      refuse(c, absl::FailedPreconditionError(why), why);
    }
    return;
  }
  bool taken = false;
  {
    weir::MutexLock lock(mu_);
    taken = links_[theirs.process] != nullptr;
  }
  if (taken) {
    const std::string why = absl::StrCat("process ", mine_.process, " (", addresses_[mine_.process],
                                         ") refused a link from process ", theirs.process,
                                         ": process ", theirs.process, " is already connected");
    refuse(c, absl::FailedPreconditionError(why), why);
    return;
  }
  c->peer = theirs.process;
  open_link(c, &batch, 1);
}

absl::Status GrpcTransport::check_peer_certificate(Connection* c, uint32_t process) {
  if (!mutual_tls_) return absl::OkStatus();
  return check_certificate_names(c->side == Connection::Side::kDialer
                                     ? c->client_context->auth_context()
                                     : c->server_context.auth_context(),
                                 process);
}

void GrpcTransport::open_link(Connection* c, const v1::FrameBatch* batch, int first) {
  const uint32_t peer = c->peer;
  c->reader.emplace(peer, mine_, receiver_);
  {
    weir::MutexLock lock(mu_);
    weir::MutexLock link_lock(c->mu);
    if (c->side == Connection::Side::kAcceptor) c->address = addresses_[peer];
    c->phase = Connection::Phase::kOpen;
    c->last_read = Clock::now();
    c->registered = true;
    links_[peer] = c;
    ++established_;
    if (c->side == Connection::Side::kDialer) dials_[peer].active = false;
  }
  changed_.notify_all();
  if (batch != nullptr && first < batch->frames_size()) {
    after_frames(c, c->reader->on_batch(*batch, first));  // Frames that came with the Proof.
  } else {
    start_read(c);
  }
}

void GrpcTransport::refuse(Connection* c, const absl::Status& local, absl::string_view for_peer,
                           grpc::StatusCode code) {
  {
    weir::MutexLock lock(mu_);
    last_refusal_ = std::string(local.message());
  }
  {
    weir::MutexLock lock(c->mu);
    c->phase = Connection::Phase::kEnding;
    c->finish_sent = true;
  }
  issue(c, c->finish_tag,
        [&](Tag* tag) { c->server_stream.Finish(grpc::Status(code, std::string(for_peer)), tag); });
}

void GrpcTransport::on_read_ended(Connection* c) {
  bool lost = false;
  {
    weir::MutexLock lock(c->mu);
    c->read_ended = true;
    lost = c->phase == Connection::Phase::kOpen && !c->goodbye_received && !c->failed;
  }
  if (lost) {
    fail_link(c, absl::UnavailableError(
                     absl::StrCat("lost ", c->name(),
                                  ": its link broke before it said Goodbye (the process exited, "
                                  "crashed or was killed, or the network failed)")));
    return;
  }
  maybe_finish(c);
}

// Ends a call once nothing more will be sent or received on it: a refused or failed handshake,
// or, on an open link, after both Goodbyes (the dialer half-closes, the acceptor then finishes
// with OK, and the dialer collects that status).
void GrpcTransport::maybe_finish(Connection* c) {
  enum { kNothing, kWritesDone, kClientFinish, kServerFinish } action = kNothing;
  {
    weir::MutexLock lock(c->mu);
    if (c->finish_sent || c->failed || c->writing) return;
    const bool handshake =
        c->phase == Connection::Phase::kHello || c->phase == Connection::Phase::kProof;
    const bool orderly = c->phase == Connection::Phase::kOpen && c->goodbye_received &&
                         (c->goodbye_written || c->write_closed);
    if (c->side == Connection::Side::kDialer) {
      if (handshake && c->read_ended) {
        action = kClientFinish;
      } else if (orderly && !c->writes_done_sent && !c->write_closed) {
        action = kWritesDone;
      } else if (orderly && c->read_ended && (c->writes_done || c->write_closed)) {
        action = kClientFinish;
      }
    } else if ((orderly || handshake) && c->read_ended) {
      action = kServerFinish;  // Orderly, or a caller that went away before its Hello.
    }
    if (action == kWritesDone) c->writes_done_sent = true;
    if (orderly && c->ended_at == Clock::time_point()) c->ended_at = Clock::now();
    if (action == kClientFinish || action == kServerFinish) c->finish_sent = true;
  }
  switch (action) {
    case kNothing:
      return;
    case kWritesDone:
      issue(c, c->writes_done_tag, [&](Tag* tag) { c->client_stream->WritesDone(tag); });
      return;
    case kClientFinish:
      issue(c, c->finish_tag, [&](Tag* tag) { c->client_stream->Finish(&c->finish_status, tag); });
      return;
    case kServerFinish:
      issue(c, c->finish_tag, [&](Tag* tag) { c->server_stream.Finish(grpc::Status::OK, tag); });
      return;
  }
}

void GrpcTransport::on_writes_done(Connection* c, bool ok) {
  {
    weir::MutexLock lock(c->mu);
    c->writes_done = true;
    if (!ok) c->write_closed = true;
  }
  maybe_finish(c);
}

void GrpcTransport::on_finish(Connection* c, bool /*ok*/) {
  Connection::Phase was;
  {
    weir::MutexLock lock(c->mu);
    was = c->phase;
    c->phase = Connection::Phase::kDone;
    c->write_closed = true;
    c->space.notify_all();
  }
  if (c->side == Connection::Side::kDialer && was == Connection::Phase::kHello) {
    // The dial did not get through: the acceptor refused it (fatal), or it is not up (retry).
    const grpc::Status& status = c->finish_status;
    weir::MutexLock lock(mu_);
    Dial& dial = dials_[c->peer];
    dial.active = false;
    if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION &&
        c->handshake_error.empty()) {
      if (fatal_.ok()) {
        fatal_ = absl::FailedPreconditionError(absl::StrCat("process ", mine_.process,
                                                            " was refused by ", c->name(), ": ",
                                                            status.error_message()));
      }
    } else {
      dial.last_error = !c->handshake_error.empty() ? c->handshake_error
                        : status.error_message().empty()
                            ? absl::StrCat("gRPC status ", status.error_code())
                            : status.error_message();
      dial.next = Clock::now() + kRetryInterval;
    }
  }
  changed_.notify_all();
}

// ---- Failure ----

void GrpcTransport::fail_link(Connection* c, absl::Status status) {
  {
    weir::MutexLock lock(c->mu);
    if (c->failed) return;
    c->failed = true;
    c->write_closed = true;
    c->pending.clear();
    c->pending_bytes = 0;
    c->space.notify_all();
  }
  c->cancel();
  {
    weir::MutexLock lock(mu_);
    if (fatal_.ok()) fatal_ = status;
  }
  receiver_.link_failed(std::move(status));
  changed_.notify_all();
}

void GrpcTransport::set_fatal(absl::Status status) {
  {
    weir::MutexLock lock(mu_);
    if (fatal_.ok()) fatal_ = status;
  }
  receiver_.link_failed(std::move(status));
  changed_.notify_all();
}

std::string GrpcTransport::local_failure() const {
  // The runtime's receiver knows whether this process's workers failed.
  if (const auto* process = dynamic_cast<const ProcessShared*>(&receiver_);
      process != nullptr && process->failed()) {
    absl::Status status = process->status();
    return status.message().empty() ? status.ToString() : std::string(status.message());
  }
  return "";
}

// ---- Threads ----

void GrpcTransport::poll() {
  void* tag = nullptr;
  bool ok = false;
  while (cq_->Next(&tag, &ok)) {
    auto* t = static_cast<Tag*>(tag);
    taken_from_queue(t);
    Connection* c = t->connection;
    (this->*(t->handler))(c, ok);
    // The last operation of a handshake that went nowhere: forget the connection.
    if (c->ops.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      weir::MutexLock lock(mu_);
      bool reap = false;
      {
        weir::MutexLock link_lock(c->mu);
        reap = c->phase == Connection::Phase::kDone && !c->registered;
      }
      if (reap) {
        connections_.remove_if([c](const std::unique_ptr<Connection>& p) { return p.get() == c; });
      }
    }
  }
}

void GrpcTransport::tick() {
  mu_.lock();
  while (!stopping_) {
    stop_ticker_.wait_for(mu_, tick_);
    if (stopping_) break;
    const auto now = Clock::now();
    std::vector<Connection*> heartbeats, silent, cancel;
    for (const auto& owned : connections_) {
      Connection* c = owned.get();
      weir::MutexLock link_lock(c->mu);
      if (c->phase == Connection::Phase::kOpen && !c->failed) {
        if (!c->goodbye_received && now - c->last_read > heartbeat_timeout_) silent.push_back(c);
        if (!c->writing && !c->goodbye_queued && now - c->last_queued >= heartbeat_interval_) {
          heartbeats.push_back(c);
        }
      } else if ((c->phase == Connection::Phase::kHello || c->phase == Connection::Phase::kProof) &&
                 c->side == Connection::Side::kAcceptor && now - c->since > kHandshakeTimeout) {
        cancel.push_back(c);  // A caller that did not finish the handshake in time.
      }
      if (c->ended_at != Clock::time_point() && c->phase != Connection::Phase::kDone &&
          now - c->ended_at > kTeardownGrace) {
        cancel.push_back(c);  // Both said Goodbye; the orderly end is taking too long.
      }
    }
    std::vector<uint32_t> redial;
    if (!startup_done_ && fatal_.ok()) {
      for (uint32_t p = 0; p < mine_.process; ++p) {
        if (links_[p] == nullptr && !dials_[p].active && now >= dials_[p].next) {
          redial.push_back(p);
        }
      }
    }
    // Under the lock: an unregistered connection may be reaped as soon as it is released.
    for (Connection* c : cancel) c->cancel();
    mu_.unlock();
    for (Connection* c : heartbeats) {
      enqueue(c, Frame::kHeartbeat, [](std::string& batch) { append_heartbeat(batch); });
    }
    for (Connection* c : silent) {
      fail_link(c, absl::UnavailableError(absl::StrCat(
                       "lost ", c->name(), ": no frame from it for ", heartbeat_timeout_.count(),
                       " ms (--heartbeat-timeout-ms): it hung, was stopped, or the network "
                       "failed")));
    }
    for (uint32_t p : redial) dial(p);
    mu_.lock();
  }
  mu_.unlock();
}

// ---- Closing ----

absl::Status GrpcTransport::close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  std::string failure = local_failure();
  std::vector<Connection*> links;
  {
    weir::MutexLock lock(mu_);
    if (failure.empty() && !fatal_.ok()) failure = std::string(fatal_.message());
    for (Connection* c : links_) {
      if (c != nullptr) links.push_back(c);
    }
  }
  for (Connection* c : links) {
    enqueue(c, Frame::kGoodbye, [&](std::string& batch) { append_goodbye(failure, batch); });
  }
  {
    weir::MutexLock lock(mu_);
    if (failure.empty()) {
      // Every peer finishes too and says Goodbye; a lost one is found by the ticker.
      for (;;) {
        bool done = true;
        for (Connection* c : links) {
          weir::MutexLock link_lock(c->mu);
          done = done && c->link_done();
        }
        if (done) break;
        changed_.wait_for(mu_, tick_);
      }
    } else {
      // This process failed: give each peer a moment to read the Goodbye carrying the error (it
      // answers with its own Goodbye, or ends its stream).
      const auto deadline = Clock::now() + kFailureGoodbyeWait;
      for (;;) {
        bool read = true;
        for (Connection* c : links) {
          weir::MutexLock link_lock(c->mu);
          read = read && (c->link_done() || c->write_closed ||
                          (c->goodbye_written && (c->goodbye_received || c->read_ended)));
        }
        if (read || Clock::now() >= deadline) break;
        changed_.wait_for(mu_, milliseconds(5));
      }
    }
  }
  shutdown();
  weir::MutexLock lock(mu_);
  return fatal_;  // A link that failed, before or during close.
}

void GrpcTransport::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  {
    weir::MutexLock lock(mu_);
    stopping_ = true;
    for (const auto& c : connections_) {
      weir::MutexLock link_lock(c->mu);
      c->write_closed = true;
      c->space.notify_all();
      if (c->phase != Connection::Phase::kStarting || c->side == Connection::Side::kDialer) {
        c->cancel();
      }
    }
  }
  changed_.notify_all();
  stop_ticker_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  {
    std::unique_lock lock(cq_mu_);
    cq_open_ = false;
  }
  if (server_) server_->Shutdown(std::chrono::system_clock::now());
  if (cq_) {
    cq_->Shutdown();
    if (poller_.joinable()) {
      poller_.join();
    } else {
      void* tag = nullptr;
      bool ok = false;
      while (cq_->Next(&tag, &ok)) {
      }
    }
  }
  weir::MutexLock lock(mu_);
  std::fill(links_.begin(), links_.end(), nullptr);
  connections_.clear();
  server_.reset();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> connect_grpc(const Config& config,
                                                        TransportReceiver& receiver) {
  const auto deadline = Clock::now() + config.startup_timeout;
  if (config.workers == 0 || config.process >= config.processes ||
      config.workers * config.processes > UINT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("cannot run process ", config.process, " of ",
                                                   config.processes, " with ", config.workers,
                                                   " workers each"));
  }
  WEIR_ASSIGN_OR_RETURN(std::vector<std::string> addresses,
                        read_hostfile(config.hostfile, config.processes));
  Hello mine;
  mine.cluster_id = config.cluster_id.empty() ? derive_cluster_id(addresses) : config.cluster_id;
  mine.process = static_cast<uint32_t>(config.process);
  mine.incarnation = config.incarnation;
  mine.workers = static_cast<uint32_t>(config.workers);
  mine.processes = static_cast<uint32_t>(config.processes);
  mine.flow_window = config.flow_window_bytes;
  auto transport =
      std::make_unique<GrpcTransport>(config, std::move(addresses), std::move(mine), receiver);
  WEIR_RETURN_IF_ERROR(transport->start(config));
  WEIR_RETURN_IF_ERROR(transport->await_startup(deadline));
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace weir::protocol
