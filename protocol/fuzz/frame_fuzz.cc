// frame_fuzz: libFuzzer target for everything a peer's bytes reach before the runtime trusts
// them. Each input is taken as one stream message (a serialized FrameBatch) and, whole, as one
// progress payload:
//
//   - parse_batch (the generated parser);
//   - read_hello and check_hello, as on a link's first batch, with the Hello checked both ways,
//     the refusal a peer is told, and the handshake's MACs; read_proof, as on a second batch;
//   - a FrameReader on an open link, as every later batch, delivering to a receiver that decodes
//     payloads with weir's codecs: Data as `Codec<T>` time + `Codec<std::vector<D>>` batch (the
//     record type chosen by the channel, one of every kind of type the codec supports), Progress
//     as a root scope's progress message (ProgressMessage below);
//   - the real runtime (frame_fuzz.h): a process of a 2-process cluster whose worker has built
//     a dataflow with exchanges and nested scopes (an iterative scope with a region inside). The
//     batch goes through a FrameReader to its ProcessShared, as from a gRPC link, and the raw
//     input is handed to ProcessShared::deliver_progress as progress batch 0 of the peer's worker
//     on the dataflow's progress channel; then the worker steps. This reaches Scope::decode, the
//     location checks, dispatch_nested and the nested scopes' decoding and checks, and the data
//     channels' decoding, with everything the runtime does with what passes;
//   - the payload decoders on the raw input, so they are fuzzed directly too.
//
// Every path must return an error on bad input, never crash, hang or read out of bounds; in the
// runtime, bad input fails the execution (ProcessShared::failed, with an error). On top, a few
// oracles abort (a fuzzer "crash") when a property breaks: a Hello read back re-encodes to a
// Hello that reads the same; frames re-encoded by frame.cc's encoder equal what the generated
// code writes for the same fields; anything a codec decodes re-encodes to exactly the bytes it
// consumed (weir's codecs are canonical); the runtime refuses a progress payload as malformed
// exactly when ProgressMessage below does not decode it; a failed execution has an error.
//
// Each delivery that can reach a worker gets a fresh process, built and settled (2 to 3 ms with
// the sanitizers): the runtime keeps state across batches (sequence numbers, the tracker's
// counts, a failure is final), and an input must replay alone to the same result. Only raw inputs
// that are not progress messages share one process: its progress channel refuses them before
// anything but the batch count changes.
//
// Build and run: protocol/fuzz/run.sh [SECONDS].

#include "frame_fuzz.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "frame.h"
#include <google/protobuf/stubs/logging.h>

#include "weir/communication/codec.h"
#include "weir/communication/transport.h"
#include "weir/progress/location.h"
#include "weir/progress/timestamp.h"
#include "weir/protocol/v1/link.pb.h"

namespace {

using weir::Codec;
using weir::protocol::Hello;
namespace v1 = weir::protocol::v1;

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "frame_fuzz: oracle failed: %s\n", what);
  std::abort();
}

// A root scope's progress message, byte for byte as Scope<uint64_t>::encode writes it
// (weir/dataflow/scope.h): the updates ((location, time), diff), then the nested scopes' batches
// (path, bytes). Spelled in codecs, independently of Scope::decode (protected), as the oracle the
// runtime's decoding is checked against (runtime_progress_path).
using ProgressUpdate = std::pair<std::pair<weir::Location, uint64_t>, int64_t>;
using ProgressMessage = std::pair<std::vector<ProgressUpdate>,
                                  std::vector<std::pair<std::vector<uint32_t>, std::string>>>;

// Decodes `in` as one record of type D the way a channel does: the whole of `in`, or an error.
// What decodes must re-encode to the same bytes.
template <class D>
bool decode_exactly(std::string_view in) {
  const std::string_view original = in;
  D value{};
  if (!Codec<D>::decode(in, value) || !in.empty()) return false;
  std::string again;
  Codec<D>::encode(value, again);
  if (again != original) broken("a decoded value does not re-encode to its bytes");
  return true;
}

// A data payload: Codec<T> of the time, then Codec<std::vector<D>> of the batch (pact.h).
template <class T, class D>
bool decode_batch(std::string_view in) {
  return decode_exactly<std::pair<T, std::vector<D>>>(in);
}

