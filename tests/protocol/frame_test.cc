// Frames of the cluster link: the hand-written encoder against the generated code, parsing of
// malformed and truncated batches, Hello checks, and what a FrameReader accepts and refuses.

#include "frame.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "weir/protocol/v1/link.pb.h"

namespace weir::protocol {
namespace {

// Records what a link delivers; refuses payloads that say "refuse".
class Recorder final : public TransportReceiver {
 public:
  struct Frame {
    char kind;
    uint64_t channel;
    uint32_t from, to;
    uint64_t seq;
    std::string payload;
    bool operator==(const Frame&) const = default;
  };
  absl::Status deliver_data(uint64_t channel, uint32_t from, uint32_t to,
                            std::string_view payload) override {
    if (payload == "refuse") return absl::InvalidArgumentError("refused payload");
    frames.push_back({'d', channel, from, to, 0, std::string(payload)});
    return absl::OkStatus();
  }
  absl::Status deliver_progress(uint64_t channel, uint32_t from, uint64_t seq,
                                std::string_view payload) override {
    frames.push_back({'p', channel, from, 0, seq, std::string(payload)});
    return absl::OkStatus();
  }
  absl::Status deliver_credit(uint64_t channel, uint32_t worker, uint64_t bytes) override {
    frames.push_back({'c', channel, worker, 0, bytes, ""});
    return absl::OkStatus();
  }
  void link_failed(absl::Status status) override { failures.push_back(std::move(status)); }

