// Capture and replay: recording a stream (its records and its progress) to a file, and playing
// it back as a stream of another dataflow with the same records at the same times and the same
// frontier.
//
//   // In one dataflow, on every worker:
//   stream | weir::capture_to_file("/tmp/run-" + std::to_string(worker.index()) + ".cap");
//   // Later, in another dataflow (any number of workers):
//   auto replayed = weir::replay_from_files<uint64_t>(scope, paths);
//
// A capture file holds events: Messages(time, records) and Progress(frontier changes, relative
// to a frontier of {minimum}). Replay spreads the files over the workers, and the replayed
// stream's frontier is the union of the files' frontiers. Records and times are encoded with
// weir::Codec.
//
// Errors: a file that cannot be written or read, is truncated or corrupt, or ends before its
// stream completed fails the dataflow with an error naming the file.
//
// Thread safety: worker-local.

#pragma once

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "weir/communication/codec.h"
#include "weir/dataflow/operator_builder.h"
#include "weir/errno_message.h"
#include "weir/operators/pipe.h"

namespace weir {

namespace internal {

inline constexpr char kCaptureMagic[8] = {'W', 'E', 'I', 'R', 'C', 'A', 'P', '1'};
inline constexpr uint8_t kEventProgress = 1;
inline constexpr uint8_t kEventMessages = 2;

class CaptureFile {
 public:
  explicit CaptureFile(std::string path) : path_(std::move(path)) {
    file_ = std::fopen(path_.c_str(), "wb");
    if (file_ == nullptr) fail("cannot create");
    write_raw(kCaptureMagic, sizeof(kCaptureMagic));
  }
  CaptureFile(const CaptureFile&) = delete;
  CaptureFile& operator=(const CaptureFile&) = delete;
  ~CaptureFile() {
    if (file_ != nullptr) std::fclose(file_);
  }

  void write_event(uint8_t tag, const std::string& payload) {
    write_raw(&tag, 1);
    const uint64_t n = payload.size();
    write_raw(&n, sizeof(n));
    write_raw(payload.data(), payload.size());
  }
  void finish() {
    if (file_ == nullptr) return;
    if (std::fclose(file_) != 0) {
      file_ = nullptr;
      fail("cannot close");
    }
    file_ = nullptr;
  }

 private:
  void write_raw(const void* data, size_t n) {
    if (n > 0 && std::fwrite(data, 1, n, file_) != n) fail("cannot write");
  }
  [[noreturn]] void fail(const char* what) {
    throw std::runtime_error(std::string("capture file '") + path_ + "': " + what + ": " +
                             weir::errno_message(errno));
  }

  std::string path_;
  std::FILE* file_ = nullptr;
};

class ReplayFile {
 public:
  explicit ReplayFile(std::string path) : path_(std::move(path)) {
    std::FILE* f = std::fopen(path_.c_str(), "rb");
    if (f == nullptr) fail(std::string("cannot open: ") + weir::errno_message(errno));
    char buffer[1 << 16];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0) bytes_.append(buffer, n);
    const bool error = std::ferror(f) != 0;
    std::fclose(f);
    if (error) fail("read error");
    std::string_view view(bytes_);
    if (view.size() < sizeof(kCaptureMagic) ||
        std::memcmp(view.data(), kCaptureMagic, sizeof(kCaptureMagic)) != 0) {
      fail("not a weir capture file (bad magic)");
    }
    offset_ = sizeof(kCaptureMagic);
  }