using Product = weir::Product<uint64_t, uint32_t>;
using namespace weir::protocol::fuzz;  // NOLINT(google-build-using-namespace): the record types.

// The record types the fuzzer tries, by channel (frame_fuzz.h).
bool decode_data(uint64_t channel, std::string_view payload) {
  static_assert(kRecordTypes == 16);
  switch (channel % kRecordTypes) {
    case 0:
      return decode_batch<uint64_t, uint64_t>(payload);
    case 1:
      return decode_batch<uint64_t, std::string>(payload);
    case 2:
      return decode_batch<uint64_t, std::pair<std::string, int64_t>>(payload);
    case 3:
      return decode_batch<Product, std::tuple<uint32_t, std::string, std::optional<std::string>>>(
          payload);
    case 4:
      return decode_batch<uint64_t, std::vector<std::pair<uint64_t, std::string>>>(payload);
    case 5:
      return decode_batch<Product, std::pair<std::optional<std::string>, double>>(payload);
    case 6:
      return decode_batch<uint64_t, std::variant<uint32_t, std::string, bool>>(payload);
    case 7:
      return decode_batch<uint64_t, Padded>(payload);
    case 8:
      return decode_batch<uint64_t, std::pair<std::array<int16_t, 3>, std::optional<Kind>>>(
          payload);
    case 9:
      return decode_batch<Product, std::tuple<bool, Kind, std::byte, float>>(payload);
    case 10:  // Copied as bytes: a packed aggregate and a CodecAsBytes class, in a pair.
      return decode_batch<Product, std::pair<Packed, Id>>(payload);
    case 11:
      return decode_batch<uint64_t,
                          std::tuple<int8_t, uint16_t, int32_t, char, signed char, unsigned char,
                                     char8_t, char16_t, char32_t, wchar_t, float, double>>(payload);
    case 12:
      return decode_batch<
          uint64_t, std::tuple<Signed, std::vector<bool>, std::optional<std::optional<uint8_t>>,
                               std::vector<weir::Location>>>(payload);
    case 13:
      return decode_batch<uint64_t, std::tuple<std::array<std::string, 2>, std::array<bool, 3>,
                                               std::array<Packed, 2>>>(payload);
    case 14:
      return decode_batch<Product, Composite>(payload);
    default:
      return decode_batch<uint64_t, Wide>(payload);
  }
}

bool decode_progress(std::string_view payload) { return decode_exactly<ProgressMessage>(payload); }

// Stands in for the runtime behind a link: decodes what it is given, refuses what is malformed.
class Decoder final : public weir::TransportReceiver {
 public:
  absl::Status deliver_data(uint64_t channel, uint32_t, uint32_t,
                            std::string_view payload) override {
    if (!decode_data(channel, payload)) return absl::InvalidArgumentError("malformed batch");
    return absl::OkStatus();
  }
  absl::Status deliver_progress(uint64_t, uint32_t, uint64_t, std::string_view payload) override {
    if (!decode_progress(payload)) return absl::InvalidArgumentError("malformed progress");
    return absl::OkStatus();
  }
  void link_failed(absl::Status) override {}
};

bool same(const Hello& a, const Hello& b) {
  return a.cluster_id == b.cluster_id && a.process == b.process && a.incarnation == b.incarnation &&
         a.workers == b.workers && a.processes == b.processes && a.version == b.version &&
         a.nonce == b.nonce && a.proof == b.proof && a.flow_window == b.flow_window;
}

// The process this input arrives at: process 1 of 3, with 2 workers each.
Hello this_process() {
  Hello mine;
  mine.cluster_id = "fuzz";
  mine.process = 1;
  mine.workers = 2;
  mine.processes = 3;
  mine.incarnation = 7;
  return mine;
}

