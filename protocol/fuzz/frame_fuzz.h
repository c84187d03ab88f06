// The real runtime that frame_fuzz hands its inputs to, and that frame_fuzz_seeds runs to record
// what a peer sends (see frame_fuzz.cc).
//
// A cluster of kProcesses processes of kWorkers worker each, with no network: FuzzProcess is one
// of its processes, a ProcessShared (the runtime's TransportReceiver, as behind a gRPC link) and
// its worker, which has built fuzz_dataflow. Frames are handed to the ProcessShared as a link's
// reader would, and the worker is stepped on the calling thread. What the worker sends to the
// other process goes to a RecordingTransport (kept when recording, else dropped).
//
// Thread safety: worker-local (one thread drives a FuzzProcess).

#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"

#include "weir/weir.h"

namespace weir::protocol::fuzz {

inline constexpr uint32_t kProcesses = 2;
inline constexpr uint32_t kWorkers = 1;

// ---- record types of the codec oracle (frame_fuzz.cc's decode_data, by channel) ----
// Between them, every kind of type weir::Codec supports: each scalar kind, bool, enums with
// unsigned and signed ranges, aggregates with and without padding (field by field, or copied as
// bytes), CodecAsBytes classes, Location, strings, pairs, tuples, arrays (as bytes and element by
// element; an empty std::array has no codec: it does not compile), vectors (as bytes, element by
// element, and of bool), optionals, variants, and compositions of these.

enum class Kind : uint8_t { kA, kB, kC };
enum class Signed : int16_t { kLow = -3, kZero = 0, kHigh = 4 };

// Padding after `tag`, a bool and an enum: encoded field by field.
struct Padded {
  uint8_t tag = 0;
  uint64_t value = 0;
  bool flag = false;
  Kind kind = Kind::kA;
};
// No padding and only byte-like fields: copied as its bytes (and vectors of it in one go).
struct Packed {
  uint32_t a = 0;
  int32_t b = 0;
  uint64_t c = 0;
};
// A class with a private member, opted in to be copied as bytes.
class Id {
 public:
  Id() = default;
  explicit Id(uint64_t v) : v_(v) {}
  uint64_t value() const { return v_; }

 private:
  uint64_t v_ = 0;
};
// Aggregates, containers and variants inside an aggregate.
struct Composite {
  Padded padded;
  std::vector<Kind> kinds;
  std::optional<Product<uint64_t, uint32_t>> at;
  std::variant<Packed, std::array<uint8_t, 2>, std::vector<uint32_t>> choice;
};
// The most fields an aggregate may have (internal::kMaxAggregateFields).
struct Wide {
  bool f0 = false;
  int8_t f1 = 0;
  uint16_t f2 = 0;
  int32_t f3 = 0;
  uint64_t f4 = 0;
  float f5 = 0;
  double f6 = 0;
  char f7 = 0;
  char16_t f8 = 0;
  char32_t f9 = 0;
  Kind f10 = Kind::kA;
  Signed f11 = Signed::kZero;
  std::byte f12{};
  std::string f13;
  std::optional<bool> f14;
  Id f15;
};

}  // namespace weir::protocol::fuzz

template <>
struct weir::EnumRange<weir::protocol::fuzz::Kind> {
  static constexpr auto kFirst = weir::protocol::fuzz::Kind::kA;
  static constexpr auto kLast = weir::protocol::fuzz::Kind::kC;
};
template <>
struct weir::EnumRange<weir::protocol::fuzz::Signed> {
  static constexpr auto kFirst = weir::protocol::fuzz::Signed::kLow;
  static constexpr auto kLast = weir::protocol::fuzz::Signed::kHigh;
};
template <>
struct weir::CodecAsBytes<weir::protocol::fuzz::Id> : std::true_type {};

namespace weir::protocol::fuzz {

// Data channels of the codec oracle: channel c carries batches of the record type c % this.
inline constexpr uint64_t kRecordTypes = 16;

// ---- the runtime ----

// A frame a process sent, kept for the seed corpus.
struct SentFrame {
  bool progress = false;
  uint64_t channel = 0;
  uint32_t from = 0;
  uint32_t to = 0;   // Data frames only.
  uint64_t seq = 0;  // Progress frames only.
  std::string payload;
};

class RecordingTransport final : public Transport {
 public:
  explicit RecordingTransport(bool record) : record_(record) {}
  void send_data(size_t, uint64_t channel, uint32_t from, uint32_t to,
                 std::string payload) override {
    if (record_) sent_.push_back({false, channel, from, to, 0, std::move(payload)});
  }
  void send_progress(size_t, uint64_t channel, uint32_t from, uint64_t seq,
                     std::string payload) override {
    if (record_) sent_.push_back({true, channel, from, 0, seq, std::move(payload)});
  }
  // The fuzzed process runs without flow control (its window is 0): it returns no credit.
  void send_credit(size_t, uint64_t, uint32_t, uint64_t) override {}
  absl::Status close() override { return absl::OkStatus(); }
  const std::vector<SentFrame>& sent() const { return sent_; }

