// `weir ingest`: the main job. A source's tables flow into one persist shard per table.
//
//   weir ingest --source loadgen:auction --scale S --persist DIR [-w W] [--until OFFSET]
//   weir ingest --source postgres --conn CONNINFO --publication P [--slot S] [--tables a,b]
//               --persist DIR [-w W] [--until-lsn X/Y]
//   weir ingest --source mysql --conn 'host=H port=P user=U database=D' [--tables a,b]
//               --persist DIR [-w W] [--until-gtid N]

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "checks.h"
#include "commands.h"
#include "stop_signals.h"
#include <unistd.h>

#include "weir/ingest/ingest.h"
#include "weir/ingest/mysql.h"
#include "weir/ingest/postgres.h"
#include "weir/mutex.h"
#include "weir/observe/ingest_endpoints.h"
#include "weir/observe/log.h"
#include "weir/persist/faults.h"
#include "weir/sources/loadgen/generator.h"
#include "weir/sources/postgres/pgoutput.h"

namespace weir::tools {
namespace {

struct IngestFlags {
  std::string source = "loadgen:auction";
  uint64_t scale = 1;
  std::string dir, blob_url, consensus_url;
  size_t workers = 1;
  std::optional<uint64_t> until;
  double rate = 1000;
  std::string mode = "concurrent";
  std::vector<std::string> tables;
  std::vector<std::string> snapshot_rows;  // TABLE=N
  uint64_t seed = 42;
  std::string fault;  // TABLE@OFFSET
  std::optional<uint64_t> transient_fault;
  std::string add_table;
  double add_after = 0;
  bool quiet = false;
  std::string http;  // --http ADDR: empty, off.
  uint64_t compaction_window = ingest::IngestOptions{}.compaction_window;
  double inject_faults = 0;
  // --source postgres
  std::string conn, publication, slot, name, until_lsn;
  // --source mysql
  std::optional<uint64_t> until_gtid;
  uint32_t server_id = 0;
};

[[noreturn]] void fail(const absl::Status& status) {
  std::cerr << "weir ingest: " << status << "\n";
  throw CLI::RuntimeError(1);
}

// The snapshot of --scale S has 1000 S rows per table at most: far more than a run can ingest,
// far from overflowing.
constexpr uint64_t kMaxScale = 1'000'000;
// --add-after in milliseconds fits an int64_t.
constexpr double kMaxAddAfterSeconds = 1e9;

// The tables the options name, checked before any work as each option's value is (the error names
// the option): those of a load generator are known here, a database's only once it is connected.
void check_tables(const IngestFlags& flags) {
  if (!flags.add_table.empty() &&
      (flags.tables.empty() || std::find(flags.tables.begin(), flags.tables.end(),
                                         flags.add_table) != flags.tables.end())) {
    throw CLI::ValidationError("--add-table", "\"" + flags.add_table +
                                                  "\" is ingested from the start: --tables "
                                                  "lists the tables ingested before it is added");
  }
  if (flags.source.rfind("loadgen:", 0) != 0) return;
  sources::loadgen::GeneratorOptions options;
  options.kind = flags.source.substr(8);
  auto generator = sources::loadgen::Generator::make(options);
  if (!generator.ok()) {
    throw CLI::ValidationError("--source", std::string(generator.status().message()));
  }
  auto check = [&](const char* option, const std::string& table) {
    if (auto index = generator->table_index(table); !index.ok()) {
      throw CLI::ValidationError(option, std::string(index.status().message()));
    }
  };
  for (const std::string& table : flags.tables) check("--tables", table);
  if (!flags.add_table.empty()) check("--add-table", flags.add_table);
  for (const std::string& spec : flags.snapshot_rows) {
    check("--snapshot-rows", spec.substr(0, spec.find('=')));
  }
  if (!flags.fault.empty()) check("--fault", flags.fault.substr(0, flags.fault.find('@')));
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

void run(const IngestFlags& flags) {
  ingest::IngestOptions options;
  if (flags.dir.empty() && (flags.blob_url.empty() || flags.consensus_url.empty())) {
    fail(absl::InvalidArgumentError("give --persist DIR, or --blob URL and --consensus URL"));
  }
  options.location = flags.dir.empty()
                         ? persist::PersistLocation{flags.blob_url, flags.consensus_url}
                         : persist::PersistLocation::in_directory(flags.dir);
  // Soak runs: every blob and consensus call fails at this rate, and half as many writes go
  // through and then report a failure (an unknown outcome).
  std::shared_ptr<persist::FaultyBlob> faulty_blob;
  std::shared_ptr<persist::FaultyConsensus> faulty_consensus;
  if (flags.inject_faults > 0) {
    const persist::FaultConfig faults{
        .fail_rate = flags.inject_faults,
        .indeterminate_rate = flags.inject_faults / 2,
        .seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())};
    auto blob = persist::Blob::open(options.location.blob_url);
    if (!blob.ok()) fail(blob.status());
    auto consensus = persist::Consensus::open(options.location.consensus_url);
    if (!consensus.ok()) fail(consensus.status());
    faulty_blob = std::make_shared<persist::FaultyBlob>(std::shared_ptr(*std::move(blob)), faults);
    faulty_consensus =
        std::make_shared<persist::FaultyConsensus>(std::shared_ptr(*std::move(consensus)), faults);
    options.blob = faulty_blob;
    options.consensus = faulty_consensus;
  }
  options.workers.workers = flags.workers;
  auto mode = sources::parse_progress_mode(flags.mode);
  if (!mode.ok()) fail(mode.status());
  if (flags.source == "postgres") {
    if (flags.conn.empty() || flags.publication.empty()) {
      fail(absl::InvalidArgumentError("--source postgres needs --conn and --publication"));
    }
    ingest::PostgresIngestOptions pg;
    pg.conninfo = flags.conn;
    pg.publication = flags.publication;
    pg.slot = flags.slot.empty()
                  ? ingest::default_slot_name(
                        flags.dir.empty() ? flags.blob_url + " " + flags.consensus_url : flags.dir)
                  : flags.slot;
    pg.kind = flags.name.empty() ? "pg" : flags.name;
    pg.workers = flags.workers;
    pg.mode = *mode;
    if (!flags.until_lsn.empty()) {
      auto lsn = sources::postgres::parse_lsn(flags.until_lsn);
      if (!lsn.ok()) fail(lsn.status());
      pg.until = *lsn;
    }
    options.upstream = ingest::make_postgres_source(std::move(pg));
  } else if (flags.source == "mysql") {
    if (flags.conn.empty()) fail(absl::InvalidArgumentError("--source mysql needs --conn"));
    ingest::MysqlIngestOptions my;
    my.conninfo = flags.conn;
    my.kind = flags.name.empty() ? "mysql" : flags.name;
    my.workers = flags.workers;
    my.mode = *mode;
    my.replica_server_id = flags.server_id;
    my.replica_key = flags.dir.empty() ? flags.blob_url + " " + flags.consensus_url : flags.dir;
    my.until_seq = flags.until_gtid;
    options.upstream = ingest::make_mysql_source(std::move(my));
  } else if (flags.source.rfind("loadgen:", 0) != 0) {
    fail(absl::InvalidArgumentError(
        "unknown source '" + flags.source +
        "': expected loadgen:counter, loadgen:auction, postgres or mysql"));
  }
  auto& g = options.source.generator;
  g.kind = options.upstream ? "" : flags.source.substr(8);
  g.scale = flags.scale;
  g.seed = flags.seed;
  for (const auto& spec : flags.snapshot_rows) {
    std::pair<std::string, std::string> kv = absl::StrSplit(spec, absl::MaxSplits('=', 1));
    uint64_t rows = 0;
    if (!absl::SimpleAtoi(kv.second, &rows))
      fail(absl::InvalidArgumentError("--snapshot-rows expects TABLE=N, got '" + spec + "'"));
    g.snapshot_rows[kv.first] = rows;
  }
  if (!flags.fault.empty()) {
    std::pair<std::string, std::string> kv = absl::StrSplit(flags.fault, absl::MaxSplits('@', 1));
    if (!absl::SimpleAtoi(kv.second, &g.fault_offset)) {
      fail(absl::InvalidArgumentError("--fault expects TABLE@OFFSET, got '" + flags.fault + "'"));
    }
    g.fault_table = kv.first;
  }
  options.source.rate = flags.rate;
  options.source.until = flags.until;
  options.source.transient_fault = flags.transient_fault;
  options.source.mode = *mode;
  options.tables = flags.tables;
  options.compaction_window = flags.compaction_window;
  options.add_table = flags.add_table;
  options.add_after = std::chrono::milliseconds(static_cast<int64_t>(flags.add_after * 1000));

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
        .kind = options.upstream ? options.upstream->kind() : g.kind, .source = flags.source});
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
  std::printf(
      "ingested %s updates in %.2f s (%s updates/s), incarnation %llu, %zu epoch%s, %zu "
      "backoff%s\n",
      human(total).c_str(), report->seconds, human(total / std::max(report->seconds, 1e-9)).c_str(),
      static_cast<unsigned long long>(report->incarnation), report->epochs,
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
  // Every value is checked here (checks.h), so that a mistyped one is an error naming its option
  // before anything is opened or created.
  cmd->add_option("--source", flags->source,
                  "loadgen:counter, loadgen:auction, postgres or mysql (MariaDB)")
      ->capture_default_str()
      ->check(one_of({"loadgen:counter", "loadgen:auction", "postgres", "mysql"}));
  cmd->add_option("--scale", flags->scale, "snapshot size multiplier")
      ->capture_default_str()
      ->check(unsigned_in(0, kMaxScale));
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
  cmd->add_option("--until", flags->until, "stop after this upstream offset")->check(unsigned_in());
  cmd->add_option("--rate", flags->rate, "upstream changes per second (0: as fast as possible)")
      ->capture_default_str()
      ->check(number_in(0, std::numeric_limits<double>::max()));
  cmd->add_option("--mode", flags->mode, "concurrent (per-export progress) or serial")
      ->capture_default_str()
      ->check(one_of({"concurrent", "serial"}));
  cmd->add_option("--tables", flags->tables, "tables to ingest (default: all)")
      ->delimiter(',')
      ->check(non_empty());
  cmd->add_option("--snapshot-rows", flags->snapshot_rows, "TABLE=N: snapshot size of one table")
      ->check(name_and_number('=', "TABLE=N"));
  cmd->add_option("--seed", flags->seed, "generator seed")
      ->capture_default_str()
      ->check(unsigned_in());
  cmd->add_option("--fault", flags->fault, "TABLE@OFFSET: a bad row (definite error)")
      ->check(name_and_number('@', "TABLE@OFFSET"));
  cmd->add_option("--transient-fault", flags->transient_fault,
                  "fail once at this offset (transient error)")
      ->check(unsigned_in());
  CLI::Option* add_table = cmd->add_option("--add-table", flags->add_table,
                                           "a table to add while running (one not in --tables)")
                               ->check(non_empty());
  cmd->add_option("--add-after", flags->add_after, "seconds before adding --add-table")
      ->check(number_in(0, kMaxAddAfterSeconds))
      ->needs(add_table);
  cmd->add_option("--compaction-window", flags->compaction_window,
                  "offsets of history kept readable behind the latest (each shard's since is "
                  "held at upper - 1 - N; 18446744073709551615: all)")
      ->capture_default_str()
      ->check(unsigned_in());
  cmd->add_option("--inject-faults", flags->inject_faults,
                  "soak runs: blob and consensus calls fail at this rate (0..1), and half as many "
                  "writes report a failure after going through")
      ->check(number_in(0, 1));
  cmd->add_option("--conn", flags->conn,
                  "postgres: libpq connection string or URL of the upstream database; mysql: "
                  "'host=H port=P user=U password=W database=D'")
      ->check(non_empty());
  cmd->add_option("--publication", flags->publication, "postgres: the publication to ingest")
      ->check(non_empty());
  cmd->add_option("--slot", flags->slot,
                  "postgres: the logical replication slot (default: weir_ and a hash of the "
                  "persist location; created if missing)")
      ->check(CLI::Validator(
          [](std::string& slot) -> std::string {
            // PostgreSQL's rule for replication slot names.
            const bool ok = !slot.empty() && slot.size() <= 63 &&
                            std::all_of(slot.begin(), slot.end(), [](char c) {
                              return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
                            });
            return ok ? ""
                      : "\"" + slot + "\" is no replication slot name: 1 to 63 of a-z, 0-9 and _";
          },
          ""));
  cmd->add_option("--name", flags->name,
                  "postgres, mysql: the shards' name prefix (default: pg, mysql)")
      ->check(CLI::Validator(
          [](std::string& name) -> std::string {
            const bool ok = !name.empty() && name.front() != '.' && name.back() != '.' &&
                            std::all_of(name.begin(), name.end(), [](char c) {
                              return std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
                                     c == '-' || c == '.';
                            });
            return ok ? ""
                      : "\"" + name +
                            "\" is no shard name prefix: letters, digits, _, - and inner .";
          },
          ""));
  cmd->add_option("--until-lsn", flags->until_lsn,
                  "postgres: stop once every table is complete up to this LSN (X/Y)")
      ->check(CLI::Validator(
          [](std::string& lsn) -> std::string {
            const auto parsed = sources::postgres::parse_lsn(lsn);
            return parsed.ok() ? "" : std::string(parsed.status().message());
          },
          ""));
  cmd->add_option("--until-gtid", flags->until_gtid,
                  "mysql: stop once every table holds every transaction up to this GTID "
                  "sequence number")
      ->check(unsigned_in());
  cmd->add_option("--server-id", flags->server_id,
                  "mysql: the binlog dump's server id, unique among the server's replicas "
                  "(default: a hash of the persist location)")
      ->check(unsigned_in(0, UINT32_MAX));
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
  cmd->callback([flags] {
    check_tables(*flags);
    run(*flags);
  });
}

}  // namespace weir::tools
