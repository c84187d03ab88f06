// `weir replica`: a long-running process that follows the catalog and keeps every object it names
// running (weir/control/replica.h; docs/control.md, "Replicas").
//
//   weir replica --persist DIR [-w W] [--http ADDR] [-n N -p I -h HOSTS]
//
// --http serves /status, /metrics, /healthz and /readyz (weir/observe/replica_endpoints.h).
//
// Each start takes a new execution id and fences every earlier one. The first SIGINT or SIGTERM
// stops it cleanly (exit 0; the objects' shards keep what is durable, declared holds stay). A
// replica fenced by a later execution exits 3 with an error naming it; any other error exits 1.
//
// `-n N -p I -h HOSTS` (what weir-launch passes) make it process I of a replica of N processes
// (control::run_replica_cluster, weir/control/replica_cluster.h): one cluster over gRPC,
// fail-stop, one execution id per start (process 0's), each object run by the process
// control::placement names; `weir-launch --restart -n N -- weir replica ...` supervises it. The
// cluster's environment ($WEIR_CLUSTER_ID, $WEIR_INCARNATION, the cluster secret) is read as
// weir::Config reads it. With N > 1, --http PORT serves process I on PORT + I (one past
// 65535 is a usage error, exit 2).

#include <atomic>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "checks.h"
#include "commands.h"
#include "shard_text.h"
#include "stop_signals.h"

#include "weir/control/replica.h"
#include "weir/control/replica_cluster.h"
#include "weir/observe/log.h"
#include "weir/observe/replica_endpoints.h"

namespace weir::tools {
namespace {

struct ReplicaFlags {
  StoreFlags store;
  size_t workers = 1;
  size_t processes = 1;
  size_t process = 0;
  std::string hosts;
  uint64_t poll_ms = 100;
  std::string http;  // --http ADDR: empty, off.
};

[[noreturn]] void fail(const absl::Status& status) {
  std::cerr << "weir replica: " << status << "\n";
  throw CLI::RuntimeError(1);
}

// The control cluster of the replica's processes: 1 worker each (the objects' dataflows have -w),
// with the cluster's environment ($WEIR_CLUSTER_ID, $WEIR_INCARNATION, the secret).
Config cluster_config(const ReplicaFlags& flags) {
  if (flags.process >= flags.processes) {
    std::cerr << "weir replica: --process: expected an index below --processes " << flags.processes
              << ", got " << flags.process << "\n";
    throw CLI::RuntimeError(2);
  }
  if (flags.processes == 1) return Config{};
  if (flags.hosts.empty()) {
    std::cerr << "weir replica: --hostfile: required with --processes " << flags.processes << "\n";
    throw CLI::RuntimeError(2);
  }
  std::vector<std::string> args = {"weir",
                                   "-n",
                                   std::to_string(flags.processes),
                                   "-p",
                                   std::to_string(flags.process),
                                   "-h",
                                   flags.hosts,
                                   "-w",
                                   "1"};
  absl::StatusOr<Config> config = Config::from_args(args);
  if (!config.ok()) fail(config.status());
  return *std::move(config);
}

// --http PORT or HOST:PORT: process I of a cluster serves on PORT + I (0 stays 0: any port).
// A port past 65535 is refused (InvalidArgument) before anything starts.
absl::StatusOr<std::string> http_address_of(const std::string& address, size_t process) {
  const size_t colon = address.rfind(':');
  const uint64_t port = std::stoull(address.substr(colon + 1));
  if (port == 0 || process == 0) return address;
  if (port + process > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--http ", port, ": process ", process,
                                                   " would serve on port ", port + process,
                                                   " (PORT + I), past 65535; give a lower PORT"));
  }
  return absl::StrCat(address.substr(0, colon), ":", port + process);
}