void hello_path(const v1::FrameBatch& batch) {
  absl::StatusOr<Hello> hello = weir::protocol::read_hello(batch);
  if (!hello.ok()) return;
  const Hello mine = this_process();
  (void)weir::protocol::check_hello(mine, *hello);
  (void)weir::protocol::check_hello(*hello, mine);
  (void)weir::protocol::check_hello(*hello, *hello);
  // The handshake's MACs over what a caller sent, both ways, and the proof a batch may carry.
  const std::string mac =
      weir::protocol::handshake_mac("secret", weir::protocol::Role::kAcceptor, *hello, mine);
  if (!weir::protocol::mac_matches(
          mac,
          weir::protocol::handshake_mac("secret", weir::protocol::Role::kAcceptor, *hello, mine)) ||
      weir::protocol::mac_matches(mac, hello->proof + "x")) {
    broken("handshake MACs are not deterministic, or a longer proof matched");
  }
  (void)weir::protocol::refusal_for_peer(*hello);

  std::string bytes;
  weir::protocol::append_hello(*hello, bytes);
  v1::FrameBatch again;
  if (!weir::protocol::parse_batch(bytes, again).ok()) broken("an encoded Hello does not parse");
  absl::StatusOr<Hello> read = weir::protocol::read_hello(again);
  if (!read.ok() || !same(*read, *hello)) broken("an encoded Hello does not read back");
}

// frame.cc's encoder against the generated code, for the fields of every frame of `batch`.
void encoder_agrees(const v1::FrameBatch& batch) {
  std::string ours;
  v1::FrameBatch theirs;
  for (const v1::Frame& frame : batch.frames()) {
    v1::Frame& copy = *theirs.add_frames();
    switch (frame.kind_case()) {
      case v1::Frame::kHello: {
        const v1::Hello& h = frame.hello();
        Hello hello{h.cluster_id(), h.process(), h.incarnation(), h.workers(),    h.processes(),
                    h.version(),    h.nonce(),   h.proof(),       h.flow_window()};
        weir::protocol::append_hello(hello, ours);
        v1::Hello& c = *copy.mutable_hello();
        c.set_cluster_id(h.cluster_id());
        c.set_process(h.process());
        c.set_incarnation(h.incarnation());
        c.set_workers(h.workers());
        c.set_processes(h.processes());
        c.set_version(h.version());
        c.set_nonce(h.nonce());
        c.set_proof(h.proof());
        c.set_flow_window(h.flow_window());
        break;
      }
      case v1::Frame::kProof:
        weir::protocol::append_proof(frame.proof().mac(), ours);
        copy.mutable_proof()->set_mac(frame.proof().mac());
        break;
      case v1::Frame::kData: {
        const v1::Data& d = frame.data();
        weir::protocol::append_data(d.channel(), d.from(), d.to(), d.payload(), ours);
        v1::Data& c = *copy.mutable_data();
        c.set_channel(d.channel());
        c.set_from(d.from());
        c.set_to(d.to());
        c.set_payload(d.payload());
        break;
      }
      case v1::Frame::kProgress: {
        const v1::Progress& p = frame.progress();
        weir::protocol::append_progress(p.channel(), p.from(), p.seq(), p.updates(), ours);
        v1::Progress& c = *copy.mutable_progress();
        c.set_channel(p.channel());
        c.set_from(p.from());
        c.set_seq(p.seq());
        c.set_updates(p.updates());
        break;
      }
      case v1::Frame::kCredit: {
        const v1::Credit& k = frame.credit();
        weir::protocol::append_credit(k.channel(), k.worker(), k.bytes(), ours);
        v1::Credit& c = *copy.mutable_credit();
        c.set_channel(k.channel());
        c.set_worker(k.worker());
        c.set_bytes(k.bytes());
        break;
      }
      case v1::Frame::kHeartbeat:
        weir::protocol::append_heartbeat(ours);
        copy.mutable_heartbeat();
        break;
      case v1::Frame::kGoodbye:
        weir::protocol::append_goodbye(frame.goodbye().error(), ours);
        copy.mutable_goodbye()->set_error(frame.goodbye().error());
        break;
      case v1::Frame::KIND_NOT_SET:
        theirs.mutable_frames()->RemoveLast();
        break;
    }
  }
  if (ours != theirs.SerializeAsString()) {
    broken("frame.cc encodes frames differently from the generated code");
  }
}

void open_link_path(const v1::FrameBatch& batch) {
  Decoder decoder;
  // From process 0 (workers 0 and 1) and from process 2 (workers 4 and 5).
  for (uint32_t peer : {0u, 2u}) {
    weir::protocol::FrameReader reader(peer, this_process(), decoder);
    absl::Status status = reader.on_batch(batch);
    // After the first error the link is closed; a reader that saw a Goodbye refuses more frames.
    if (status.ok() && reader.goodbye_received()) (void)reader.on_batch(batch);
  }
}