  // The next event's tag and payload; false at the end of the file.
  bool next(uint8_t& tag, std::string_view& payload) {
    if (offset_ == bytes_.size()) return false;
    std::string_view rest = std::string_view(bytes_).substr(offset_);
    uint64_t n = 0;
    if (rest.size() < 1 + sizeof(n))
      fail("truncated event header at byte " + std::to_string(offset_));
    tag = static_cast<uint8_t>(rest[0]);
    std::memcpy(&n, rest.data() + 1, sizeof(n));
    if (rest.size() - 1 - sizeof(n) < n) fail("truncated event at byte " + std::to_string(offset_));
    payload = rest.substr(1 + sizeof(n), n);
    offset_ += 1 + sizeof(n) + n;
    return true;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("capture file '" + path_ + "': " + what);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string bytes_;
  size_t offset_ = 0;
};

}  // namespace internal

// Writes `stream`'s records and progress on this worker to `path`; returns the stream.
template <Timestamp T, class D>
Stream<T, D> capture_to_file(const Stream<T, D>& stream, const std::string& path) {
  OperatorBuilder<T> builder("Capture", stream.scope());
  auto input = builder.add_input(stream, Pipeline{});
  builder.build([&](std::vector<Capability<T>>) {
    auto file = std::make_shared<internal::CaptureFile>(path);
    std::vector<T> recorded{minimum_time<T>()};
    return [input, file, recorded,
            payload = std::string()](std::span<const MutableAntichain<T>> frontiers) mutable {
      input.for_each([&](const InputCapability<T>& cap, std::vector<D>& data) {
        payload.clear();
        Codec<T>::encode(cap.time(), payload);
        Codec<std::vector<D>>::encode(data, payload);
        file->write_event(internal::kEventMessages, payload);
      });
      auto frontier = frontiers[0].frontier();
      if (!std::equal(frontier.begin(), frontier.end(), recorded.begin(), recorded.end())) {
        std::vector<std::pair<T, int64_t>> changes;
        changes.reserve(recorded.size() + frontier.size());
        for (const T& t : recorded) changes.emplace_back(t, -1);
        for (const T& t : frontier) changes.emplace_back(t, 1);
        payload.clear();
        Codec<std::vector<std::pair<T, int64_t>>>::encode(changes, payload);
        file->write_event(internal::kEventProgress, payload);
        recorded.assign(frontier.begin(), frontier.end());
        if (recorded.empty()) file->finish();
      }
    };
  });
  return stream;
}

// Replays capture files as a stream. Worker w reads the files with index i where i % peers == w.
template <class D, Timestamp T>
Stream<T, D> replay_from_files(Scope<T>& scope, std::vector<std::string> paths) {
  OperatorBuilder<T> builder("Replay", scope);
  auto [output, stream] = builder.template add_output<D>();
  builder.set_notify(false);
  const size_t me = scope.index(), peers = scope.peers();
  std::vector<std::string> mine;
  for (size_t i = 0; i < paths.size(); ++i) {
    if (i % peers == me) mine.push_back(paths[i]);
  }
  builder.build([&](std::vector<Capability<T>> caps) {
    CapabilitySet<T> held;
    // Each file starts at {minimum}; the frontier of what this worker replays is their union.
    auto frontier = std::make_shared<MutableAntichain<T>>();
    if (!mine.empty()) {
      held.insert(std::move(caps[0]));
      frontier->update(minimum_time<T>(), static_cast<int64_t>(mine.size()));
    }
    std::vector<std::shared_ptr<internal::ReplayFile>> files;
    return [output, mine, held = std::move(held), frontier,
            files](std::span<const MutableAntichain<T>>) mutable {
      if (files.empty() && !mine.empty()) {
        for (const auto& path : mine) files.push_back(std::make_shared<internal::ReplayFile>(path));
      }
      std::vector<D> records;
      std::vector<std::pair<T, int64_t>> changes;
      for (auto& file : files) {
        uint8_t tag = 0;
        std::string_view payload;
        while (file->next(tag, payload)) {
          if (tag == internal::kEventMessages) {
            T time{};
            if (!Codec<T>::decode(payload, time) ||
                !Codec<std::vector<D>>::decode(payload, records) || !payload.empty()) {
              file->fail("corrupt messages event");
            }
            auto cap = held.try_delayed(time);
            if (!cap) file->fail("records at a time the replayed frontier has passed");
            output.session(*cap).give_vec(records);
          } else if (tag == internal::kEventProgress) {
            if (!Codec<std::vector<std::pair<T, int64_t>>>::decode(payload, changes) ||
                !payload.empty()) {
              file->fail("corrupt progress event");
            }
            frontier->update_iter(changes);
            for (const T& t : frontier->frontier()) {
              if (!held.try_delayed(t)) file->fail("progress event moves the frontier backwards");
            }
            held.downgrade(frontier->frontier());
          } else {
            file->fail("unknown event tag " + std::to_string(tag));
          }
        }
      }
      if (!held.empty()) {
        // Every file was read to its end, yet some stream did not complete.
        std::string names;
        for (const auto& file : files) names += (names.empty() ? "" : ", ") + file->path();
        files.clear();
        mine.clear();
        held.clear();
        throw std::runtime_error("capture files [" + names + "] end before their stream completed");
      }
      files.clear();
    };
  });
  return stream;
}

inline auto capture_to_file(std::string path) {
  return adaptor([path = std::move(path)](const auto& s) { return capture_to_file(s, path); });
}

}  // namespace weir
