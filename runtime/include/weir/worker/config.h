// Config: how many workers to run, in the conventions of timely dataflow.
//
//   -w, --workers N      worker threads per process (default 1)
//   -n, --processes N    processes in the cluster (default 1)
//   -p, --process I      this process's index (default 0)
//   -h, --hostfile FILE  one host:port per line, one line per process
//
// and, for clusters (see weir::cluster::execute in weir/protocol/cluster.h):
//
//   --cluster-id ID          processes of one cluster share it (default: from the hostfile);
//                            also read from $WEIR_CLUSTER_ID
//   --incarnation N          restarts count up; a process refuses peers of an older one
//                            (default 0, or $WEIR_INCARNATION)
//   --heartbeat-timeout-ms N a peer silent this long is lost (default 5000)
//   --startup-timeout-ms N   how long to wait for every peer at start (default 30000)
//   --operator-timeout-ms N  a worker in one run of one operator this long is stuck: the
//                            process fails naming the operator and exits (default 60000 in a
//                            cluster, off for one process; 0: off)
//   --flow-window-bytes N    flow control: an operator whose output channel has this many bytes
//                            waiting for one worker stops being scheduled until that worker
//                            takes some (default 1048576; 0: off; docs/cluster.md)
//   --tls-cert F --tls-key F --tls-ca F   TLS on the links; with --tls-ca, peers must present a
//                            certificate signed by that CA that names their process index
//                            (URI subjectAltName weir:process:<p>; mutual TLS)
//   --insecure-links         allow links without TLS to hosts off loopback (otherwise a hostfile
//                            with such an address needs the TLS flags); also
//                            $WEIR_INSECURE_LINKS=1
//   --cluster-secret-file F  the cluster secret, which every process proves it knows when it
//                            links (HMAC over nonces; never sent); also $WEIR_CLUSTER_SECRET_FILE,
//                            or the secret itself in $WEIR_CLUSTER_SECRET (never on the command
//                            line, where other users could read it)
//
// `from_args` takes these flags out of argv and leaves the program's own arguments.
//
// Thread safety: a value type.

#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "weir/communication/transport.h"

namespace weir {

struct Config {
  size_t workers = 1;
  size_t processes = 1;
  size_t process = 0;
  std::string hostfile;

  std::string cluster_id;
  uint64_t incarnation = 0;
  std::chrono::milliseconds heartbeat_timeout{5000};
  std::chrono::milliseconds startup_timeout{30000};
  // A worker in one run of one operator for this long is stuck (see runtime/src/worker/
  // watchdog.h). Negative (the default): 60 s when processes > 1 (a stuck worker would hold its
  // cluster for ever: its transport keeps sending heartbeats), off otherwise. Zero: off.
  std::chrono::milliseconds operator_timeout{-1};
  // operator_timeout as it applies to this configuration; zero: off.
  std::chrono::milliseconds effective_operator_timeout() const {
    if (operator_timeout.count() >= 0) return operator_timeout;
    return std::chrono::milliseconds(processes > 1 ? 60000 : 0);
  }
  // Flow control (weir/communication/internal/credit.h): bytes a channel may hold for one
  // destination worker before the operators that send on it stop being scheduled. 0: off.
  uint64_t flow_window_bytes = kDefaultFlowWindowBytes;
  static constexpr uint64_t kDefaultFlowWindowBytes = uint64_t{1} << 20;
  static constexpr uint64_t kMaxFlowWindowBytes = uint64_t{1} << 40;
  std::string tls_cert, tls_key, tls_ca;
  // Allows links without TLS although a hostfile address is not loopback. Off by default: such
  // a hostfile without --tls-cert and --tls-key is refused at start (docs/cluster.md).
  bool insecure_links = false;
  // The cluster secret (bytes), or a file that holds it (read when the transport starts; one
  // trailing newline is not part of it). Empty: no secret, and anyone who knows the cluster id,
  // -n and -w can join (see docs/cluster.md, "Who may join").
  std::string cluster_secret;
  std::string cluster_secret_file;

  // Connects the processes of a cluster; set by weir::cluster::execute (protocol library).
  TransportFactory transport;

  // Parses and removes the worker flags from `args`; the remaining arguments stay in order.
  static absl::StatusOr<Config> from_args(std::vector<std::string>& args);
  // The same for main's argc/argv: argv keeps the program name and the remaining arguments.
  static absl::StatusOr<Config> from_args(int& argc, char** argv);

  // Error unless this configuration can run (several processes need a transport).
  absl::Status validate() const;
};

}  // namespace weir
