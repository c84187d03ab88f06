// frame_fuzz: libFuzzer target for everything a peer's bytes reach before the runtime trusts
// them. Each input is taken as one stream message (a serialized FrameBatch):
//
//   - parse_batch (the generated parser);
//   - read_hello and check_hello, as on a link's first batch, with the Hello checked both ways,
//     and the handshake's read_proof and MACs;
//   - a FrameReader on an open link, as every later batch, delivering to a receiver that decodes
//     payloads the way the runtime does: Data as `Codec<T>` time + `Codec<std::vector<D>>` batch
//     (the record type chosen by the channel), Progress as a root scope's progress message
//     (ProgressMessage below);
//   - the same payload decoders on the raw input, so they are fuzzed directly too.
//
// Every path must return an error on bad input, never crash, hang or read out of bounds. On top,
// a few oracles abort (a fuzzer "crash") when a property breaks: a Hello read back re-encodes to
// a Hello that reads the same; frames re-encoded by frame.cc's encoder equal what the generated
// code writes for the same fields; anything a codec decodes re-encodes to exactly the bytes it
// consumed (weir's codecs are canonical).
//
// Build and run: protocol/fuzz/run.sh [SECONDS].

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
// (path, bytes). Scope::decode itself is protected, and scope.h does not compile with clang 14
// (lambdas capture structured bindings in antichain.h), so its layout is spelled in codecs here.
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

enum class Kind : uint8_t { kA, kB, kC };
// A struct with padding (after `tag`), a bool and an enum: encoded field by field.
struct Padded {
  uint8_t tag = 0;
  uint64_t value = 0;
  bool flag = false;
  Kind kind = Kind::kA;
};

}  // namespace

template <>
struct weir::EnumRange<Kind> {
  static constexpr Kind kFirst = Kind::kA, kLast = Kind::kC;
};

namespace {

// The record types the fuzzer tries, by channel.
bool decode_data(uint64_t channel, std::string_view payload) {
  switch (channel % 10) {
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
    default:
      return decode_batch<Product, std::tuple<bool, Kind, std::byte, float>>(payload);
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
         a.nonce == b.nonce && a.proof == b.proof;
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
  (void)weir::protocol::read_proof(batch);

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
        Hello hello{h.cluster_id(), h.process(), h.incarnation(), h.workers(),
                    h.processes(),  h.version(), h.nonce(),       h.proof()};
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

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The parser's log (it would log string fields that are not UTF-8; link.proto has none since
  // Hello.cluster_id and Goodbye.error became bytes): noise here.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  // The payload decoders on their own, on the raw bytes.
  for (uint64_t channel = 0; channel < 10; ++channel) (void)decode_data(channel, bytes);
  (void)decode_progress(bytes);

  v1::FrameBatch batch;
  if (!weir::protocol::parse_batch(bytes, batch).ok()) return 0;
  hello_path(batch);
  encoder_agrees(batch);
  open_link_path(batch);
  return 0;
}
