#include "weir/control/replica_cluster.h"

#include <atomic>
#include <charconv>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"

#include "weir/control/health.h"
#include "weir/mutex.h"
#include "weir/protocol/cluster.h"
#include "weir/status.h"
#include "weir/weir.h"

namespace weir::control {
namespace {

// The other processes' health transitions, on their way to process 0 (as "CREATED_VERSION ROW",
// ROW a weir.health_history row: the codec of a transition, and what process 0 parses back).
struct HealthMail {
  weir::Mutex mu;
  std::vector<std::string> outgoing ABSL_GUARDED_BY(mu);  // This process's, to send.
  std::vector<std::string> incoming ABSL_GUARDED_BY(mu);  // Received (process 0).
};

absl::StatusOr<std::shared_ptr<persist::PersistClient>> open_client(const ReplicaOptions& o) {
  if (o.blob) return persist::PersistClient::create(o.blob, o.consensus, o.persist);
  WEIR_ASSIGN_OR_RETURN(std::unique_ptr<persist::PersistClient> client,
                        persist::PersistClient::open(o.location, o.persist));
  return std::shared_ptr<persist::PersistClient>(std::move(client));
}

}  // namespace

absl::Status run_replica_cluster(ReplicaOptions options, const Config& config) {
  if (config.processes <= 1) return run_replica(options);
  if (config.workers != 1) {
    return absl::InvalidArgumentError(
        "run_replica_cluster: the cluster of a replica has 1 worker per process (each object's "
        "dataflow has ReplicaOptions::workers)");
  }
  const size_t processes = config.processes;
  const size_t process = config.process;
  // Opened once the cluster has linked: a cluster that cannot start touches no store.
  std::shared_ptr<persist::PersistClient> client;
  // Set by the caller (a signal): stops the replica, and is not a failure.
  const std::shared_ptr<std::atomic<bool>> stop_asked =
      options.stop ? options.stop : std::make_shared<std::atomic<bool>>(false);
  // Stops the replica: asked, or the cluster failed.
  const auto stop = std::make_shared<std::atomic<bool>>(false);
  HealthMail mail;
  std::optional<uint64_t> execution;
  std::optional<absl::Status> replica_ended;  // Once the replica ran and returned.

  const absl::Status cluster = cluster::execute(config, [&](Worker& worker) {
    // 1. One execution per cluster start: process 0 takes it once every process has linked,
    // and sends it to each process (worker p is process p: one worker each).
    std::vector<std::pair<uint64_t, uint64_t>> copies;  // (process, execution)
    absl::StatusOr<std::shared_ptr<persist::PersistClient>> opened = open_client(options);
    if (!opened.ok()) {
      worker.fail(opened.status());
      return;
    }
    client = *std::move(opened);
    if (worker.index() == 0) {
      absl::StatusOr<uint64_t> e = take_execution(*client, processes);
      if (e.ok()) {
        for (uint64_t p = 0; p < processes; ++p) copies.emplace_back(p, *e);
      } else {
        worker.fail(absl::Status(e.status().code(),
                                 absl::StrCat("replica process 0 could not take an execution id: ",
                                              e.status().message())));
        return;
      }
    }
    ProbeHandle<uint64_t> told;
    worker.dataflow_named<uint64_t>("ReplicaExecution", [&](Scope<uint64_t>& scope) {
      to_stream(scope, std::move(copies)) |
          exchange([](const std::pair<uint64_t, uint64_t>& c) { return c.first; }) |
          inspect([&](const std::pair<uint64_t, uint64_t>& c) { execution = c.second; }) |
          probe_with(told);
    });
    while (!told.done() && !worker.failed()) worker.step_or_park(std::nullopt);
    if (worker.failed()) return;
    if (!execution) {
      worker.fail(absl::InternalError(
          absl::StrCat("replica process ", process, " was sent no execution id by process 0")));
      return;
    }

    // 2. Health: every process's transitions go to process 0 (worker 0), which records them.
    ProbeHandle<uint64_t> delivered;
    auto health = worker.dataflow_named<uint64_t>("ReplicaHealth", [&](Scope<uint64_t>& scope) {
      auto [input, stream] = new_input<std::string>(scope);
      stream | exchange([](const std::string&) { return uint64_t{0}; }) |
          inspect([&mail](const std::string& row) {
            weir::MutexLock lock(mail.mu);
            mail.incoming.push_back(row);
          }) |
          probe_with(delivered);
      return std::move(input);
    });
    ReplicaOptions run = options;
    run.stop = stop;
    run.processes = processes;
    run.process = process;
    run.execution = execution;
    if (process > 0) {
      run.forward_health = [&mail](const HealthTransition& t) {
        weir::MutexLock lock(mail.mu);
        mail.outgoing.push_back(absl::StrCat(t.created_version, " ", health_history_row(t)));
      };
    } else {
      run.take_forwarded_health = [&mail] {
        std::vector<std::string> rows;
        {
          weir::MutexLock lock(mail.mu);
          rows.swap(mail.incoming);
        }
        std::vector<HealthTransition> transitions;
        for (const std::string& mailed : rows) {
          // "CREATED_VERSION ROW": the row does not hold the object's created version.
          const size_t space = mailed.find(' ');
          uint64_t created = 0;
          if (space == std::string::npos ||
              std::from_chars(mailed.data(), mailed.data() + space, created).ptr !=
                  mailed.data() + space) {
            continue;
          }
          if (auto t = parse_health_history_row(std::string_view(mailed).substr(space + 1))) {
            t->created_version = created;
            transitions.push_back(*std::move(t));
          }
        }
        return transitions;
      };
    }

    // 3. The replica, on a thread of its own; this worker steps the cluster until it ends.
    std::atomic<bool> done{false};
    std::thread replica([&] {
      replica_ended = run_replica(run);
      done.store(true);
    });
    // However the closure ends (a failed step throws), the replica is stopped first.
    const absl::Cleanup join = [&] {
      stop->store(true);
      replica.join();
    };
    uint64_t round = 0;
    while (!done.load() && !worker.failed()) {
      if (stop_asked->load()) stop->store(true);
      std::vector<std::string> rows;
      {
        weir::MutexLock lock(mail.mu);
        rows.swap(mail.outgoing);
      }
      if (!rows.empty()) {
        for (std::string& row : rows) health.send(std::move(row));
        health.advance_to(++round);
      }
      worker.step_or_park(std::chrono::milliseconds(10));
    }
    if (done.load() && !worker.failed()) {
      // Fail-stop: a process whose replica ended (fenced, stopped, an error) ends the cluster.
      const absl::Status& ended = *replica_ended;
      worker.fail(ended.ok()
                      ? absl::CancelledError(absl::StrCat("replica process ", process, " stopped"))
                      : ended);
    }
  });

  if (replica_ended && !replica_ended->ok()) return *replica_ended;  // Fenced, or its error.
  if (stop_asked->load()) return absl::OkStatus();
  // The cluster failed around a replica that was running (or before it ran): fenced meanwhile?
  if (execution && client) {
    if (absl::Status latest = check_latest_execution(*client, *execution);
        latest.code() == absl::StatusCode::kFailedPrecondition) {
      return latest;
    }
  }
  if (!execution) {
    // Unavailable whatever the cause: FailedPrecondition would read as a fence (exit 3).
    return absl::UnavailableError(absl::StrCat(
        "replica process ", process, " of ", processes,
        " could not start: ", cluster.ok() ? "no execution id" : std::string(cluster.message())));
  }
  return absl::UnavailableError(
      absl::StrCat("replica process ", process, " of ", processes, ": the cluster failed",
                   execution ? absl::StrCat(" (execution ", *execution, ")") : std::string(), ": ",
                   cluster.ok() ? "a peer ended" : std::string(cluster.message())));
}

}  // namespace weir::control
