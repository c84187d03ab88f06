// `weir ingest`: the main job. A source's tables flow into one persist shard per table.
//
//   weir ingest --source loadgen:auction --scale S --persist DIR [-w W] [--until OFFSET]
//   weir ingest --source postgres --conn CONNINFO --publication P [--slot S] [--tables a,b]
//               --persist DIR [-w W] [--until-lsn X/Y]
//   weir ingest --source mysql --conn 'host=H port=P user=U database=D' [--tables a,b]
//               --persist DIR [-w W] [--until-gtid N]

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checks.h"
#include "commands.h"
#include "shard_text.h"
#include "source_flags.h"
#include "stop_signals.h"
#include <unistd.h>

#include "weir/ingest/ingest.h"
#include "weir/ingest/source_spec.h"
#include "weir/mutex.h"
#include "weir/observe/ingest_endpoints.h"
#include "weir/observe/log.h"
#include "weir/persist/faults.h"

namespace weir::tools {
namespace {

// The flags that say how this process runs the source. The others define the source: they go
// to an ingest::SourceSpec as given (source_flags), which turns them into IngestOptions.
struct IngestFlags {
  std::string dir, blob_url, consensus_url;
  size_t workers = 1;
  bool quiet = false;
  std::string http;    // --http ADDR: empty, off.
  std::string pubsub;  // --pubsub HOST:PORT: empty, this process's relay only.
  double inject_faults = 0;
};

[[noreturn]] void fail(const absl::Status& status) {
  std::cerr << "weir ingest: " << status << "\n";
  throw CLI::RuntimeError(1);
}

std::string human(double n) {
  if (n >= 1e9) return absl::StrFormat("%.1fG", n / 1e9);
  if (n >= 1e6) return absl::StrFormat("%.1fM", n / 1e6);
  if (n >= 1e3) return absl::StrFormat("%.1fk", n / 1e3);
  return absl::StrFormat("%.0f", n);
}

// Progress bars while snapshotting, then one live line of uppers and lags (terminals only).
class Display {
 public:
  Display(ingest::IngestMonitor& monitor, bool terminal) : monitor_(monitor), terminal_(terminal) {
    if (terminal_) thread_ = std::thread([this] { run(); });
  }
  ~Display() { stop(); }
  bool active() const { return thread_.joinable(); }
  void stop() {
    if (!thread_.joinable()) return;
    stop_.store(true);
    thread_.join();
    clear();
  }
  // Prints a line above the live display.
  void print(const std::string& line) {
    weir::MutexLock lock(mu_);
    clear_locked();
    std::fprintf(stdout, "%s\n", line.c_str());
    std::fflush(stdout);
  }

 private:
  void run() {
    auto last = std::chrono::steady_clock::now();
    std::map<std::string, uint64_t> last_rows;
    while (!stop_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      const auto now = std::chrono::steady_clock::now();
      const double dt = std::chrono::duration<double>(now - last).count();
      last = now;
      std::vector<std::string> lines;
      bool any_snapshot = false;
      for (const auto& e : monitor_.exports()) {
        if (!e.snapshotting || e.snapshot_total == 0 || e.snapshot_done >= e.snapshot_total)
          continue;
        any_snapshot = true;
        const double fraction =
            static_cast<double>(e.snapshot_done) / static_cast<double>(e.snapshot_total);
        const double rate = (e.snapshot_done - last_rows[e.table]) / std::max(dt, 1e-3);
        last_rows[e.table] = e.snapshot_done;
        const int width = 30, filled = static_cast<int>(fraction * width);
        const double eta = rate > 0 ? (e.snapshot_total - e.snapshot_done) / rate : 0;
        lines.push_back(absl::StrFormat(
            "%-10s [%s%s] %3.0f%% %s/%s rows %s rows/s ETA %.0fs", e.table,
            std::string(filled, '#'), std::string(width - filled, '.'), fraction * 100,
            human(e.snapshot_done), human(e.snapshot_total), human(rate), eta));
      }
      if (!any_snapshot) {
        std::string line = absl::StrCat("upstream ", monitor_.upstream_offset());
        for (const auto& e : monitor_.exports()) {
          absl::StrAppend(&line, " | ", e.table, " ", e.persisted_upper,
                          absl::StrFormat(" (lag %.2fs)", monitor_.lag(e.persisted_upper).count()));
        }
        lines.push_back(line);
      }
      weir::MutexLock lock(mu_);
      clear_locked();
      for (const auto& l : lines) std::fprintf(stdout, "%s\n", l.c_str());
      shown_ = lines.size();
      std::fflush(stdout);
    }
  }
  void clear() {
    weir::MutexLock lock(mu_);
    clear_locked();
  }
  void clear_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (size_t i = 0; i < shown_; ++i) std::fprintf(stdout, "\033[1A\033[2K");
    shown_ = 0;
  }