void run_replica(const ReplicaFlags& flags) {
  const Config cluster = cluster_config(flags);
  control::ReplicaOptions options;
  absl::StatusOr<persist::PersistLocation> location = store_location(flags.store);
  if (!location.ok()) fail(location.status());
  options.location = *std::move(location);
  options.workers = flags.workers;
  options.persist.relay = relay_for(flags.store.pubsub);
  options.poll = std::chrono::milliseconds(flags.poll_ms);
  options.stop = std::make_shared<std::atomic<bool>>(false);
  options.log = [](ingest::LogSeverity severity, const std::string& line) {
    observe::log(severity == ingest::LogSeverity::kError     ? observe::LogLevel::kError
                 : severity == ingest::LogSeverity::kWarning ? observe::LogLevel::kWarn
                                                             : observe::LogLevel::kInfo,
                 line);
  };
  // --http: the replica's endpoints, off unless asked for.
  std::optional<observe::ReplicaObserver> observer;
  if (!flags.http.empty()) {
    absl::StatusOr<std::string> address = observe::parse_http_address(flags.http);
    if (!address.ok()) fail(address.status());
    address = http_address_of(*address, flags.process);
    if (!address.ok()) {
      // A usage error, as a bad --process is (a supervisor restarting it would never help).
      std::cerr << "weir replica: " << address.status().message() << "\n";
      throw CLI::RuntimeError(2);
    }
    absl::StatusOr<std::unique_ptr<persist::PersistClient>> client =
        persist::PersistClient::open(options.location, options.persist);
    if (!client.ok()) fail(client.status());
    observer.emplace(std::shared_ptr<persist::PersistClient>(*std::move(client)));
    observer->instrument(options);
    absl::StatusOr<int> port = observer->serve(observe::HttpServerOptions{.address = *address});
    if (!port.ok()) fail(port.status());
    const std::string host = address->substr(0, address->rfind(':'));
    std::cerr << "weir replica: serving http://" << host << ":" << *port << "/status" << std::endl;
  }
  const StopOnSignals signals(options.stop);
  const absl::Status ended = control::run_replica_cluster(options, cluster);
  if (ended.ok()) return;
  std::cerr << "weir replica: " << ended << "\n";
  throw CLI::RuntimeError(ended.code() == absl::StatusCode::kFailedPrecondition ? 3 : 1);
}

}  // namespace

void add_replica_command(CLI::App& app) {
  auto flags = std::make_shared<ReplicaFlags>();
  CLI::App* cmd = app.add_subcommand(
      "replica", "Follow the catalog and keep every object it names running, with no controller");
  cmd->set_help_flag("--help", "Print this help message and exit");  // -h is the hostfile.
  add_store_flags(*cmd, flags->store, StoreUse::kAny);
  add_pubsub_flag(*cmd, flags->store.pubsub);
  cmd->add_option("-w,--workers", flags->workers, "Worker threads of each object's dataflow")
      ->capture_default_str()
      ->check(worker_count());
  cmd->add_option("--poll-ms", flags->poll_ms,
                  "Milliseconds between two looks at the catalog and the executions")
      ->capture_default_str()
      ->check(unsigned_in(1, 60000));
  cmd->add_option("--http", flags->http,
                  "serve /status, /metrics, /healthz and /readyz on this address: PORT (on "
                  "loopback) or HOST:PORT (docs/control.md)")
      ->check(http_address());
  cmd->add_option("-n,--processes", flags->processes,
                  "Processes of the replica, one cluster (weir-launch passes it); each object runs "
                  "on one of them")
      ->capture_default_str()
      ->check(unsigned_in(1, 1024));
  cmd->add_option("-p,--process", flags->process,
                  "This process's index, below --processes (weir-launch passes it)")
      ->capture_default_str()
      ->check(unsigned_in(0, 1023));
  cmd->add_option("-h,--hostfile", flags->hosts,
                  "The processes' addresses, one host:port a line (weir-launch passes it); "
                  "required with --processes above 1")
      ->check(CLI::ExistingFile);
  cmd->footer(
      "Exit: 0 when stopped (SIGINT, SIGTERM), 3 when a later replica execution fenced it, 1 on "
      "another error.\n"
      "Examples:\n"
      "  weir replica --persist DIR -w 2\n"
      "  weir replica --persist DIR --http 9100\n"
      "  weir-launch --restart --final-exit 3 -n 1 -w 2 -- weir replica --persist DIR\n"
      "  weir-launch --restart --final-exit 3 -n 3 -w 2 -- weir replica --persist DIR   (3 "
      "processes)");
  cmd->final_callback([flags] { run_replica(*flags); });
}

}  // namespace weir::tools
