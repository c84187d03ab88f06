#include "frame.h"

#include <climits>

#include "absl/strings/str_cat.h"

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
                   kGoodbyeField = 5;

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
                      varint_field_size(hello.processes) + varint_field_size(hello.version);
  begin_frame(kHelloField, body, batch);
  put_bytes_field(1, hello.cluster_id, batch);
  put_varint_field(2, hello.process, batch);
  put_varint_field(3, hello.incarnation, batch);
  put_varint_field(4, hello.workers, batch);
  put_varint_field(5, hello.processes, batch);
  put_varint_field(6, hello.version, batch);
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
  return hello;
}

absl::Status check_hello(const Hello& mine, const Hello& theirs) {
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
  if (theirs.incarnation < mine.incarnation) {
    return refuse("it is of incarnation ", theirs.incarnation, ", older than this process's ",
                  mine.incarnation, ": it is a stale process");
  }
  if (theirs.incarnation > mine.incarnation) {
    return refuse("it is of incarnation ", theirs.incarnation, ", newer than this process's ",
                  mine.incarnation, ": this process is stale");
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

absl::Status FrameReader::on_batch(const v1::FrameBatch& batch) {
  for (const v1::Frame& frame : batch.frames()) WEIR_RETURN_IF_ERROR(on_frame(frame));
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
    case v1::Frame::KIND_NOT_SET:
      break;
  }
  return malformed("a frame of no known kind");
}

}  // namespace weir::protocol