  ingest::IngestMonitor& monitor_;
  bool terminal_;
  std::atomic<bool> stop_{false};
  weir::Mutex mu_;
  size_t shown_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

void run(const ingest::SourceSpec& spec, const IngestFlags& flags) {
  if (flags.dir.empty() && (flags.blob_url.empty() || flags.consensus_url.empty())) {
    fail(absl::InvalidArgumentError("give --persist DIR, or --blob URL and --consensus URL"));
  }
  const ingest::RunSettings settings{
      .location = flags.dir.empty() ? persist::PersistLocation{flags.blob_url, flags.consensus_url}
                                    : persist::PersistLocation::in_directory(flags.dir),
      .location_key = flags.dir.empty() ? flags.blob_url + " " + flags.consensus_url : flags.dir,
      .workers = flags.workers};
  // Soak runs: every blob and consensus call fails at this rate, and half as many writes go
  // through and then report a failure (an unknown outcome).
  std::shared_ptr<persist::FaultyBlob> faulty_blob;
  std::shared_ptr<persist::FaultyConsensus> faulty_consensus;
  if (flags.inject_faults > 0) {
    const persist::FaultConfig faults{
        .fail_rate = flags.inject_faults,
        .indeterminate_rate = flags.inject_faults / 2,
        .seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())};
    auto blob = persist::Blob::open(settings.location.blob_url);
    if (!blob.ok()) fail(blob.status());
    auto consensus = persist::Consensus::open(settings.location.consensus_url);
    if (!consensus.ok()) fail(consensus.status());
    faulty_blob = std::make_shared<persist::FaultyBlob>(std::shared_ptr(*std::move(blob)), faults);
    faulty_consensus =
        std::make_shared<persist::FaultyConsensus>(std::shared_ptr(*std::move(consensus)), faults);
  }
  absl::StatusOr<ingest::IngestOptions> made = ingest::to_ingest_options(spec, settings);
  if (!made.ok()) fail(made.status());
  ingest::IngestOptions options = *std::move(made);
  options.persist.relay = relay_for(flags.pubsub);
  options.blob = faulty_blob;
  options.consensus = faulty_consensus;

  // The first SIGINT or SIGTERM ends the epoch (what is durable stays, nothing is half-written).
  options.stop = std::make_shared<std::atomic<bool>>(false);
  std::optional<StopOnSignals> signals(std::in_place, options.stop);

  // --http: the observability endpoints (docs/observability.md), off unless asked for.
  std::optional<observe::IngestObserver> observer;
  ingest::IngestMonitor local_monitor;
  if (!flags.http.empty()) {
    auto address = observe::parse_http_address(flags.http);
    if (!address.ok()) fail(address.status());
    observer.emplace(observe::IngestObserverConfig{
        .kind = options.upstream ? options.upstream->kind() : options.source.generator.kind,
        .source = spec.source});
    // Listening first: an address that cannot be served is an error before the persist
    // location is opened (which creates it).
    auto port = observer->serve(observe::HttpServerOptions{.address = *address});
    if (!port.ok()) fail(port.status());
    if (absl::Status s = observer->instrument(options); !s.ok()) fail(s);
    const std::string host = address->substr(0, address->rfind(':'));
    std::cerr << "weir ingest: serving http://" << host << ":" << *port << "/" << std::endl;
  }
  ingest::IngestMonitor& monitor = observer ? observer->monitor() : local_monitor;
  Display display(monitor, !flags.quiet && isatty(STDOUT_FILENO));
  // The driver's events go to the log (weir/observe/log.h): above the live display on a
  // terminal, to stderr otherwise; each with the worker it happened on. --quiet keeps warnings
  // and errors only.
  if (display.active()) {
    observe::set_log_output([&display](const std::string& line) { display.print(line); });
  }
  absl::Cleanup log_to_stderr = [] { observe::set_log_output(nullptr); };
  options.log_event = [quiet = flags.quiet](ingest::LogSeverity severity, const std::string& line) {
    const observe::LogLevel level =
        severity == ingest::LogSeverity::kError     ? observe::LogLevel::kError
        : severity == ingest::LogSeverity::kWarning ? observe::LogLevel::kWarn
                                                    : observe::LogLevel::kInfo;
    if (quiet && level == observe::LogLevel::kInfo) return;
    observe::log(level, line);
  };
  {
    std::function<void(Worker&)> earlier = std::move(options.on_worker);
    options.on_worker = [earlier = std::move(earlier)](Worker& worker) {
      observe::set_log_worker(worker.index());
      if (earlier) earlier(worker);
    };
  }
  auto report = ingest::run_ingest(options, &monitor);
  signals.reset();
  display.stop();
  if (!report.ok()) fail(report.status());
  uint64_t total = 0;
  for (const auto& e : report->exports) total += e.updates;
  const std::string complete =
      report->complete_seconds
          ? absl::StrFormat("; complete and durable after %.2f s", *report->complete_seconds)
          : "";
  std::printf(
      "ingested %s updates in %.2f s (%s updates/s%s), incarnation %llu, %zu epoch%s, %zu "
      "backoff%s\n",
      human(total).c_str(), report->seconds, human(total / std::max(report->seconds, 1e-9)).c_str(),
      complete.c_str(), static_cast<unsigned long long>(report->incarnation), report->epochs,
      report->epochs == 1 ? "" : "s", report->backoffs, report->backoffs == 1 ? "" : "s");
  if (faulty_blob) {
    std::printf(
        "injected faults: blob %llu failed, %llu indeterminate of %llu calls; consensus "
        "%llu failed, %llu indeterminate of %llu calls\n",
        static_cast<unsigned long long>(faulty_blob->counts().failed.load()),
        static_cast<unsigned long long>(faulty_blob->counts().indeterminate.load()),
        static_cast<unsigned long long>(faulty_blob->counts().calls.load()),
        static_cast<unsigned long long>(faulty_consensus->counts().failed.load()),
        static_cast<unsigned long long>(faulty_consensus->counts().indeterminate.load()),
        static_cast<unsigned long long>(faulty_consensus->counts().calls.load()));
  }
  for (const auto& e : report->exports) {
    std::string health(sources::to_string(e.health));
    if (!e.error.empty()) absl::StrAppend(&health, ": ", e.error);
    if (e.snapshot_seconds) {
      absl::StrAppend(&health,
                      absl::StrFormat(" (snapshot durable after %.2f s)", *e.snapshot_seconds));
    }
    std::printf("  %-20s upper %-10llu since %-10llu updates %-10llu batches %-6llu %s\n",
                e.shard.c_str(), static_cast<unsigned long long>(e.upper),
                static_cast<unsigned long long>(e.since),
                static_cast<unsigned long long>(e.updates),
                static_cast<unsigned long long>(e.batches), health.c_str());
  }
}

}  // namespace

