// The gRPC transport of a cluster: one long-lived bidirectional stream (Link.Connect) per pair
// of processes, the higher-numbered process dialing the lower one.
//
// - Start-up: every process listens on its hostfile address, dials each lower-numbered process
//   (retrying while it is not up yet), and exchanges Hellos; connect_grpc returns once every
//   peer is linked, or an error after config.startup_timeout.
// - Sending: frames are appended to a per-link buffer in wire format. When no write is in
//   flight the buffer is written at once (low latency when idle); otherwise it grows until the
//   write completes and goes out as one message (large writes under load). A link with more
//   than 64 MiB queued makes send_* wait (backpressure).
// - Receiving: one thread polls the completion queue, parses each batch and hands its frames,
//   checked, to the TransportReceiver. gRPC's default executor threads are switched off, so a
//   write or a read completes on the thread that started it or on the poller, never on a third
//   thread (see run_grpc_executor_inline).
// - Failure (fail-stop): a stream error, a malformed frame, a Goodbye reporting a failure or no
//   frame within the heartbeat timeout (links send a Heartbeat after a quarter of it in
//   silence) calls TransportReceiver::link_failed with an error naming the peer.
// - close(): says Goodbye on every link (with the local error if the workers failed), waits for
//   the peers' Goodbyes when they succeeded (a lost peer is still detected by heartbeats), and
//   tears down. Never waits on a dead peer for longer than the heartbeat timeout.
//
// Thread safety: send_* from any thread; close() once, after the last send_*.

#pragma once

#include <memory>

#include "absl/status/statusor.h"

#include "weir/communication/transport.h"
#include "weir/worker/config.h"

namespace weir::protocol {

// Connects this process (config.process) to every other process of config.hostfile.
// NOTE: `receiver` must outlive the transport.
absl::StatusOr<std::unique_ptr<Transport>> connect_grpc(const Config& config,
                                                        TransportReceiver& receiver);

}  // namespace weir::protocol
