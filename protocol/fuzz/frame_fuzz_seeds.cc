// frame_fuzz_seeds DIR: writes frame_fuzz's seed corpus into DIR, one valid stream message per
// file, made with frame.cc's encoder: Hellos (one this process accepts and a few it refuses),
// Data frames whose payloads are well-formed batches of each record type frame_fuzz decodes,
// Progress frames with a root scope's progress message, Heartbeat and Goodbye, and a batch of
// them all. run.sh calls it before every run, so the seeds follow the encoders.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "frame.h"

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

// One well-formed payload per record type of frame_fuzz.cc's decode_data (by channel % 6).
std::string data_payload(uint64_t channel) {
  switch (channel % 6) {
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
    default:
      return batch_payload<Product, std::pair<std::optional<std::string>, double>>(
          Product{0, 9}, {{std::string("never"), 0.5}, {std::nullopt, -1.0}});
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
  for (uint64_t channel = 0; channel < 6; ++channel) {
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
  return 0;
}
