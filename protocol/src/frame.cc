#include "frame.h"

#include <climits>

#include "absl/strings/str_cat.h"
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "weir/check.h"
#include "weir/status.h"

namespace weir::protocol {
namespace {

// Protobuf wire format: a field key is (number << 3) | wire type.
constexpr uint8_t kVarint = 0;
constexpr uint8_t kLengthDelimited = 2;
constexpr uint8_t key(uint32_t field, uint8_t wire_type) {
  return static_cast<uint8_t>((field << 3) | wire_type);
}

size_t varint_size(uint64_t value) {
  size_t n = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++n;
  }
  return n;
}

void put_varint(uint64_t value, std::string& out) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

// proto3 leaves out fields with their default value; so do we (the bytes then equal what the
// generated code writes, which the tests check).
size_t varint_field_size(uint64_t value) { return value == 0 ? 0 : 1 + varint_size(value); }
void put_varint_field(uint32_t field, uint64_t value, std::string& out) {
  if (value == 0) return;
  out.push_back(static_cast<char>(key(field, kVarint)));
  put_varint(value, out);
}
size_t bytes_field_size(std::string_view bytes) {
  return bytes.empty() ? 0 : 1 + varint_size(bytes.size()) + bytes.size();
}
void put_bytes_field(uint32_t field, std::string_view bytes, std::string& out) {
  if (bytes.empty()) return;
  out.push_back(static_cast<char>(key(field, kLengthDelimited)));
  put_varint(bytes.size(), out);
  out.append(bytes);
}

// Frame field numbers (the oneof) and FrameBatch.frames.
constexpr uint32_t kFrames = 1;
constexpr uint32_t kHelloField = 1, kDataField = 2, kProgressField = 3, kHeartbeatField = 4,
                   kGoodbyeField = 5, kProofField = 6, kCreditField = 7;

// Appends the header of one FrameBatch.frames entry holding a frame whose `kind` field is a
// message of `body` bytes; the caller then appends the body.
void begin_frame(uint32_t kind, size_t body, std::string& batch) {
  const size_t frame = 1 + varint_size(body) + body;
  batch.reserve(batch.size() + 1 + varint_size(frame) + frame);
  batch.push_back(static_cast<char>(key(kFrames, kLengthDelimited)));
  put_varint(frame, batch);
  batch.push_back(static_cast<char>(key(kind, kLengthDelimited)));
  put_varint(body, batch);
}

absl::Status malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed frame: ", what));
}

}  // namespace

void append_hello(const Hello& hello, std::string& batch) {
  const size_t body = bytes_field_size(hello.cluster_id) + varint_field_size(hello.process) +
                      varint_field_size(hello.incarnation) + varint_field_size(hello.workers) +
                      varint_field_size(hello.processes) + varint_field_size(hello.version) +
                      bytes_field_size(hello.nonce) + bytes_field_size(hello.proof) +
                      varint_field_size(hello.flow_window);
  begin_frame(kHelloField, body, batch);
  put_bytes_field(1, hello.cluster_id, batch);
  put_varint_field(2, hello.process, batch);
  put_varint_field(3, hello.incarnation, batch);
  put_varint_field(4, hello.workers, batch);
  put_varint_field(5, hello.processes, batch);
  put_varint_field(6, hello.version, batch);
  put_bytes_field(7, hello.nonce, batch);
  put_bytes_field(8, hello.proof, batch);
  put_varint_field(9, hello.flow_window, batch);
}

void append_proof(std::string_view mac, std::string& batch) {
  begin_frame(kProofField, bytes_field_size(mac), batch);
  put_bytes_field(1, mac, batch);
}

void append_data(uint64_t channel, uint32_t from, uint32_t to, std::string_view payload,
                 std::string& batch) {
  const size_t body = varint_field_size(channel) + varint_field_size(from) + varint_field_size(to) +
                      bytes_field_size(payload);
  begin_frame(kDataField, body, batch);
  put_varint_field(1, channel, batch);
  put_varint_field(2, from, batch);
  put_varint_field(3, to, batch);
  put_bytes_field(4, payload, batch);
}

void append_progress(uint64_t channel, uint32_t from, uint64_t seq, std::string_view updates,
                     std::string& batch) {
  const size_t body = varint_field_size(channel) + varint_field_size(from) +
                      varint_field_size(seq) + bytes_field_size(updates);
  begin_frame(kProgressField, body, batch);
  put_varint_field(1, channel, batch);
  put_varint_field(2, from, batch);
  put_varint_field(3, seq, batch);
  put_bytes_field(4, updates, batch);
}

