#include "weir/control/replica.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "health_history.h"

#include "weir/control/placement.h"
#include "weir/control/validate.h"
#include "weir/ingest/sequence.h"
#include "weir/ingest/status_shard.h"
#include "weir/mutex.h"
#include "weir/persist/background_maintenance.h"
#include "weir/status.h"

namespace weir::control {
namespace {

using Clock = std::chrono::steady_clock;
using ingest::LogSeverity;

// A run that lasted this long was not a failing restart loop: the backoff starts again.
constexpr auto kStableRun = std::chrono::seconds(60);

// Text on one line, for a health row.
std::string one_line(std::string_view text) {
  std::string out(text);
  std::replace_if(
      out.begin(), out.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  return out;
}

// The name an object's health rows carry: its own when valid; one written around `weir ctl` that
// no create allows (spaces, a newline: the words of another object's row) with each byte outside
// [a-z0-9_.-] as %XX, which no valid name has, so it never reads as another object's row.
std::string health_name(std::string_view name) {
  if (name == kCatalogShard || validate_name(name).ok()) return std::string(name);
  std::string out;
  for (const char c : name) {
    const bool plain =
        (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (plain) {
      out.push_back(c);
    } else {
      absl::StrAppend(&out, "%", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    }
  }
  return out;
}

// How often a wait looks at a stop flag.
constexpr auto kStopSlice = std::chrono::milliseconds(10);

// Sleeps `duration`, waking early once `stop` is set; false if it was.
bool sleep_unless(const std::atomic<bool>& stop, Clock::duration duration) {
  const auto until = Clock::now() + duration;
  while (Clock::now() < until) {
    if (stop.load()) return false;
    std::this_thread::sleep_for(std::min<Clock::duration>(until - Clock::now(), kStopSlice));
  }
  return !stop.load();
}

class Replica {
 public:
  Replica(const ReplicaOptions& options, std::shared_ptr<persist::PersistClient> client,
          uint64_t execution, std::shared_ptr<ingest::StatusShard> health,
          internal::HealthHistory* history)
      : options_(options),
        runners_(options.runners ? options.runners : default_runners()),
        client_(std::move(client)),
        execution_(execution),
        health_(std::move(health)),
        history_(history),
        stop_(options.stop ? options.stop : std::make_shared<std::atomic<bool>>(false)) {}

  absl::Status run();

 private:
  // An object with a runner thread.
  struct Slot {
    CatalogObject object;
    std::shared_ptr<std::atomic<bool>> stop = std::make_shared<std::atomic<bool>>(false);
    std::shared_ptr<std::atomic<bool>> dropped = std::make_shared<std::atomic<bool>>(false);
    size_t restarts = 0;  // Only its thread touches it.
    std::thread thread;
  };

  void log(LogSeverity severity, const std::string& message) const {
    if (options_.log) options_.log(severity, message);
  }
  // OK while this is the latest execution; once it is not, the fence (kept).
  absl::Status check_current();
  bool fenced() {
    weir::MutexLock lock(mu_);
    return !fenced_.ok();
  }
  // Records a transition of `object`'s health: forwarded to process 0 (forward_health), or
  // recorded here.
  void report(const CatalogObject& object, std::string_view state, size_t restarts,
              const absl::Status& error = absl::OkStatus());
  // Sets the transition's row of weir.health to "NAME STATE execution=E ..." and records it in
  // weir.health_history. A refusal because a later execution claimed either fences this
  // replica. `own`: a transition of this process (on_health hears it).
  void record(HealthTransition transition, bool own);
  // Whether this process runs `object` (placement).
  bool placed_here(const CatalogObject& object) const {
    return placement(object.object_id, options_.processes) == options_.process;
  }
  void report_catalog(const absl::Status& error);
  void reconcile(const CatalogSnapshot& catalog);
  // Expires the declared holds no live hold object owns: dropped while no replica ran, or by a
  // replica that died before it let go.
  void release_orphaned_holds(const CatalogSnapshot& catalog);
  void start(const CatalogObject& object);
  // Stops and joins the slot's runner; `dropped`: the object left the catalog.
  void stop_slot(Slot& slot, bool dropped);
  void run_object(Slot& slot);
  void publish(uint64_t version);
  // Watches `shard` (described: its id) through the client's relay, once.
  void watch(std::unique_ptr<persist::UpperWatch>& watch, const persist::ShardDescription& shard);
  // Until news of the catalog or the executions, the poll interval, or stop.
  void wait_for_news(uint64_t seen);
  uint64_t news() const;
  // A refusal of a write to weir.health or weir.health_history: fenced, unless it is another error.
  void note_write(const absl::Status& written, const std::string& what);

  const ReplicaOptions& options_;
  const RunnerFactory runners_;
  const std::shared_ptr<persist::PersistClient> client_;
  const uint64_t execution_;
  const std::shared_ptr<ingest::StatusShard> health_;
  internal::HealthHistory* const history_;  // Null where health is forwarded.
  const std::shared_ptr<std::atomic<bool>> stop_;
  std::map<std::string, std::unique_ptr<Slot>> slots_;  // By object name; the main thread's.
  std::optional<std::string> catalog_error_;            // The last one reported, if any.
  std::map<std::string, std::string> invalid_;  // Objects not run: name -> the row reported.
  weir::Mutex mu_;
  absl::Status fenced_ ABSL_GUARDED_BY(mu_);
  // The object whose row weir.health holds, by name: (created version, object id).
  weir::Mutex rows_mu_;
  std::map<std::string, std::pair<uint64_t, std::string>> newest_object_ ABSL_GUARDED_BY(rows_mu_);
  // News of the catalog's and the executions' uppers (persist/relay.h) wakes the follower. The
  // watches call into news_mu_ and news_: declared after them, destroyed before.
  weir::Mutex news_mu_;
  weir::CondVar news_;
  std::unique_ptr<persist::UpperWatch> catalog_watch_;
  std::unique_ptr<persist::UpperWatch> executions_watch_;
};

void Replica::watch(std::unique_ptr<persist::UpperWatch>& watch,
                    const persist::ShardDescription& shard) {
  if (watch != nullptr) return;
  watch = std::make_unique<persist::UpperWatch>(client_->relay(), shard.id, [this] {
    { weir::MutexLock lock(news_mu_); }  // A waiter between its check and its wait hears it.
    news_.notify_all();
  });
}

uint64_t Replica::news() const {
  return (catalog_watch_ ? catalog_watch_->news() : 0) +
         (executions_watch_ ? executions_watch_->news() : 0);
}

void Replica::wait_for_news(uint64_t seen) {
  const persist::UpperWatch* any = catalog_watch_ ? catalog_watch_.get() : executions_watch_.get();
  const auto interval = any != nullptr ? any->poll_interval(options_.poll, options_.relay_poll)
                                       : std::chrono::milliseconds(options_.poll);
  const auto until = Clock::now() + interval;
  weir::MutexLock lock(news_mu_);
  // In slices, to see `stop` (set by a signal handler, which cannot notify).
  while (news() == seen && !stop_->load() && Clock::now() < until) {
    news_.wait_until(news_mu_, std::min<Clock::time_point>(until, Clock::now() + kStopSlice));
  }
}

absl::Status Replica::check_current() {
  {
    weir::MutexLock lock(mu_);
    if (!fenced_.ok()) return fenced_;
  }
  WEIR_ASSIGN_OR_RETURN(const persist::ShardDescription executions,
                        client_->describe(kExecutionsShard));
  watch(executions_watch_, executions);
  if (executions.upper == persist::Frontier(execution_ + 1)) return absl::OkStatus();
  absl::Status latest = check_latest_execution(*client_, execution_);
  if (latest.code() != absl::StatusCode::kFailedPrecondition) return latest;
  weir::MutexLock lock(mu_);
  if (fenced_.ok()) fenced_ = latest;
  return fenced_;
}

void Replica::report(const CatalogObject& object, std::string_view state, size_t restarts,
                     const absl::Status& error) {
  HealthTransition transition;
  transition.name = health_name(object.name);
  transition.state = state;
  transition.execution = execution_;
  transition.object_id = object.object_id;
  transition.restarts = restarts;
  transition.created_version = object.created_version;
  if (!error.ok()) {
    transition.error = absl::StrCat(absl::StatusCodeToString(error.code()), ": ",
                                    one_line(std::string(error.message())));
  }
  if (options_.processes > 1) transition.process = options_.process;
  if (options_.forward_health) {
    // Process 0 writes it, fenced by the execution; this process writes no health shard.
    options_.forward_health(transition);
    if (options_.on_health) options_.on_health(transition);
    return;
  }
  record(std::move(transition), /*own=*/true);
}

void Replica::record(HealthTransition transition, bool own) {
  std::string row =
      absl::StrCat(transition.name, " ", transition.state, " execution=", execution_,
                   " object=", transition.object_id, " restarts=", transition.restarts);
  if (transition.process) absl::StrAppend(&row, " process=", *transition.process);
  if (!transition.error.empty()) absl::StrAppend(&row, " error=", transition.error);
  absl::Status written;
  {
    // Transitions of one name from two processes (a drop on one, a create that moved the name
    // to another) arrive in any order: the row stays the newer object's. Held across the write,
    // so that the check and the write of two transitions do not interleave.
    weir::MutexLock lock(rows_mu_);
    auto [newest, first] = newest_object_.try_emplace(transition.name, transition.created_version,
                                                      transition.object_id);
    const bool stale = !first && newest->second.second != transition.object_id &&
                       newest->second.first > transition.created_version;
    if (!stale) {
      newest->second = {transition.created_version, transition.object_id};
      written = health_->update({{transition.name, row}});
      if (persist::is_writer_expired(written)) {
        // Its lease ran out (a long quiet spell and someone else's GC): not a fence. Reopen,
        // retry.
        written = health_->reopen_if_expired();
        if (written.ok()) written = health_->update({{transition.name, std::move(row)}});
      }
    }
  }
  const std::string what =
      absl::StrCat(transition.name, ": could not record its health (", transition.state, ")");
  note_write(written, what);
  // A fenced replica records nothing more (the history's own fence would refuse it too).
  if (fenced()) return;
  note_write(history_->record(transition), what + " in " + kHealthHistoryShard);
  if (written.ok() && own && options_.on_health) options_.on_health(transition);
}

void Replica::note_write(const absl::Status& written, const std::string& what) {
  if (written.code() == absl::StatusCode::kFailedPrecondition) {
    // Name the successor where weir.executions says who it is (as a poll would have).
    absl::Status fence = check_latest_execution(*client_, execution_);
    if (fence.code() != absl::StatusCode::kFailedPrecondition) {
      fence = absl::FailedPreconditionError(
          absl::StrCat("replica execution ", execution_, " is fenced: ", written.message()));
    }
    weir::MutexLock lock(mu_);
    if (fenced_.ok()) fenced_ = std::move(fence);
  } else if (!written.ok()) {
    log(LogSeverity::kWarning, absl::StrCat(what, ": ", written.ToString()));
  }
}

void Replica::report_catalog(const absl::Status& error) {
  const std::string text = error.ok() ? std::string() : error.ToString();
  if (catalog_error_.value_or("-") == text) return;  // Reported already.
  catalog_error_ = text;
  CatalogObject catalog;
  catalog.name = kCatalogShard;
  if (!error.ok()) {
    log(LogSeverity::kError,
        absl::StrCat("the catalog does not read (the objects keep running as they were): ",
                     error.ToString()));
  }
  // Every process reads the same catalog: process 0 reports its row.
  if (options_.process == 0) report(catalog, error.ok() ? "running" : "stalled", 0, error);
}

void Replica::start(const CatalogObject& object) {
  auto slot = std::make_unique<Slot>();
  slot->object = object;
  Slot& started = *slot;
  slots_[object.name] = std::move(slot);
  log(LogSeverity::kInfo, absl::StrCat(object.name, ": starting (object ", object.object_id,
                                       ", created by version ", object.created_version, ")"));
  started.thread = std::thread([this, &started] { run_object(started); });
}

void Replica::stop_slot(Slot& slot, bool dropped) {
  if (dropped) slot.dropped->store(true);
  slot.stop->store(true);
  if (slot.thread.joinable()) slot.thread.join();
}

void Replica::reconcile(const CatalogSnapshot& catalog) {
  for (auto it = slots_.begin(); it != slots_.end();) {
    const CatalogObject* wanted = catalog.find(it->first);
    // Placed on another process (never while N stays: a replace keeps the id).
    if (wanted != nullptr && !placed_here(*wanted)) wanted = nullptr;
    // A replace keeps the object id: the row's bytes tell a changed object.
    if (wanted != nullptr && wanted->encoded == it->second->object.encoded) {
      ++it;
      continue;
    }
    // A hold advanced (the same shard and reader) is kept while its runner restarts to move it.
    const auto* was = std::get_if<HoldSpec>(&it->second->object.spec);
    const auto* hold = wanted == nullptr ? nullptr : std::get_if<HoldSpec>(&wanted->spec);
    const bool kept = was != nullptr && hold != nullptr && was->shard == hold->shard &&
                      was->reader == hold->reader;
    log(LogSeverity::kInfo, absl::StrCat(it->first, ": ", kept ? "changed" : "dropped",
                                         " by the catalog (version ", catalog.version, ")"));
    stop_slot(*it->second, /*dropped=*/!kept);
    if (wanted == nullptr) report(it->second->object, "dropped", it->second->restarts);
    it = slots_.erase(it);
  }
  for (const auto& [name, object] : catalog.objects) {
    if (slots_.contains(name) || !placed_here(object)) continue;
    // Rows written around `weir ctl` are checked here: an object that would write another's
    // shards (or weir's own) is not run.
    if (const absl::Status valid = validate_live(object, catalog); !valid.ok()) {
      if (invalid_[name] != object.encoded) {
        invalid_[name] = object.encoded;
        log(LogSeverity::kError, absl::StrCat(name, ": not run: ", valid.ToString()));
        report(
            object, "stalled", 0,
            absl::Status(valid.code(), absl::StrCat("invalid catalog object: ", valid.message())));
      }
      continue;
    }
    invalid_.erase(name);
    start(object);
  }
  // One sweeper per cluster: process 0.
  if (options_.process == 0) release_orphaned_holds(catalog);
  publish(catalog.version);
}

void Replica::release_orphaned_holds(const CatalogSnapshot& catalog) {
  std::set<std::string> live;  // The critical reader ids of the live holds.
  for (const auto& [name, object] : catalog.objects) {
    if (std::holds_alternative<HoldSpec>(object.spec))
      live.insert("c" + object.object_id.substr(1));
  }
  absl::StatusOr<std::vector<persist::ShardName>> shards = client_->list_shards();
  if (!shards.ok()) return;  // Tried again at the next change of the catalog.
  for (const persist::ShardName& shard : *shards) {
    if (shard.name.starts_with("weir.")) continue;
    absl::StatusOr<persist::ShardDescription> described = client_->describe(shard.name);
    if (!described.ok()) continue;
    for (const auto& reader : described->critical_readers) {
      if (!reader.purpose.starts_with(kHoldPurpose) || live.contains(reader.reader_id)) continue;
      // A superseded replica's catalog may be older than a hold its successor runs.
      if (!check_current().ok()) return;
      // In a cluster, another process may run a hold of a later version than this one's
      // catalog: only a sweep at the catalog's latest version lets go (else the next does).
      if (options_.processes > 1) {
        absl::StatusOr<persist::ShardDescription> head = client_->describe(kCatalogShard);
        if (!head.ok() || head->upper != persist::Frontier(catalog.version)) return;
      }
      absl::StatusOr<persist::CriticalReaderId> id =
          persist::CriticalReaderId::parse(reader.reader_id);
      if (!id.ok()) continue;
      absl::StatusOr<persist::SinceHandle> hold =
          client_->open_critical_since(shard.name, *id, reader.purpose);
      if (!hold.ok()) continue;
      const auto expired = hold->expire(hold->epoch());
      log(expired.ok() ? LogSeverity::kInfo : LogSeverity::kWarning,
          absl::StrCat("released the orphaned hold ", reader.reader_id, " (", reader.purpose,
                       ") on ", shard.name,
                       expired.ok() ? "" : absl::StrCat(": ", expired.status().ToString())));
    }
  }
}

void Replica::publish(uint64_t version) {
  if (!options_.on_reconciled) return;
  ReplicaState state;
  state.execution = execution_;
  state.catalog_version = version;
  for (const auto& [name, slot] : slots_) {
    static constexpr const char* kKinds[] = {"source", "view", "hold"};
    state.objects.push_back({name, slot->object.object_id, kKinds[slot->object.spec.index()]});
  }
  options_.on_reconciled(state);
}

void Replica::run_object(Slot& slot) {
  std::mt19937_64 jitter{std::random_device{}()};
  uint32_t failures = 0;  // In a row.
  RunContext ctx;
  ctx.execution = execution_;
  ctx.object_name = slot.object.name;
  ctx.stop = slot.stop;
  ctx.dropped = slot.dropped;
  ctx.check_current = [this] { return check_current(); };
  ctx.location = options_.location;
  ctx.persist = options_.persist;
  ctx.blob = options_.blob;
  ctx.consensus = options_.consensus;
  ctx.workers = options_.workers;
  ctx.log = [this, name = slot.object.name](LogSeverity severity, const std::string& message) {
    log(severity, absl::StrCat(name, ": ", message));
  };
  while (!slot.stop->load()) {
    if (const absl::Status current = check_current(); !current.ok()) {
      if (fenced()) return;
      if (!sleep_unless(*slot.stop, options_.poll)) return;
      continue;
    }
    report(slot.object, "starting", slot.restarts);
    // What the runner told last: reported on a change only.
    enum Told { kStarting, kRunning, kStalled };
    auto told = std::make_shared<std::atomic<Told>>(kStarting);
    ctx.running = [this, &slot, told] {
      if (told->exchange(kRunning) != kRunning) report(slot.object, "running", slot.restarts);
    };
    ctx.stalled = [this, &slot, told](const absl::Status& why) {
      if (told->exchange(kStalled) != kStalled) report(slot.object, "stalled", slot.restarts, why);
    };
    const auto began = Clock::now();
    absl::StatusOr<Runner> runner = runners_(slot.object);
    const absl::Status ended = runner.ok() ? (*runner)(ctx) : runner.status();
    if (slot.stop->load() || fenced()) return;
    if (ended.ok()) {
      report(slot.object, "completed", slot.restarts);
      log(LogSeverity::kInfo, absl::StrCat(slot.object.name, ": completed"));
      return;
    }
    ++slot.restarts;
    failures = Clock::now() - began >= kStableRun ? 1 : failures + 1;
    report(slot.object, "stalled", slot.restarts, ended);
    const double initial = static_cast<double>(options_.backoff_initial.count());
    const double cap = static_cast<double>(options_.backoff_max.count());
    const double ceiling =
        std::min(cap, initial * std::pow(2.0, std::min<double>(failures - 1, 62)));
    const auto delay = std::chrono::milliseconds(
        static_cast<int64_t>(std::uniform_real_distribution<double>(ceiling / 2, ceiling)(jitter)));
    log(LogSeverity::kWarning,
        absl::StrCat(slot.object.name, ": stalled (", ended.ToString(), "); restart ",
                     slot.restarts, " in ", delay.count(), " ms"));
    if (!sleep_unless(*slot.stop, delay)) return;
  }
}

absl::Status Replica::run() {
  std::optional<uint64_t> reconciled;  // The catalog version the runners follow.
  // The catalog shard, empty, if no controller made it yet: it has an id to watch from the start
  // (an empty catalog and none are the same to every reader). Written only if missing.
  if (const absl::Status made = client_->fence(kCatalogShard, persist::Fence{}); !made.ok()) {
    log(LogSeverity::kWarning, absl::StrCat("could not create the catalog shard ", kCatalogShard,
                                            " (polling it instead): ", made.ToString()));
  }
  while (!stop_->load()) {
    const uint64_t seen = news();
    if (const absl::Status current = check_current(); !current.ok() && !fenced()) {
      log(LogSeverity::kWarning,
          absl::StrCat("could not check the executions: ", current.ToString()));
    }
    if (fenced()) break;
    if (history_ != nullptr) {
      note_write(history_->sweep(), "could not retract the health history past its retention");
    }
    if (options_.take_forwarded_health) {
      // The other processes' transitions, recorded by this one (process 0).
      for (HealthTransition& t : options_.take_forwarded_health()) {
        if (fenced()) break;
        record(std::move(t), /*own=*/false);
      }
    }
    // The catalog's upper first: a read of the head writes nothing; the catalog itself only when
    // it moved (or the last read failed).
    absl::StatusOr<persist::ShardDescription> head = client_->describe(kCatalogShard);
    std::optional<uint64_t> upper;
    if (head.ok() && head->upper.is_empty()) {
      // Closed (hostile: commit never closes it). Not an empty catalog: nothing is dropped.
      report_catalog(absl::FailedPreconditionError("the catalog shard is closed"));
    } else if (head.ok()) {
      upper = head->upper.time();
      watch(catalog_watch_, *head);
      catalog_watch_->set_known(head->upper);
    } else if (head.status().code() == absl::StatusCode::kNotFound) {
      upper = 0;  // No catalog yet: nothing to run.
    } else {
      log(LogSeverity::kWarning,
          absl::StrCat("could not read the catalog's upper: ", head.status().ToString()));
    }
    if (upper && (!reconciled || *reconciled != *upper || catalog_error_.value_or("") != "")) {
      absl::StatusOr<CatalogSnapshot> catalog =
          *upper == 0 ? absl::StatusOr<CatalogSnapshot>(CatalogSnapshot{}) : read(*client_, *upper);
      if (catalog.ok()) {
        if (catalog_error_.has_value() && !catalog_error_->empty())
          report_catalog(absl::OkStatus());
        reconcile(*catalog);
        reconciled = catalog->version;
      } else if (catalog.status().code() == absl::StatusCode::kDataLoss) {
        report_catalog(catalog.status());
      } else {
        log(LogSeverity::kWarning,
            absl::StrCat("could not read the catalog: ", catalog.status().ToString()));
      }
    }
    if (fenced()) break;
    wait_for_news(seen);
  }
  for (auto& [name, slot] : slots_) slot->stop->store(true);
  for (auto& [name, slot] : slots_) stop_slot(*slot, /*dropped=*/false);
  slots_.clear();
  weir::MutexLock lock(mu_);
  if (!fenced_.ok()) log(LogSeverity::kError, fenced_.ToString());
  return fenced_;
}

}  // namespace

absl::StatusOr<uint64_t> take_execution(persist::PersistClient& client, size_t processes) {
  const std::string started =
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  return ingest::take_sequence_number(client, kExecutionsShard, [&](uint64_t n) {
    std::string row =
        absl::StrCat("execution=", n, " ", ingest::process_name(), " started=", started);
    if (processes > 1) absl::StrAppend(&row, " processes=", processes);
    return row;
  });
}

absl::Status check_latest_execution(persist::PersistClient& client, uint64_t execution) {
  WEIR_ASSIGN_OR_RETURN(const persist::ShardDescription executions,
                        client.describe(kExecutionsShard));
  if (executions.upper == persist::Frontier(execution + 1)) return absl::OkStatus();
  const uint64_t latest = executions.upper.is_empty() ? 0 : executions.upper.time() - 1;
  std::string successor = absl::StrCat("execution ", latest);
  // The successor's row says where it runs (a read without a hold: the shard is tiny and only a
  // failed read costs the detail).
  if (auto cursor = client.inspect_snapshot(kExecutionsShard, latest); cursor.ok()) {
    const std::string prefix = absl::StrCat("execution=", latest, " ");
    while (cursor->next()) {
      if (cursor->diff() > 0 && cursor->data().starts_with(prefix)) {
        successor = absl::StrCat("execution ", latest, " (",
                                 std::string(cursor->data().substr(prefix.size())), ")");
      }
    }
  }
  return absl::FailedPreconditionError(
      absl::StrCat("replica execution ", execution, " is fenced by ", successor));
}

absl::Status run_replica(const ReplicaOptions& options) {
  if (static_cast<bool>(options.blob) != static_cast<bool>(options.consensus)) {
    return absl::InvalidArgumentError("ReplicaOptions: give both blob and consensus, or neither");
  }
  if (options.health_retention <= std::chrono::milliseconds(0) ||
      options.health_history_per_object == 0) {
    // Zero would retract each transition as it is recorded: no history, at the cost of one.
    return absl::InvalidArgumentError(
        "ReplicaOptions: health_retention and health_history_per_object must be positive");
  }
  if (options.processes == 0 || options.process >= options.processes ||
      (options.processes > 1 && !options.execution) ||
      static_cast<bool>(options.forward_health) != (options.process > 0)) {
    return absl::InvalidArgumentError(
        "ReplicaOptions: process must be below processes, a cluster's processes share the "
        "execution process 0 took, and exactly the processes other than 0 forward their health");
  }
  std::shared_ptr<persist::PersistClient> client;
  if (options.blob) {
    client = persist::PersistClient::create(options.blob, options.consensus, options.persist);
  } else {
    WEIR_ASSIGN_OR_RETURN(client, persist::PersistClient::open(options.location, options.persist));
  }
  uint64_t execution = 0;
  if (options.execution) {
    execution = *options.execution;
  } else {
    WEIR_ASSIGN_OR_RETURN(execution, take_execution(*client, options.processes));
  }
  if (options.log) {
    options.log(
        LogSeverity::kInfo,
        options.processes > 1
            ? absl::StrCat("replica execution ", execution, ", process ", options.process, " of ",
                           options.processes, " (", ingest::process_name(), ")")
            : absl::StrCat("replica execution ", execution, " (", ingest::process_name(), ")"));
  }
  if (options.on_execution) options.on_execution(execution);
  auto maintenance = std::make_shared<persist::BackgroundMaintenance>(
      client, [&options](const absl::Status& error) {
        if (options.log) {
          options.log(LogSeverity::kWarning,
                      absl::StrCat("persist maintenance: ", error.message()));
        }
      });
  std::shared_ptr<ingest::StatusShard> health;
  std::unique_ptr<internal::HealthHistory> history;
  // Process 0 (or a replica alone) claims and writes both health relations; the others forward.
  if (!options.forward_health) {
    absl::StatusOr<std::shared_ptr<ingest::StatusShard>> opened =
        ingest::StatusShard::open(client, kHealthShard, execution, maintenance);
    if (!opened.ok()) {
      return absl::Status(
          opened.status().code(),
          absl::StrCat("replica execution ", execution, ": could not claim the health relation ",
                       kHealthShard, ": ", opened.status().message()));
    }
    health = *std::move(opened);
    absl::StatusOr<std::unique_ptr<internal::HealthHistory>> opened_history =
        internal::HealthHistory::open(client, execution, maintenance, options.persist.clock,
                                      options.health_retention, options.health_history_per_object);
    if (!opened_history.ok()) {
      (void)health->expire();
      return absl::Status(
          opened_history.status().code(),
          absl::StrCat("replica execution ", execution, ": could not claim the health history ",
                       kHealthHistoryShard, ": ", opened_history.status().message()));
    }
    history = *std::move(opened_history);
  }
  Replica replica(options, client, execution, health, history.get());
  absl::Status ended = replica.run();
  if (health) (void)health->expire();
  if (history) (void)history->expire();
  if (!maintenance->finish_within(std::chrono::seconds(60)) && options.log) {
    options.log(LogSeverity::kWarning, "persist maintenance did not finish within 60 s");
  }
  return ended;
}

}  // namespace weir::control
