// `weir ingest`: the main job. A source's tables flow into one persist shard per table.
//
//   weir ingest --source loadgen:auction --scale S --persist DIR [-w W] [--until OFFSET]
//   weir ingest --source postgres --conn CONNINFO --publication P [--slot S] [--tables a,b]
//               --persist DIR [-w W] [--until-lsn X/Y]
//   weir ingest --source mysql --conn 'host=H port=P user=U database=D' [--tables a,b]
//               --persist DIR [-w W] [--until-gtid N]

#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "commands.h"
#include "stop_signals.h"
#include <unistd.h>

#include "weir/ingest/ingest.h"
#include "weir/ingest/mysql.h"
#include "weir/ingest/postgres.h"
#include "weir/mutex.h"
#include "weir/observe/ingest_endpoints.h"
#include "weir/persist/faults.h"
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
    if (absl::Status s = observer->instrument(options); !s.ok()) fail(s);
    auto port = observer->serve(observe::HttpServerOptions{.address = *address});
    if (!port.ok()) fail(port.status());
    const std::string host = address->substr(0, address->rfind(':'));
    std::cerr << "weir ingest: serving http://" << host << ":" << *port << "/" << std::endl;
  }
  ingest::IngestMonitor& monitor = observer ? observer->monitor() : local_monitor;
  Display display(monitor, !flags.quiet && isatty(STDOUT_FILENO));
  options.log = [&](const std::string& line) {
    if (!flags.quiet) display.print(line);
  };
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
  cmd->add_option("--source", flags->source,
                  "loadgen:counter, loadgen:auction, postgres or mysql (MariaDB)")
      ->capture_default_str();
  cmd->add_option("--scale", flags->scale, "snapshot size multiplier")->capture_default_str();
  cmd->add_option("--persist", flags->dir,
                  "directory: a file blob store and SQLite consensus under it");
  cmd->add_option("--blob", flags->blob_url, "blob store URL (file:///path, mem://)");
  cmd->add_option("--consensus", flags->consensus_url,
                  "consensus URL (sqlite:///path, postgres://...)");
  cmd->add_option("-w,--workers", flags->workers, "worker threads")->capture_default_str();
  cmd->add_option("--until", flags->until, "stop after this upstream offset");
  cmd->add_option("--rate", flags->rate, "upstream changes per second (0: as fast as possible)")
      ->capture_default_str();
  cmd->add_option("--mode", flags->mode, "concurrent (per-export progress) or serial")
      ->capture_default_str();
  cmd->add_option("--tables", flags->tables, "tables to ingest (default: all)")->delimiter(',');
  cmd->add_option("--snapshot-rows", flags->snapshot_rows, "TABLE=N: snapshot size of one table");
  cmd->add_option("--seed", flags->seed, "generator seed")->capture_default_str();
  cmd->add_option("--fault", flags->fault, "TABLE@OFFSET: a bad row (definite error)");
  cmd->add_option("--transient-fault", flags->transient_fault,
                  "fail once at this offset (transient error)");
  cmd->add_option("--add-table", flags->add_table, "a table to add while running");
  cmd->add_option("--add-after", flags->add_after, "seconds before adding --add-table");
  cmd->add_option("--compaction-window", flags->compaction_window,
                  "offsets of history kept readable behind the latest (each shard's since is "
                  "held at upper - 1 - N; 18446744073709551615: all)")
      ->capture_default_str();
  cmd->add_option("--inject-faults", flags->inject_faults,
                  "soak runs: blob and consensus calls fail at this rate (0..1), and half as many "
                  "writes report a failure after going through");
  cmd->add_option("--conn", flags->conn,
                  "postgres: libpq connection string or URL of the upstream database; mysql: "
                  "'host=H port=P user=U password=W database=D'");
  cmd->add_option("--publication", flags->publication, "postgres: the publication to ingest");
  cmd->add_option("--slot", flags->slot,
                  "postgres: the logical replication slot (default: weir_ and a hash of the "
                  "persist location; created if missing)");
  cmd->add_option("--name", flags->name,
                  "postgres, mysql: the shards' name prefix (default: pg, mysql)");
  cmd->add_option("--until-lsn", flags->until_lsn,
                  "postgres: stop once every table is complete up to this LSN (X/Y)");
  cmd->add_option("--until-gtid", flags->until_gtid,
                  "mysql: stop once every table holds every transaction up to this GTID "
                  "sequence number");
  cmd->add_option("--server-id", flags->server_id,
                  "mysql: the binlog dump's server id, unique among the server's replicas "
                  "(default: a hash of the persist location)");
  cmd->add_option("--http", flags->http,
                  "serve /metrics, /status, /graph and a dashboard on this address: PORT (on "
                  "loopback) or HOST:PORT (docs/observability.md)");
  cmd->add_flag("--quiet", flags->quiet, "print only the summary");
  cmd->callback([flags] { run(*flags); });
}

}  // namespace weir::tools