void add_ingest_command(CLI::App& app) {
  auto flags = std::make_shared<IngestFlags>();
  CLI::App* cmd =
      app.add_subcommand("ingest", "ingest a source's tables into persist shards, exactly once");
  // Every value is checked here (checks.h; the source flags, shared with `weir ctl create source`,
  // by the rules of source definitions: source_flags.h), so that a mistyped one is an error naming
  // its option before anything is opened or created.
  CLI::Option* dir = cmd->add_option("--persist", flags->dir,
                                     "directory: a file blob store and SQLite consensus under it")
                         ->type_name("DIR")
                         ->check(persist_dir());
  CLI::Option* blob =
      cmd->add_option("--blob", flags->blob_url, "blob store URL (file:///path, mem://)")
          ->type_name("URL")
          ->check(blob_url(/*existing=*/false));
  CLI::Option* consensus = cmd->add_option("--consensus", flags->consensus_url,
                                           "consensus URL (sqlite:///path, postgres://...)")
                               ->type_name("URL")
                               ->check(consensus_url(/*existing=*/false));
  dir->excludes(blob)->excludes(consensus);
  blob->needs(consensus);
  consensus->needs(blob);
  cmd->add_option("-w,--workers", flags->workers, "worker threads")
      ->capture_default_str()
      ->check(worker_count());
  add_source_flags(*cmd);
  cmd->add_option("--inject-faults", flags->inject_faults,
                  "soak runs: blob and consensus calls fail at this rate (0..1), and half as many "
                  "writes report a failure after going through")
      ->check(number_in(0, 1));
  add_pubsub_flag(*cmd, flags->pubsub);
  cmd->add_option("--http", flags->http,
                  "serve /metrics, /status, /graph and a dashboard on this address: PORT (on "
                  "loopback) or HOST:PORT (docs/observability.md)")
      ->check(http_address());
  cmd->add_flag("--quiet", flags->quiet, "print only the summary");
  cmd->footer(
      "Examples:\n"
      "  weir ingest --source loadgen:auction --scale 10 --persist DIR -w 4\n"
      "  weir ingest --source postgres --conn postgres://u@h/db --publication p --persist DIR\n"
      "  weir ingest --source mysql --conn 'host=h port=3306 user=u database=d' --persist DIR");
  cmd->callback([cmd, flags] {
    // What `weir ingest` checks of the source flags together before any work (the tables a
    // load generator's flags name, --add-table not in --tables): an error naming the flag, as
    // for one flag's value.
    absl::StatusOr<ingest::SourceSpec> spec = ingest::parse_source_spec(source_flags(*cmd));
    if (!spec.ok()) throw CLI::ValidationError(std::string(spec.status().message()));
    run(*spec, *flags);
  });
}

}  // namespace weir::tools