  std::vector<Frame> frames;
  std::vector<absl::Status> failures;
};

Hello hello(uint32_t process) {
  Hello h;
  h.cluster_id = "test-cluster";
  h.process = process;
  h.incarnation = 3;
  h.workers = 2;
  h.processes = 3;
  h.flow_window = 1 << 20;
  return h;
}

TEST(FrameTest, EncodingEqualsGeneratedCode) {
  std::string batch;
  append_hello(hello(1), batch);
  append_data(7, 2, 0, std::string(300, 'x'), batch);
  append_data(0, 0, 0, "", batch);  // Default values are left out, as the generated code does.
  append_progress(1ULL << 40, 3, 99, "updates", batch);
  append_credit(9, 4, 1ULL << 33, batch);
  append_credit(0, 0, 0, batch);
  append_heartbeat(batch);
  append_goodbye("", batch);
  append_goodbye("it broke", batch);

  v1::FrameBatch expected;
  auto* h = expected.add_frames()->mutable_hello();
  h->set_cluster_id("test-cluster");
  h->set_process(1);
  h->set_incarnation(3);
  h->set_workers(2);
  h->set_processes(3);
  h->set_version(kProtocolVersion);
  h->set_flow_window(1 << 20);
  auto* d = expected.add_frames()->mutable_data();
  d->set_channel(7);
  d->set_from(2);
  d->set_to(0);
  d->set_payload(std::string(300, 'x'));
  expected.add_frames()->mutable_data();
  auto* p = expected.add_frames()->mutable_progress();
  p->set_channel(1ULL << 40);
  p->set_from(3);
  p->set_seq(99);
  p->set_updates("updates");
  auto* c = expected.add_frames()->mutable_credit();
  c->set_channel(9);
  c->set_worker(4);
  c->set_bytes(1ULL << 33);
  expected.add_frames()->mutable_credit();
  expected.add_frames()->mutable_heartbeat();
  expected.add_frames()->mutable_goodbye();
  expected.add_frames()->mutable_goodbye()->set_error("it broke");

  EXPECT_EQ(batch, expected.SerializeAsString());
  v1::FrameBatch parsed;
  ASSERT_TRUE(parse_batch(batch, parsed).ok());
  EXPECT_EQ(parsed.SerializeAsString(), batch);
}

TEST(FrameTest, LargePayloadsUseMultiByteLengths) {
  std::string batch;
  const std::string payload(1 << 20, 'y');
  append_data(1, 2, 3, payload, batch);
  append_data(1, 2, 3, payload, batch);
  v1::FrameBatch parsed;
  ASSERT_TRUE(parse_batch(batch, parsed).ok());
  ASSERT_EQ(parsed.frames_size(), 2);
  EXPECT_EQ(parsed.frames(1).data().payload(), payload);
}

TEST(FrameTest, TruncatedBatchesAreRefusedOrShorter) {
  std::string batch;
  append_hello(hello(2), batch);
  append_data(5, 4, 1, "payload", batch);
  append_progress(6, 5, 1, "progress", batch);
  for (size_t n = 0; n < batch.size(); ++n) {
    v1::FrameBatch parsed;
    const absl::Status status = parse_batch(std::string_view(batch).substr(0, n), parsed);
    // A cut between frames is a shorter, valid batch; anywhere else it is malformed.
    if (status.ok()) {
      EXPECT_LT(parsed.frames_size(), 3) << "prefix of " << n << " bytes";
    } else {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(status.message().find("malformed"), std::string::npos) << status;
    }
  }
}

TEST(FrameTest, GarbageNeverCrashesTheReader) {
  std::mt19937_64 rng(42);
  Recorder recorder;
  size_t refused = 0;
  for (int round = 0; round < 2000; ++round) {
    std::string bytes(rng() % 200, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    v1::FrameBatch batch;
    absl::Status status = parse_batch(bytes, batch);
    if (status.ok()) {
      FrameReader reader(1, hello(0), recorder);
      status = reader.on_batch(batch);
    }
    refused += !status.ok();
  }
  EXPECT_GT(refused, 1000u);  // Random bytes are nearly always refused.
}

TEST(FrameTest, ReadHelloNeedsExactlyOneHello) {
  std::string batch;
  append_hello(hello(2), batch);
  v1::FrameBatch parsed;
  ASSERT_TRUE(parse_batch(batch, parsed).ok());
  auto read = read_hello(parsed);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->process, 2u);
  EXPECT_EQ(read->cluster_id, "test-cluster");
  EXPECT_EQ(read->incarnation, 3u);

  append_heartbeat(batch);
  ASSERT_TRUE(parse_batch(batch, parsed).ok());
  EXPECT_FALSE(read_hello(parsed).ok());

  std::string data_first;
  append_data(0, 0, 0, "x", data_first);
  ASSERT_TRUE(parse_batch(data_first, parsed).ok());
  EXPECT_FALSE(read_hello(parsed).ok());
  ASSERT_TRUE(parse_batch("", parsed).ok());
  EXPECT_FALSE(read_hello(parsed).ok());
}

TEST(FrameTest, CheckHelloNamesWhatDiffers) {
  const Hello mine = hello(0);
  EXPECT_TRUE(check_hello(mine, hello(1)).ok());
  auto refused = [&](Hello theirs, const std::string& words) {
    absl::Status status = check_hello(mine, theirs);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(status.message().find(words), std::string::npos) << status;
  };
  Hello h = hello(1);
  h.cluster_id = "other";
  refused(h, "cluster 'other'");
  h = hello(1);
  h.processes = 4;
  refused(h, "-n 4");
  h = hello(1);
  h.workers = 1;
  refused(h, "-w 1");
  h = hello(1);
  h.incarnation = 2;
  refused(h, "older");
  h = hello(1);
  h.incarnation = 4;
  refused(h, "this process is stale");
  h = hello(1);
  h.version = 9;
  refused(h, "version 9");
  h = hello(1);
  h.flow_window = 4096;  // Windows that differ would hold senders back for ever.
  refused(h, "flow window of 4096 bytes");
  refused(hello(0), "which is this process");
  refused(hello(3), "process 3 of 3");
}

TEST(FrameTest, ReaderDeliversFramesOfThePeer) {
  Recorder recorder;
  FrameReader reader(1, hello(0), recorder);  // Peer 1: workers 2 and 3; this process: 0, 1.
  std::string bytes;
  append_data(4, 2, 1, "a", bytes);
  append_heartbeat(bytes);
  append_progress(5, 3, 7, "b", bytes);
  append_credit(4, 3, 4096, bytes);
  append_goodbye("", bytes);
  append_heartbeat(bytes);
  v1::FrameBatch batch;
  ASSERT_TRUE(parse_batch(bytes, batch).ok());
  ASSERT_TRUE(reader.on_batch(batch).ok());
  EXPECT_TRUE(reader.goodbye_received());
  const std::vector<Recorder::Frame> expected = {
      {'d', 4, 2, 1, 0, "a"}, {'p', 5, 3, 0, 7, "b"}, {'c', 4, 3, 0, 4096, ""}};
  EXPECT_EQ(recorder.frames, expected);
}

TEST(FrameTest, ReaderRefusesFramesThatDoNotFitTheLink) {
  auto refuse = [](auto&& build, absl::StatusCode code, const std::string& words) {
    Recorder recorder;
    FrameReader reader(1, hello(0), recorder);
    std::string bytes;
    build(bytes);
    v1::FrameBatch batch;
    ASSERT_TRUE(parse_batch(bytes, batch).ok());
    absl::Status status = reader.on_batch(batch);
    EXPECT_EQ(status.code(), code) << status;
    EXPECT_NE(status.message().find(words), std::string::npos) << status;
  };
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  refuse([](std::string& b) { append_data(0, 0, 1, "x", b); }, kInvalid, "from worker 0");
  refuse([](std::string& b) { append_data(0, 2, 4, "x", b); }, kInvalid, "for worker 4");
  refuse([](std::string& b) { append_progress(0, 5, 0, "x", b); }, kInvalid, "from worker 5");
  refuse([](std::string& b) { append_credit(0, 1, 10, b); }, kInvalid,
         "Credit frame from worker 1");
  refuse(
      [](std::string& b) {
        append_goodbye("", b);
        append_credit(0, 2, 10, b);
      },
      kInvalid, "Credit frame after Goodbye");
  refuse([](std::string& b) { append_hello(hello(1), b); }, kInvalid, "second Hello");
  refuse(
      [](std::string& b) {
        append_goodbye("", b);
        append_data(0, 2, 0, "x", b);
      },
      kInvalid, "after Goodbye");
  refuse(
      [](std::string& b) {
        append_goodbye("", b);
        append_goodbye("", b);
      },
      kInvalid, "second Goodbye");
  refuse([](std::string& b) { append_goodbye("worker 3 failed", b); }, absl::StatusCode::kAborted,
         "worker 3 failed");
  refuse([](std::string& b) { append_data(0, 2, 0, "refuse", b); }, kInvalid, "refused payload");
  // A frame of a kind this version does not know (an empty Frame, or field 9).
  refuse([](std::string& b) { b.append("\x0a\x00", 2); }, kInvalid, "no known kind");
  refuse([](std::string& b) { b.append("\x0a\x02\x4a\x00", 4); }, kInvalid, "no known kind");
}

// Goodbye.error and Hello.cluster_id are bytes: text that is not UTF-8 (an error quoting a
// record, say) still parses, and the peer's failure arrives with it.
TEST(FrameTest, TextThatIsNotUtf8Parses) {
  const std::string not_utf8 = "worker 2 failed on \xff\xfe\xc3(";
  {
    Recorder recorder;
    FrameReader reader(1, hello(0), recorder);
    std::string bytes;
    append_progress(5, 3, 7, "b", bytes);
    append_goodbye(not_utf8, bytes);
    v1::FrameBatch batch;
    ASSERT_TRUE(parse_batch(bytes, batch).ok());
    ASSERT_EQ(batch.frames_size(), 2);
    EXPECT_EQ(batch.frames(1).goodbye().error(), not_utf8);
    absl::Status status = reader.on_batch(batch);
    EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
    EXPECT_NE(status.message().find(not_utf8), std::string::npos) << status;
    EXPECT_TRUE(reader.goodbye_received());
    EXPECT_EQ(recorder.frames.size(), 1u);  // The progress frame before it was delivered.
  }
  {
    Hello mine = hello(0);
    mine.cluster_id = "cluster \xff";
    std::string bytes;
    append_hello(mine, bytes);
    v1::FrameBatch batch;
    ASSERT_TRUE(parse_batch(bytes, batch).ok());
    absl::StatusOr<Hello> read = read_hello(batch);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->cluster_id, mine.cluster_id);
  }
}

}  // namespace
}  // namespace weir::protocol
