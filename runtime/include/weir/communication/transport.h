// Transport: how the processes of a cluster exchange bytes. The runtime encodes batches (with
// weir::Codec) and progress batches itself; a transport moves frames between processes, in
// order per pair of processes, and reports a lost peer. The gRPC transport lives in protocol/.
//
// Data frames carry one batch for one worker; progress frames carry one worker's progress batch
// for every worker of the receiving process; credit frames return flow-control credit. Frames
// from one worker arrive in the order sent.
//
// Thread safety: `send_*` may be called from every worker thread at once; a transport calls its
// TransportReceiver from its own threads.

#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace weir {

struct Config;

// What a transport hands incoming frames to (the process's runtime).
class TransportReceiver {
 public:
  // A batch for worker `to` (global index) of this process on `channel`, from worker `from`.
  // An error (malformed payload) means the link that carried it must be closed.
  virtual absl::Status deliver_data(uint64_t channel, uint32_t from, uint32_t to,
                                    std::string_view payload) = 0;
  // Progress batch number `seq` of worker `from` on `channel`, for every worker of this process.
  virtual absl::Status deliver_progress(uint64_t channel, uint32_t from, uint64_t seq,
                                        std::string_view payload) = 0;
  // Flow control: worker `worker` (of the peer) consumed `bytes` more of what this process sent
  // it on `channel` (weir/communication/internal/credit.h). A receiver without flow control
  // ignores it.
  virtual absl::Status deliver_credit(uint64_t /*channel*/, uint32_t /*worker*/,
                                      uint64_t /*bytes*/) {
    return absl::OkStatus();
  }
  // A peer is lost or misbehaved: the whole execution fails with `status` (naming the peer).
  virtual void link_failed(absl::Status status) = 0;

 protected:
  ~TransportReceiver() = default;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual void send_data(size_t process, uint64_t channel, uint32_t from, uint32_t to,
                         std::string payload) = 0;
  virtual void send_progress(size_t process, uint64_t channel, uint32_t from, uint64_t seq,
                             std::string payload) = 0;
  // Flow control: tells `process` that worker `worker` (of this process) consumed `bytes` more
  // of what it sent on `channel`. Never waits behind data: a sender blocked for want of credit
  // must hear of it.
  virtual void send_credit(size_t process, uint64_t channel, uint32_t worker, uint64_t bytes) = 0;
  // Sends what is queued, says Goodbye to every peer and closes the links. Called once, after
  // every worker of this process has finished.
  virtual absl::Status close() = 0;
};

// Makes a connected transport (every peer said Hello), or an error naming what failed.
using TransportFactory =
    std::function<absl::StatusOr<std::unique_ptr<Transport>>(const Config&, TransportReceiver&)>;

}  // namespace weir
