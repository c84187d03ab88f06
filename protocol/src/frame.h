// Frames of the cluster link (proto/weir/protocol/v1/link.proto): encoding, decoding, checking.
//
// Senders append frames to a buffer that is, byte for byte, a serialized FrameBatch, so a batch
// of many small frames costs one write and no intermediate messages. Receivers parse a batch with
// the generated code and hand each frame, checked against the link it arrived on, to the
// runtime's TransportReceiver. Nothing here trusts its input: a malformed batch, a frame of an
// unknown kind or one naming workers the peer does not have is an error, never a crash.
//
// Thread safety: functions are pure; a FrameReader belongs to one link (one thread at a time).

#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "weir/communication/transport.h"
#include "weir/protocol/v1/link.pb.h"

namespace weir::protocol {

// 2: the handshake proves the cluster secret (nonce, proof, Proof frame).
// 3: Credit frames (flow control).
inline constexpr uint32_t kProtocolVersion = 3;
inline constexpr size_t kNonceBytes = 16;
inline constexpr size_t kMacBytes = 32;  // HMAC-SHA256.

// The first frame on a link, in both directions.
struct Hello {
  std::string cluster_id;
  uint32_t process = 0;
  uint64_t incarnation = 0;
  uint32_t workers = 0;
  uint32_t processes = 0;
  uint32_t version = kProtocolVersion;
  std::string nonce;  // kNonceBytes random bytes.
  std::string proof;  // The acceptor's MAC; empty from the dialer.
  // Flow control's window (--flow-window-bytes; 0: off): the same on every process, since a
  // receiver returns credit by its own window and a sender waits by its own.
  uint64_t flow_window = 0;
};

// Appending one frame to `batch` (a serialized FrameBatch, possibly empty) keeps it one.
void append_hello(const Hello& hello, std::string& batch);
void append_proof(std::string_view mac, std::string& batch);
void append_data(uint64_t channel, uint32_t from, uint32_t to, std::string_view payload,
                 std::string& batch);
void append_progress(uint64_t channel, uint32_t from, uint64_t seq, std::string_view updates,
                     std::string& batch);
void append_credit(uint64_t channel, uint32_t worker, uint64_t bytes, std::string& batch);
void append_heartbeat(std::string& batch);
void append_goodbye(std::string_view error, std::string& batch);

// Parses a serialized FrameBatch. Error (InvalidArgument) if it is not well-formed protobuf.
absl::Status parse_batch(std::string_view bytes, v1::FrameBatch& batch);

// The Hello of a link's first batch, which must hold exactly that one frame.
absl::StatusOr<Hello> read_hello(const v1::FrameBatch& batch);

// The dialer's Proof: the first frame of its second batch, which must start with one.
absl::StatusOr<std::string> read_proof(const v1::FrameBatch& batch);

// Whether a peer that said `theirs` may be a member of this process's (`mine`) cluster: the
// same protocol version, cluster id, process count, worker count and flow window, a process index
// in range other than this one. The error (FailedPrecondition) says what differs, in words for the
// person who started the process: it names this process's settings, so it is for the local log,
// never for the peer (see refusal_for_peer).
absl::Status check_membership(const Hello& mine, const Hello& theirs);

// Between members (each proved the secret): the same incarnation. The error says which of the
// two is stale.
absl::Status check_incarnation(const Hello& mine, const Hello& theirs);

// check_membership, then check_incarnation.
absl::Status check_hello(const Hello& mine, const Hello& theirs);

// What a refused caller is told: its own Hello's settings, nothing about this process.
std::string refusal_for_peer(const Hello& theirs);

// The MACs of the handshake (see link.proto): over both Hellos, without proofs, dialer's first.
enum class Role { kDialer, kAcceptor };
std::string handshake_mac(std::string_view secret, Role role, const Hello& dialer,
                          const Hello& acceptor);
// Compares in constant time.
bool mac_matches(std::string_view expected, std::string_view got);
// kNonceBytes from the system's random source.
std::string make_nonce();

// The receiving side of an established link to process `peer`: checks each frame (worker
// indices belong to the peer and to this process, nothing but heartbeats after Goodbye) and
// delivers data, progress and credit to `receiver`.
//
// NOTE: `receiver` must outlive the reader.
class FrameReader {
 public:
  FrameReader(uint32_t peer, const Hello& mine, TransportReceiver& receiver)
      : peer_(peer), me_(mine.process), workers_(mine.workers), receiver_(&receiver) {}

  // Handles the frames of `batch` from the `first`th on, in order. An error means the link must
  // close: a malformed or unexpected frame (InvalidArgument), one the runtime refused (its error),
  // or a Goodbye that reports the peer failed (Aborted, with the peer's error).
  absl::Status on_batch(const v1::FrameBatch& batch, int first = 0);

  // True once the peer said Goodbye: it sends no more data or progress, and the link may end.
  bool goodbye_received() const { return goodbye_; }

 private:
  absl::Status on_frame(const v1::Frame& frame);

  uint32_t peer_;
  uint32_t me_;
  uint32_t workers_;
  TransportReceiver* receiver_;
  bool goodbye_ = false;
};

}  // namespace weir::protocol