 private:
  bool record_;
  std::vector<SentFrame> sent_;
};

// The dataflow every process builds: records exchanged at the root, and an iterative scope
// (times (epoch, round)) with its own exchange of (value, tag) pairs and a region inside it, so
// that progress carries nested batches for paths of length 1 and 2, and data crosses processes
// at both depths. A value halves every round and leaves the loop at 0.
//
//   input -> exchange -> probe
//                     -> Iterative[ enter -> concat(cycle) -> map -> exchange
//                                   -> Region[ map ] -> filter(> 0) -> cycle ] -> leave -> probe
inline InputHandle<uint64_t, uint64_t> fuzz_dataflow(Scope<uint64_t>& scope,
                                                     ProbeHandle<uint64_t>& probe_handle) {
  using Tagged = std::pair<uint64_t, std::string>;
  auto [handle, stream] = new_input<uint64_t>(scope);
  auto exchanged = stream | exchange([](const uint64_t& x) { return x; });
  exchanged | probe_with(probe_handle);
  auto result = scope.iterative<uint64_t>([&](auto& inner) {
    auto [loop, cycle] = loop_variable<Tagged>(inner, uint64_t{1});
    auto entered = inner.enter(exchanged) | map([](uint64_t x) {
                     return Tagged{x, std::to_string(x)};
                   });
    auto body = entered | concat(cycle) | exchange([](const Tagged& t) { return t.first; });
    auto halved = inner.region([&](auto& region) {
      return region.leave(region.enter(body) | map([](Tagged t) {
                            t.first /= 2;
                            return t;
                          }));
    });
    halved | filter([](const Tagged& t) { return t.first > 0; }) | connect_loop(loop);
    return inner.leave(halved);
  });
  result | probe_with(probe_handle);
  return std::move(handle);
}

class FuzzProcess {
 public:
  // Process `process` of the cluster, built; `record`: keep what it sends.
  explicit FuzzProcess(uint32_t process, bool record = false)
      : shared_(std::make_shared<ProcessShared>(kWorkers, kProcesses, process)),
        transport_(record) {
    shared_->set_transport(&transport_);
    worker_ = std::make_unique<Worker>(0, shared_);
    first_channel_ = worker_->allocator().next_channel_id();
    input_ = worker_->dataflow<uint64_t>(
        [&](Scope<uint64_t>& scope) { return fuzz_dataflow(scope, probe_); });
    // The root scope takes its progress channel last, at build.
    progress_channel_ = worker_->allocator().next_channel_id() - 1;
  }
  FuzzProcess(const FuzzProcess&) = delete;
  FuzzProcess& operator=(const FuzzProcess&) = delete;
  ~FuzzProcess() {
    // The dataflow goes first: the input handle then finds its operator gone.
    worker_.reset();
  }

  ProcessShared& shared() { return *shared_; }
  InputHandle<uint64_t, uint64_t>& input() { return input_; }
  const ProbeHandle<uint64_t>& probe() const { return probe_; }
  const RecordingTransport& transport() const { return transport_; }
  uint64_t progress_channel() const { return progress_channel_; }
  // Every channel id the dataflow took is in [first_channel, progress_channel].
  uint64_t first_channel() const { return first_channel_; }

  // Steps the worker at most `steps` times: until it has nothing to do or the execution failed.
  void run(int steps) {
    for (int i = 0; i < steps && !shared_->failed(); ++i) {
      try {
        if (!worker_->step()) return;
      } catch (const ExecutionFailed&) {
        return;
      }
    }
  }

 private:
  std::shared_ptr<ProcessShared> shared_;
  RecordingTransport transport_;  // Outlives the worker, which sends through it.
  std::unique_ptr<Worker> worker_;
  ProbeHandle<uint64_t> probe_;
  InputHandle<uint64_t, uint64_t> input_;
  uint64_t first_channel_ = 0;
  uint64_t progress_channel_ = 0;
};

}  // namespace weir::protocol::fuzz
