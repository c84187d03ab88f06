// `weir replica`: a long-running process that follows the catalog and keeps every object it names
// running (weir/control/replica.h; docs/control.md, "Replicas").
//
//   weir replica --persist DIR [-w W] [--http ADDR]
//
// --http serves /status, /metrics, /healthz and /readyz (weir/observe/replica_endpoints.h).
//
// Each start takes a new execution id and fences every earlier one. The first SIGINT or SIGTERM
// stops it cleanly (exit 0; the objects' shards keep what is durable, declared holds stay). A
// replica fenced by a later execution exits 3 with an error naming it; any other error exits 1.
// `-n N -p I -h HOSTS` (what weir-launch passes) are accepted with N = 1: a replica is one process
// in this build.

#include <atomic>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "checks.h"
#include "commands.h"
#include "shard_text.h"
#include "stop_signals.h"

#include "weir/control/replica.h"
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

void run_replica(const ReplicaFlags& flags) {
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
  const absl::Status ended = control::run_replica(options);
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
                  "Processes of the replica (weir-launch passes it): 1 in this build")
      ->check(unsigned_in(1, 1));
  cmd->add_option("-p,--process", flags->process, "This process's index (weir-launch): 0")
      ->check(unsigned_in(0, 0));
  cmd->add_option("-h,--hostfile", flags->hosts, "Hostfile (weir-launch passes it); unused")
      ->check(CLI::ExistingFile);
  cmd->footer(
      "Exit: 0 when stopped (SIGINT, SIGTERM), 3 when a later replica execution fenced it, 1 on "
      "another error.\n"
      "Examples:\n"
      "  weir replica --persist DIR -w 2\n"
      "  weir replica --persist DIR --http 9100\n"
      "  weir-launch --restart --final-exit 3 -n 1 -w 2 -- weir replica --persist DIR");
  cmd->final_callback([flags] { run_replica(*flags); });
}

}  // namespace weir::tools