// ---- the real runtime ----

// Steps a worker takes after the input is delivered: enough for what a batch sets off (records
// take a round of the iterative scope's loop per bit of their value), few enough that an input
// that keeps the worker busy still makes a short run.
constexpr int kSteps = 24;

// Process 0 of the cluster, built, with records sent and its first epoch closed, and stepped
// until idle: what a peer's first frames meet.
std::unique_ptr<FuzzProcess> settled_process() {
  auto process = std::make_unique<FuzzProcess>(0);
  for (uint64_t x : {2, 5, 12}) process->input().send(x);
  process->input().advance_to(1);
  process->run(kSteps);
  if (process->shared().failed()) broken("the dataflow fails with no input");
  return process;
}

// A failed execution says why; the process then goes down without crashing (its dataflows are
// dropped with whatever the input left in them).
void check_failure(FuzzProcess& process) {
  if (!process.shared().failed()) return;
  const absl::Status status = process.shared().status();
  if (status.ok() || status.message().empty()) broken("an execution failed without an error");
}

// Scope::decode against the layout spelled in codecs: the same bytes are malformed for both.
void check_decoding(const absl::Status& status, bool decodes) {
  const bool refused_as_malformed =
      !status.ok() && absl::StrContains(status.message(), "malformed progress batch");
  if (refused_as_malformed == decodes) {
    broken(refused_as_malformed ? "the runtime refuses a progress message that decodes"
                                : "the runtime accepts a progress message that does not decode");
  }
}

constexpr uint32_t kPeerWorker = kWorkers;  // Process 1's first worker.

// The raw input as progress batch 0 of the peer's worker on the dataflow's progress channel, as
// a transport thread hands it over; a refusal fails the execution, as the transport does.
void runtime_progress_path(std::string_view bytes) {
  if (!decode_progress(bytes)) {
    // Most inputs: malformed, refused by the channel's sink before anything reaches a worker
    // (only the batch's number is counted). One process, built once, checks them all.
    static FuzzProcess* const refuser = new FuzzProcess(0);
    static uint64_t seq = 0;
    check_decoding(
        refuser->shared().deliver_progress(refuser->progress_channel(), kPeerWorker, seq++, bytes),
        false);
    return;
  }
  auto process = settled_process();
  absl::Status status =
      process->shared().deliver_progress(process->progress_channel(), kPeerWorker, 0, bytes);
  check_decoding(status, true);
  if (!status.ok()) process->shared().link_failed(status);
  process->run(kSteps);
  // Accepted: again, as the peer's next batch (its changes counted twice, on a tracker that
  // has moved on).
  if (!process->shared().failed()) {
    status = process->shared().deliver_progress(process->progress_channel(), kPeerWorker, 1, bytes);
    if (!status.ok()) process->shared().link_failed(status);
    process->run(kSteps);
  }
  check_failure(*process);
}

// The batch on an open link from process 1, through a FrameReader to the runtime (as the gRPC
// transport's reader does: an error closes the link and fails the execution).
void runtime_link_path(const v1::FrameBatch& batch) {
  auto process = settled_process();
  Hello mine;
  mine.process = 0;
  mine.workers = kWorkers;
  mine.processes = kProcesses;
  weir::protocol::FrameReader reader(1, mine, process->shared());
  absl::Status status = reader.on_batch(batch);
  if (!status.ok()) process->shared().link_failed(status);
  process->run(kSteps);
  check_failure(*process);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The parser's log (it would log string fields that are not UTF-8; link.proto has none since
  // Hello.cluster_id and Goodbye.error became bytes): noise here.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  // The payload decoders on their own, on the raw bytes, and the runtime's progress decoding.
  for (uint64_t channel = 0; channel < kRecordTypes; ++channel) (void)decode_data(channel, bytes);
  runtime_progress_path(bytes);

  v1::FrameBatch batch;
  if (!weir::protocol::parse_batch(bytes, batch).ok()) return 0;
  (void)weir::protocol::read_proof(batch);  // As on a link's second batch, from a dialer.
  hello_path(batch);
  encoder_agrees(batch);
  open_link_path(batch);
  runtime_link_path(batch);
  return 0;
}
