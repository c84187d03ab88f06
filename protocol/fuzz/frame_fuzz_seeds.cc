// frame_fuzz_seeds DIR: writes frame_fuzz's seed corpus into DIR, one valid stream message per
// file, made with frame.cc's encoder: Hellos (one this process accepts and a few it refuses),
// Data frames whose payloads are well-formed batches of each record type frame_fuzz decodes,
// Progress frames with a root scope's progress message, Heartbeat and Goodbye, and a batch of
// them all. And what a real peer sends: both processes of frame_fuzz.h's cluster run its
// dataflow to completion, each handed what the other sends, and what process 1 sent becomes
// stream messages (its first k steps' frames, for several k) and raw progress payloads (frame_fuzz
// also takes its whole input as one). Fails if that run does not complete: then the seeds would
// not reach what they are for. run.sh calls it before every run, so the seeds follow the
// encoders.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "frame.h"
#include "frame_fuzz.h"

#include "weir/communication/codec.h"
#include "weir/progress/location.h"
#include "weir/progress/timestamp.h"

namespace {

using weir::Codec;
using weir::protocol::Hello;

using Product = weir::Product<uint64_t, uint32_t>;

template <class T, class D>
std::string batch_payload(const T& time, const std::vector<D>& records) {
  std::string out;
  Codec<T>::encode(time, out);
  Codec<std::vector<D>>::encode(records, out);
  return out;
}

// One well-formed payload per record type of frame_fuzz.cc's decode_data (by channel).
std::string data_payload(uint64_t channel) {
  using namespace weir::protocol::fuzz;  // NOLINT(google-build-using-namespace): record types.
  static_assert(kRecordTypes == 16);
  switch (channel % kRecordTypes) {
    case 0:
      return batch_payload<uint64_t, uint64_t>(3, {0, 1, 2, 1ull << 40});
    case 1:
      return batch_payload<uint64_t, std::string>(4, {"from", "fairest", "", "creatures"});
    case 2:
      return batch_payload<uint64_t, std::pair<std::string, int64_t>>(5,
                                                                      {{"we", 1}, {"desire", -2}});
    case 3:
      return batch_payload<Product, std::tuple<uint32_t, std::string, std::optional<std::string>>>(
          Product{1, 2}, {{7, "increase", std::nullopt}, {8, "that", std::string("thereby")}});
    case 4:
      return batch_payload<uint64_t, std::vector<std::pair<uint64_t, std::string>>>(
          6, {{{1, "beauty's"}}, {}, {{2, "rose"}, {3, "might"}}});
    case 5:
      return batch_payload<Product, std::pair<std::optional<std::string>, double>>(
          Product{0, 9}, {{std::string("never"), 0.5}, {std::nullopt, -1.0}});
    case 6:
      return batch_payload<uint64_t, std::variant<uint32_t, std::string, bool>>(
          7, {uint32_t{1}, std::string("die"), true});
    case 7:
      return batch_payload<uint64_t, Padded>(8, {{1, 2, true, Kind::kC}, {}});
    case 8:
      return batch_payload<uint64_t, std::pair<std::array<int16_t, 3>, std::optional<Kind>>>(
          9, {{{1, -2, 3}, Kind::kB}, {{}, std::nullopt}});
    case 9:
      return batch_payload<Product, std::tuple<bool, Kind, std::byte, float>>(
          Product{2, 0}, {{false, Kind::kA, std::byte{0xff}, 1.5f}});
    case 10:
      return batch_payload<Product, std::pair<Packed, Id>>(Product{3, 1},
                                                           {{{1, -1, 2}, Id(3)}, {{}, Id(4)}});
    case 11:
      return batch_payload<uint64_t,
                           std::tuple<int8_t, uint16_t, int32_t, char, signed char, unsigned char,
                                      char8_t, char16_t, char32_t, wchar_t, float, double>>(
          10, {{-1, 2, -3, 'a', -4, 5, u8'b', u'c', U'd', L'e', 0.25f, -0.5}});
    case 12:
      return batch_payload<
          uint64_t, std::tuple<Signed, std::vector<bool>, std::optional<std::optional<uint8_t>>,
                               std::vector<weir::Location>>>(
          11, {{Signed::kLow,
                {true, false, true},
                std::optional<uint8_t>(std::nullopt),
                {weir::Location(1, 0, true), weir::Location(2, 1, false)}},
               {Signed::kHigh, {}, std::optional<uint8_t>(7), {}}});
    case 13:
      return batch_payload<uint64_t, std::tuple<std::array<std::string, 2>, std::array<bool, 3>,
                                                std::array<Packed, 2>>>(
          12, {{{"by", "time"}, {true, false, true}, {{{1, 2, 3}, {4, 5, 6}}}}});
    case 14: {
      Composite a;
      a.padded = {3, 4, false, Kind::kB};
      a.kinds = {Kind::kA, Kind::kC};
      a.at = Product{5, 6};
      a.choice = std::vector<uint32_t>{7, 8};
      Composite b;
      b.choice = std::array<uint8_t, 2>{9, 10};
      return batch_payload<Product, Composite>(Product{4, 4}, {a, b, Composite{}});
    }
    default: {
      Wide w;
      w.f0 = true;
      w.f1 = -1;
      w.f4 = 1ull << 63;
      w.f6 = 2.5;
      w.f9 = U'z';
      w.f10 = Kind::kC;
      w.f11 = Signed::kLow;
      w.f13 = "decease";
      w.f14 = false;
      w.f15 = Id(99);
      return batch_payload<uint64_t, Wide>(13, {w, Wide{}});
    }
  }
}

// A root scope's progress message in Scope<uint64_t>::encode's layout (see frame_fuzz.cc):
// updates, then one nested scope's batch.
template <class T>
using Updates = std::vector<std::pair<std::pair<weir::Location, T>, int64_t>>;
std::string progress_payload() {
  const Updates<uint64_t> updates = {{{weir::Location(1, 0, true), 3}, 1},
                                     {{weir::Location(2, 0, false), 3}, -1}};
  const Updates<weir::Product<uint64_t, uint64_t>> inner = {
      {{weir::Location(1, 0, true), {3, 1}}, 1}};
  std::string nested;
  Codec<Updates<weir::Product<uint64_t, uint64_t>>>::encode(inner, nested);
  std::string out;
  Codec<Updates<uint64_t>>::encode(updates, out);
  Codec<std::vector<std::pair<std::vector<uint32_t>, std::string>>>::encode({{{4}, nested}}, out);
  return out;
}

// The frames process 1 of frame_fuzz.h's cluster sends to process 0 while both run the dataflow to
// completion (each handed what the other sends), grouped by the step of process 1 that sent them.
std::vector<std::vector<weir::protocol::fuzz::SentFrame>> peer_stream(uint64_t& progress_channel) {
  using weir::protocol::fuzz::FuzzProcess;
  FuzzProcess zero(0, /*record=*/true), one(1, /*record=*/true);
  progress_channel = zero.progress_channel();
  for (uint64_t x : {2, 5, 12, 13}) {
    zero.input().send(x);
    one.input().send(x + 1);
  }
  zero.input().advance_to(1);
  one.input().advance_to(1);
  one.input().send(6);
  zero.input().close();
  one.input().close();
  size_t zero_seen = 0, one_seen = 0;
  std::vector<std::vector<weir::protocol::fuzz::SentFrame>> steps;
  // Hands `from`'s frames since `seen` to `to`.
  auto forward = [](const FuzzProcess& from, size_t& seen, FuzzProcess& to) {
    const auto& sent = from.transport().sent();
    for (; seen < sent.size(); ++seen) {
      const auto& frame = sent[seen];
      absl::Status status =
          frame.progress
              ? to.shared().deliver_progress(frame.channel, frame.from, frame.seq, frame.payload)
              : to.shared().deliver_data(frame.channel, frame.from, frame.to, frame.payload);
      if (!status.ok()) to.shared().link_failed(status);
    }
  };
  for (int round = 0; round < 200 && !(zero.probe().done() && one.probe().done()); ++round) {
    zero.run(1);
    // What process 1 sent since the last round (the first round: also what its input sent
    // before any step).
    const size_t before = one_seen;
    one.run(1);
    const auto& sent = one.transport().sent();
    if (sent.size() > before) steps.emplace_back(sent.begin() + before, sent.end());
    forward(zero, zero_seen, one);
    forward(one, one_seen, zero);
    if (zero.shared().failed() || one.shared().failed()) {
      std::fprintf(stderr, "frame_fuzz_seeds: the cluster failed: %s / %s\n",
                   zero.shared().status().ToString().c_str(),
                   one.shared().status().ToString().c_str());
      std::exit(1);
    }
  }
  if (!zero.probe().done() || !one.probe().done()) {
    std::fprintf(stderr, "frame_fuzz_seeds: the cluster did not complete its dataflow\n");
    std::exit(1);
  }
  return steps;
}

// What frame_fuzz's receiving process (1 of 3, 2 workers each, incarnation 7) hears from
// process 0.
Hello peer_hello() {
  Hello hello;
  hello.cluster_id = "fuzz";
  hello.process = 0;
  hello.workers = 2;
  hello.processes = 3;
  hello.incarnation = 7;
  return hello;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: frame_fuzz_seeds DIR\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary | std::ios::trunc) << bytes;
  };

  std::string batch;
  weir::protocol::append_hello(peer_hello(), batch);
  write("hello", batch);
  Hello other = peer_hello();
  other.cluster_id = "another";
  other.incarnation = 6;
  batch.clear();
  weir::protocol::append_hello(other, batch);
  write("hello-refused", batch);
  // Members of another incarnation: this process is stale, or the peer is.
  for (uint64_t incarnation : {6, 8}) {
    other = peer_hello();
    other.incarnation = incarnation;
    batch.clear();
    weir::protocol::append_hello(other, batch);
    write("hello-incarnation-" + std::to_string(incarnation), batch);
  }
  other = peer_hello();
  other.process = 1;
  other.version = 1;
  batch.clear();
  weir::protocol::append_hello(other, batch);
  write("hello-refused-2", batch);
  // The handshake: a Hello with a nonce and the acceptor's proof, and the dialer's Proof with
  // the frames that may follow it in the same batch.
  other = peer_hello();
  other.nonce = std::string(weir::protocol::kNonceBytes, 'n');
  other.proof = weir::protocol::handshake_mac("", weir::protocol::Role::kAcceptor, other, other);
  batch.clear();
  weir::protocol::append_hello(other, batch);
  write("hello-proof", batch);
  batch.clear();
  weir::protocol::append_proof(other.proof, batch);
  weir::protocol::append_heartbeat(batch);
  write("proof", batch);

  // Process 0's workers (0, 1) to this process's (2, 3).
  std::string all;
  for (uint64_t channel = 0; channel < weir::protocol::fuzz::kRecordTypes; ++channel) {
    batch.clear();
    weir::protocol::append_data(channel, channel % 2, 2 + channel % 2, data_payload(channel),
                                batch);
    write("data-" + std::to_string(channel), batch);
    all += batch;
  }
  batch.clear();
  weir::protocol::append_progress(1, 0, 0, progress_payload(), batch);
  weir::protocol::append_progress(1, 1, 0, progress_payload(), batch);
  write("progress", batch);
  all += batch;
  batch.clear();
  weir::protocol::append_credit(3, 0, 4096, batch);  // Worker 0 took 4 KiB of channel 3.
  weir::protocol::append_credit(1, 1, 1, batch);
  write("credit", batch);
  all += batch;
  batch.clear();
  weir::protocol::append_heartbeat(batch);
  write("heartbeat", batch);
  all += batch;
  batch.clear();
  weir::protocol::append_goodbye("", batch);
  write("goodbye", batch);
  all += batch;
  batch.clear();
  weir::protocol::append_goodbye("worker 1 failed: malformed batch from worker 4 on channel 2",
                                 batch);
  write("goodbye-failed", batch);
  write("all", all);

  // A real peer: process 1's frames of its first k steps, as one stream message, and each of
  // its progress payloads on its own.
  uint64_t progress_channel = 0;
  const auto steps = peer_stream(progress_channel);
  std::string stream;
  size_t payloads = 0, progress_frames = 0, nested = 0, data_frames = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    for (const auto& frame : steps[k]) {
      if (frame.progress) {
        weir::protocol::append_progress(frame.channel, frame.from, frame.seq, frame.payload,
                                        stream);
        write("peer-progress-" + std::to_string(payloads++), frame.payload);
        ++progress_frames;
        // The count of nested batches follows the updates: nonzero when a nested scope moved.
        std::string_view in(frame.payload);
        weir::ProgressUpdates<uint64_t> updates;
        uint64_t n = 0;
        if (weir::decode_updates<uint64_t>(in, updates) && Codec<uint64_t>::decode(in, n) &&
            n > 0) {
          ++nested;
        }
      } else {
        weir::protocol::append_data(frame.channel, frame.from, frame.to, frame.payload, stream);
        if (data_frames++ == 0) {
          // Each kind of frame on the other kind's channel: refused.
          batch.clear();
          weir::protocol::append_progress(frame.channel, frame.from, 0, frame.payload, batch);
          write("peer-progress-on-data-channel", batch);
          batch.clear();
          weir::protocol::append_data(progress_channel, frame.from, frame.to, frame.payload, batch);
          write("peer-data-on-progress-channel", batch);
        }
      }
    }
    write("peer-steps-" + std::to_string(k + 1), stream);
  }
  if (progress_frames == 0 || nested == 0 || data_frames == 0) {
    std::fprintf(stderr,
                 "frame_fuzz_seeds: the peer sent %zu progress batches, %zu with nested scopes' "
                 "batches, and %zu data frames: the seeds would not reach what they are for\n",
                 progress_frames, nested, data_frames);
    return 1;
  }
  return 0;
}