void append_credit(uint64_t channel, uint32_t worker, uint64_t bytes, std::string& batch) {
  const size_t body =
      varint_field_size(channel) + varint_field_size(worker) + varint_field_size(bytes);
  begin_frame(kCreditField, body, batch);
  put_varint_field(1, channel, batch);
  put_varint_field(2, worker, batch);
  put_varint_field(3, bytes, batch);
}

void append_heartbeat(std::string& batch) { begin_frame(kHeartbeatField, 0, batch); }

void append_goodbye(std::string_view error, std::string& batch) {
  begin_frame(kGoodbyeField, bytes_field_size(error), batch);
  put_bytes_field(1, error, batch);
}

absl::Status parse_batch(std::string_view bytes, v1::FrameBatch& batch) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    return malformed(absl::StrCat("a batch of ", bytes.size(), " bytes is too large"));
  }
  if (!batch.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return malformed(absl::StrCat("a batch of ", bytes.size(), " bytes is not a FrameBatch"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Hello> read_hello(const v1::FrameBatch& batch) {
  if (batch.frames_size() != 1 || !batch.frames(0).has_hello()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the first message on a link must be one Hello frame, got ", batch.frames_size(), " frames",
        batch.frames_size() > 0 && !batch.frames(0).has_hello() ? " not starting with a Hello"
                                                                : ""));
  }
  const v1::Hello& h = batch.frames(0).hello();
  Hello hello;
  hello.cluster_id = h.cluster_id();
  hello.process = h.process();
  hello.incarnation = h.incarnation();
  hello.workers = h.workers();
  hello.processes = h.processes();
  hello.version = h.version();
  hello.nonce = h.nonce();
  hello.proof = h.proof();
  hello.flow_window = h.flow_window();
  return hello;
}

absl::StatusOr<std::string> read_proof(const v1::FrameBatch& batch) {
  if (batch.frames_size() == 0 || !batch.frames(0).has_proof()) {
    return absl::InvalidArgumentError(
        "the dialer's second message on a link must start with a Proof frame");
  }
  return batch.frames(0).proof().mac();
}

std::string handshake_mac(std::string_view secret, Role role, const Hello& dialer,
                          const Hello& acceptor) {
  std::string transcript =
      role == Role::kDialer ? "weir link v2: dialer" : "weir link v2: acceptor";
  Hello d = dialer, a = acceptor;
  d.proof.clear();
  a.proof.clear();
  append_hello(d, transcript);
  append_hello(a, transcript);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  // A key of length 0 (no secret configured) is valid for HMAC; the pointer must not be null.
  static const char kEmpty = 0;
  HMAC(EVP_sha256(), secret.empty() ? &kEmpty : secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(transcript.data()), transcript.size(), mac, &size);
  return std::string(reinterpret_cast<const char*>(mac), size);
}

bool mac_matches(std::string_view expected, std::string_view got) {
  return expected.size() == got.size() &&
         CRYPTO_memcmp(expected.data(), got.data(), expected.size()) == 0;
}

std::string make_nonce() {
  std::string nonce(kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) !=
      1) {
    // The system's random source failed: no link can be made safely.
    WEIR_CHECK(false) << "OpenSSL's RAND_bytes failed: no random nonce for the link handshake";
  }
  return nonce;
}

absl::Status check_membership(const Hello& mine, const Hello& theirs) {
  auto refuse = [](auto&&... parts) {
    return absl::FailedPreconditionError(absl::StrCat(parts...));
  };
  if (theirs.version != mine.version) {
    return refuse("it speaks protocol version ", theirs.version, ", this process speaks version ",
                  mine.version);
  }
  if (theirs.cluster_id != mine.cluster_id) {
    return refuse("it belongs to cluster '", theirs.cluster_id, "', this process to cluster '",
                  mine.cluster_id,
                  "' (--cluster-id or $WEIR_CLUSTER_ID, else derived from the hostfile, must be "
                  "the same for every process)");
  }
  if (theirs.processes != mine.processes) {
    return refuse("it was started with -n ", theirs.processes, ", this process with -n ",
                  mine.processes);
  }
  if (theirs.workers != mine.workers) {
    return refuse("it was started with -w ", theirs.workers, ", this process with -w ",
                  mine.workers);
  }
  if (theirs.flow_window != mine.flow_window) {
    return refuse("it was started with a flow window of ", theirs.flow_window,
                  " bytes, this process with ", mine.flow_window,
                  " (--flow-window-bytes or $WEIR_FLOW_WINDOW_BYTES must be the same for every "
                  "process)");
  }
  if (theirs.process >= mine.processes) {
    return refuse("it claims to be process ", theirs.process, " of ", mine.processes);
  }
  if (theirs.process == mine.process) {
    return refuse("it claims to be process ", theirs.process,
                  ", which is this process (are two processes started with the same -p?)");
  }
  return absl::OkStatus();
}

std::string refusal_for_peer(const Hello& theirs) {
  return absl::StrCat(
      "refused: its Hello (cluster '", theirs.cluster_id, "', process ", theirs.process, ", -n ",
      theirs.processes, ", -w ", theirs.workers, ", flow window ", theirs.flow_window,
      ", protocol version ", theirs.version,
      ") does not match this cluster, or it did not prove the cluster secret, or its "
      "TLS certificate does not name its process");
}

absl::Status check_incarnation(const Hello& mine, const Hello& theirs) {
  if (theirs.incarnation < mine.incarnation) {
    return absl::FailedPreconditionError(absl::StrCat("it is of incarnation ", theirs.incarnation,
                                                      ", older than this process's ",
                                                      mine.incarnation, ": it is a stale process"));
  }
  if (theirs.incarnation > mine.incarnation) {
    return absl::FailedPreconditionError(absl::StrCat("it is of incarnation ", theirs.incarnation,
                                                      ", newer than this process's ",
                                                      mine.incarnation, ": this process is stale"));
  }
  return absl::OkStatus();
}

absl::Status check_hello(const Hello& mine, const Hello& theirs) {
  WEIR_RETURN_IF_ERROR(check_membership(mine, theirs));
  return check_incarnation(mine, theirs);
}

absl::Status FrameReader::on_batch(const v1::FrameBatch& batch, int first) {
  for (int i = first; i < batch.frames_size(); ++i) WEIR_RETURN_IF_ERROR(on_frame(batch.frames(i)));
  return absl::OkStatus();
}

absl::Status FrameReader::on_frame(const v1::Frame& frame) {
  switch (frame.kind_case()) {
    case v1::Frame::kData: {
      const v1::Data& data = frame.data();
      if (goodbye_) return malformed("a Data frame after Goodbye");
      if (data.from() / workers_ != peer_) {
        return malformed(absl::StrCat("a Data frame from worker ", data.from(),
                                      ", which is not one of the sender's workers"));
      }
      if (data.to() / workers_ != me_) {
        return malformed(absl::StrCat("a Data frame for worker ", data.to(),
                                      ", which is not one of this process's workers"));
      }
      return receiver_->deliver_data(data.channel(), data.from(), data.to(), data.payload());
    }
    case v1::Frame::kProgress: {
      const v1::Progress& progress = frame.progress();
      if (goodbye_) return malformed("a Progress frame after Goodbye");
      if (progress.from() / workers_ != peer_) {
        return malformed(absl::StrCat("a Progress frame from worker ", progress.from(),
                                      ", which is not one of the sender's workers"));
      }
      return receiver_->deliver_progress(progress.channel(), progress.from(), progress.seq(),
                                         progress.updates());
    }
    case v1::Frame::kCredit: {
      const v1::Credit& credit = frame.credit();
      if (goodbye_) return malformed("a Credit frame after Goodbye");
      if (credit.worker() / workers_ != peer_) {
        return malformed(absl::StrCat("a Credit frame from worker ", credit.worker(),
                                      ", which is not one of the sender's workers"));
      }
      return receiver_->deliver_credit(credit.channel(), credit.worker(), credit.bytes());
    }
    case v1::Frame::kHeartbeat:
      return absl::OkStatus();
    case v1::Frame::kGoodbye:
      if (goodbye_) return malformed("a second Goodbye");
      goodbye_ = true;
      if (!frame.goodbye().error().empty()) {
        return absl::AbortedError(absl::StrCat("it failed: ", frame.goodbye().error()));
      }
      return absl::OkStatus();
    case v1::Frame::kHello:
      return malformed("a second Hello");
    case v1::Frame::kProof:
      return malformed("a Proof after the handshake");
    case v1::Frame::KIND_NOT_SET:
      break;
  }
  return malformed("a frame of no known kind");
}

}  // namespace weir::protocol
