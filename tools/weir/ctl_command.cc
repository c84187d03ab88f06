// `weir ctl`: the catalog (weir/control/catalog.h) from the command line: create and drop
// objects, list them, show their health as replicas report it, replay the log.
//
//   weir ctl --persist DIR create source auction --source loadgen:auction --scale 10
//   weir ctl --persist DIR create view counts --view bids-per-auction
//   weir ctl --persist DIR create hold audit --shard auction.bids --reader audit
//   weir ctl --persist DIR hold advance audit --to 5000
//   weir ctl --persist DIR drop counts
//   weir ctl --persist DIR ls [--version V]
//   weir ctl --persist DIR status [NAME] [--history]
//   weir ctl --persist DIR history [--from V]
//
// Exit codes: 0 ok; 2 refused, nothing committed (a usage error, or a change that does not
// validate: InvalidArgument, AlreadyExists, NotFound, FailedPrecondition); 3 a conflict (another
// commit made the change invalid after it was first checked: Aborted); 1 any other error.
//
// `create` and `drop` may name a location where nothing is yet (the first object creates the
// catalog); a change refused there creates nothing, the location included. `ls`, `status` and
// `history` read a location that exists.

#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "checks.h"
#include "commands.h"
#include "shard_text.h"
#include "source_flags.h"

#include "weir/control/catalog.h"
#include "weir/control/health.h"
#include "weir/control/replica.h"
#include "weir/control/validate.h"
#include "weir/ingest/source_spec.h"
#include "weir/persist/client.h"

namespace weir::tools {
namespace {

using control::ObjectSpec;
using persist::PersistClient;

// Exit codes (see above).
constexpr int kRefused = 2;
constexpr int kConflict = 3;

struct CtlFlags {
  StoreFlags store;
  std::string name;           // create, drop, status
  std::string view, output;   // create view
  std::string shard, reader;  // create hold
  uint64_t to = 0;            // hold advance
  std::optional<uint64_t> version;
  uint64_t from = 0;
  bool history = false;  // status --history
};

int exit_code(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
      return kRefused;
    case absl::StatusCode::kAborted:
      return kConflict;
    default:
      return 1;
  }
}

[[noreturn]] void fail(const absl::Status& status) {
  std::cerr << "weir ctl: " << status << "\n";
  throw CLI::RuntimeError(exit_code(status));
}

template <class T>
T value_or_fail(absl::StatusOr<T> result) {
  if (!result.ok()) fail(result.status());
  return *std::move(result);
}

std::unique_ptr<PersistClient> open_client(const CtlFlags& flags) {
  const persist::PersistLocation location = value_or_fail(store_location(flags.store));
  return value_or_fail(PersistClient::open(location, store_config(flags.store)));
}

// For the commands that read: the location must exist (nothing is created by reading it).
std::unique_ptr<PersistClient> open_existing(const CtlFlags& flags) {
  if (absl::Status exists = check_store_exists(flags.store); !exists.ok()) fail(exists);
  return open_client(flags);
}

const char* kind_of(const ObjectSpec& spec) {
  static constexpr const char* kKinds[] = {"source", "view", "hold"};
  return kKinds[spec.index()];
}

// A spec as the flags of `weir ctl create KIND` that make it.
std::string spec_text(const ObjectSpec& spec) {
  if (const auto* source = std::get_if<control::SourceSpec>(&spec)) {
    return ingest::to_string(control::to_ingest_spec(*source));
  }
  if (const auto* view = std::get_if<control::ViewSpec>(&spec)) {
    return absl::StrCat("--view ", view->view, " --output ", view->output, " (reads ",
                        absl::StrJoin(view->inputs, ","), ")");
  }
  const auto& hold = std::get<control::HoldSpec>(spec);
  return absl::StrCat("--shard ", hold.shard, " --reader ", hold.reader,
                      hold.since > 0 ? absl::StrCat(" --since ", hold.since) : "");
}

// Validates and commits `change`; prints the version it got.
void commit_change(const CtlFlags& flags, const control::Change& change) {
  if (!store_may_exist(flags.store)) {
    // Nothing is there yet, so the change is checked against an empty catalog and a store without
    // shards, as commit() would check it, before opening the location creates it.
    const absl::Status valid =
        control::validate(change, control::CatalogSnapshot{},
                          [](const std::string&) -> absl::StatusOr<bool> { return false; });
    if (!valid.ok()) fail(valid);
  }
  std::unique_ptr<PersistClient> client = open_client(flags);
  const control::CommittedChange committed = value_or_fail(control::commit(*client, change));
  std::printf("committed version %llu\n", static_cast<unsigned long long>(committed.version));
}

// Moves the hold NAME forward to --to: a replace of its row with that since (the replica then
// moves its critical since handle). Refused (nothing committed) below where the catalog or the hold
// itself is, past the shard's upper, and for an object that is not a hold.
void advance_hold(const CtlFlags& flags) {
  std::unique_ptr<PersistClient> client = open_existing(flags);
  const control::CatalogSnapshot catalog = value_or_fail(control::read(*client));
  const control::CatalogObject* object = catalog.find(flags.name);
  if (object == nullptr) {
    fail(absl::NotFoundError(absl::StrCat("there is no catalog object \"", flags.name,
                                          "\" (at version ", catalog.version, ")")));
  }
  const auto* hold = std::get_if<control::HoldSpec>(&object->spec);
  if (hold == nullptr) {
    fail(absl::InvalidArgumentError(
        absl::StrCat("\"", flags.name, "\" is a ", kind_of(object->spec), ", not a hold")));
  }
  absl::StatusOr<persist::ShardDescription> shard = client->describe(hold->shard);
  if (absl::IsNotFound(shard.status())) {
    fail(absl::FailedPreconditionError(absl::StrCat("hold \"", flags.name, "\": its shard \"",
                                                    hold->shard, "\" does not exist yet")));
  }
  if (!shard.ok()) fail(shard.status());
  const uint64_t upper = shard->upper.is_empty() ? UINT64_MAX : shard->upper.time();
  if (flags.to > upper) {
    fail(absl::FailedPreconditionError(absl::StrCat("hold \"", flags.name, "\": ", flags.to,
                                                    " is past the upper of \"", hold->shard, "\" (",
                                                    upper, ")")));
  }
  // Where a replica registered (and moved) it: its critical reader, named after the object.
  const std::string reader_id = "c" + object->object_id.substr(1);
  for (const auto& reader : shard->critical_readers) {
    if (reader.reader_id != reader_id) continue;
    const uint64_t since = reader.since.is_empty() ? UINT64_MAX : reader.since.time();
    if (flags.to < since) {
      fail(absl::FailedPreconditionError(
          absl::StrCat("hold \"", flags.name, "\" on \"", hold->shard, "\" is at since ", since,
                       ": a hold only moves forward (asked for ", flags.to, ")")));
    }
  }
  control::HoldSpec advanced = *hold;
  advanced.since = flags.to;
  const control::CommittedChange committed =
      value_or_fail(control::commit(*client, control::Change::replace(flags.name, advanced)));
  std::printf("committed version %llu\n", static_cast<unsigned long long>(committed.version));
}

void list_objects(const CtlFlags& flags) {
  std::unique_ptr<PersistClient> client = open_existing(flags);
  const control::CatalogSnapshot catalog = value_or_fail(control::read(*client, flags.version));
  for (const auto& [name, object] : catalog.objects) {
    std::printf("%s\t%s\t%s\t%llu\t%s\n", name.c_str(), kind_of(object.spec),
                object.object_id.c_str(), static_cast<unsigned long long>(object.created_version),
                spec_text(object.spec).c_str());
  }
}

void print_history(const CtlFlags& flags) {
  std::unique_ptr<PersistClient> client = open_existing(flags);
  for (const control::CommittedChange& change :
       value_or_fail(control::history(*client, flags.from))) {
    std::string spec = spec_text(change.object.spec);
    if (change.replaced) absl::StrAppend(&spec, " (was: ", spec_text(change.replaced->spec), ")");
    std::printf("%llu\t%s\t%s\t%s\t%s\t%s\n", static_cast<unsigned long long>(change.version),
                std::string(control::to_string(change.kind)).c_str(), change.object.name.c_str(),
                kind_of(change.object.spec), change.object.object_id.c_str(), spec.c_str());
  }
}

// A row of weir.health: "NAME STATE execution=E object=ID restarts=N [process=P] [error=...]"
// (replica.h).
struct HealthRow {
  std::string name;
  std::string state;
  std::string object;   // Its object= (empty if none).
  std::string details;  // The rest: execution=E restarts=N [error=...].
};

HealthRow parse_row(std::string_view text) {
  HealthRow row;
  std::vector<std::string> details;
  size_t at = 0;
  for (int field = 0; at < text.size(); ++field) {
    size_t end = text.find(' ', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(at, end - at);
    if (field == 0) {
      row.name = word;
    } else if (field == 1) {
      row.state = word;
    } else if (word.starts_with("error=")) {
      details.emplace_back(text.substr(at));  // The error is the rest of the row.
      break;
    } else if (word.starts_with("object=")) {
      row.object = word.substr(7);
    } else if (!word.empty()) {
      details.emplace_back(word);
    }
    at = end + 1;
  }
  row.details = absl::StrJoin(details, " ");
  return row;
}

// weir.health at its latest time, by object name; empty if no replica has written it.
std::map<std::string, HealthRow> read_health(PersistClient& client) {
  std::map<std::string, HealthRow> rows;
  if (!value_or_fail(client.find_shard(control::kHealthShard)).has_value()) return rows;
  absl::Status status;
  // A read without a hold: a GC meanwhile may remove a part it needs (NotFound); read again.
  for (int attempt = 0; attempt < 5; ++attempt) {
    rows.clear();
    absl::StatusOr<persist::SnapshotCursor> cursor = client.inspect_snapshot(control::kHealthShard);
    if (cursor.ok()) {
      while (cursor->next()) {
        if (cursor->diff() <= 0) continue;
        HealthRow row = parse_row(cursor->data());
        rows[row.name] = std::move(row);
      }
      status = cursor->status();
    } else {
      status = cursor.status();
    }
    if (!absl::IsNotFound(status)) break;
  }
  if (!status.ok()) fail(status);
  return rows;
}

// NotFound for `status NAME` when nothing is known of NAME.
absl::Status no_such_object(const std::string& name, const control::CatalogSnapshot& catalog) {
  return absl::NotFoundError(absl::StrCat("there is no catalog object \"", name, "\" (at version ",
                                          catalog.version, ") and no health row for one"));
}

// The transitions weir.health_history holds (of flags.name, or all), in the order recorded: AT,
// NAME, OBJECT_ID, STATE, DETAILS.
void print_health_history(const CtlFlags& flags, PersistClient& client,
                          const control::CatalogSnapshot& catalog,
                          const std::map<std::string, HealthRow>& health) {
  const std::vector<control::HealthTransition> transitions =
      value_or_fail(control::read_health_history(client, flags.name));
  if (transitions.empty() && !flags.name.empty() && catalog.find(flags.name) == nullptr &&
      !health.contains(flags.name)) {
    fail(no_such_object(flags.name, catalog));
  }
  for (const control::HealthTransition& t : transitions) {
    std::string details = absl::StrCat("execution=", t.execution, " restarts=", t.restarts);
    if (t.process) absl::StrAppend(&details, " process=", *t.process);
    if (!t.error.empty()) absl::StrAppend(&details, " error=", t.error);
    const std::string at = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(t.at_ms),
                                            absl::UTCTimeZone());
    std::printf("%s\t%s\t%s\t%s\t%s\n", at.c_str(), t.name.c_str(),
                t.object_id.empty() ? "-" : t.object_id.c_str(), t.state.c_str(), details.c_str());
  }
}

void print_status(const CtlFlags& flags) {
  std::unique_ptr<PersistClient> client = open_existing(flags);
  const control::CatalogSnapshot catalog = value_or_fail(control::read(*client));
  const std::map<std::string, HealthRow> health = read_health(*client);
  if (flags.history) {
    print_health_history(flags, *client, catalog, health);
    return;
  }
  const auto wanted = [&flags](const std::string& name) {
    return flags.name.empty() || flags.name == name;
  };
  const auto print = [](const std::string& name, const std::string& kind, const std::string& object,
                        const std::string& state, const std::string& details) {
    std::printf("%s\t%s\t%s\t%s\t%s\n", name.c_str(), kind.c_str(), object.c_str(), state.c_str(),
                details.c_str());
  };
  bool any = false;
  // The catalog itself, as the latest replica reads it.
  if (auto it = health.find(control::kCatalogShard); it != health.end() && wanted(it->first)) {
    print(it->first, "catalog", "-", it->second.state, it->second.details);
    any = true;
  }
  for (const auto& [name, object] : catalog.objects) {
    if (!wanted(name)) continue;
    any = true;
    const auto it = health.find(name);
    // A row of an earlier object of the same name says nothing of this one.
    if (it == health.end() || it->second.object != object.object_id) {
      print(name, kind_of(object.spec), object.object_id, "pending (no replica has reported)", "");
    } else {
      print(name, kind_of(object.spec), object.object_id, it->second.state, it->second.details);
    }
  }
  // Objects no longer in the catalog, as their rows last said.
  for (const auto& [name, row] : health) {
    if (name == control::kCatalogShard || !wanted(name)) continue;
    // A live name is shown once, above (a row of an earlier object of that name is stale).
    if (catalog.find(name) != nullptr) continue;
    any = true;
    print(name, "-", row.object.empty() ? "-" : row.object,
          row.state == "dropped" ? row.state : row.state + " (no longer in the catalog)",
          row.details);
  }
  if (!any && !flags.name.empty()) fail(no_such_object(flags.name, catalog));
}

// NAME of an object: checked as the catalog checks names, before any work.
CLI::Validator object_name() {
  return CLI::Validator(
      [](std::string& name) -> std::string {
        const absl::Status valid = control::validate_name(name);
        return valid.ok() ? "" : std::string(valid.message());
      },
      "");
}

// A view's output: not a shard of the load generator that the views read, not weir's.
CLI::Validator view_output() {
  return CLI::Validator(
      [](std::string& output) -> std::string {
        if (output.empty()) return "must not be empty";
        if (output.starts_with("weir."))
          return "\"" + output + "\" is reserved (weir.* are weir's)";
        if (output.starts_with("auction.")) {
          return "\"" + output +
                 "\" is the load generator's (auction.*), whose shards the view reads";
        }
        return "";
      },
      "");
}

void add_create_commands(CLI::App& ctl, const std::shared_ptr<CtlFlags>& flags) {
  CLI::App* create = ctl.add_subcommand("create", "Create a catalog object");
  create->require_subcommand(1);
  create->footer(
      "Examples:\n"
      "  weir ctl create source auction --source loadgen:auction --persist DIR\n"
      "  weir ctl create view counts --view bids-per-auction --persist DIR\n"
      "  weir ctl create hold audit --shard auction.bids --reader audit --persist DIR");

  CLI::App* source = create->add_subcommand(
      "source", "A source whose tables a replica ingests, defined by the flags of weir ingest");
  source->add_option("NAME", flags->name, "The object's name")->required()->check(object_name());
  add_source_flags(*source);
  source->footer(
      "A source's shards (<prefix>.*: auction.*, or --name's) are written by no other object. "
      "A password has no place in --conn: the catalog is readable by all who read the store "
      "(give it to the replica in PGPASSFILE, PGPASSWORD or MYSQL_PWD).\n"
      "Examples:\n"
      "  weir ctl create source auction --source loadgen:auction --scale 10 --persist DIR\n"
      "  weir ctl create source shop --source postgres --conn 'host=db user=weir dbname=shop' "
      "--publication shop --persist DIR");
  source->final_callback([flags, source] {
    absl::StatusOr<ingest::SourceSpec> spec = ingest::parse_source_spec(source_flags(*source));
    if (!spec.ok()) {
      fail(absl::InvalidArgumentError(
          absl::StrCat("source \"", flags->name, "\": ", spec.status().message())));
    }
    commit_change(
        *flags, control::Change::create(flags->name, control::from_ingest_spec(*std::move(spec))));
  });

  CLI::App* view = create->add_subcommand(
      "view", "A view of the auction shards that a replica maintains in a shard of its own");
  view->add_option("NAME", flags->name, "The object's name")->required()->check(object_name());
  view->add_option("--view", flags->view, "bids-per-auction or max-bid (as weir view)")
      ->required()
      ->check(one_of({"bids-per-auction", "max-bid"}));
  view->add_option("--output", flags->output, "Output shard (default: view.VIEW)")
      ->check(view_output());
  view->footer(
      "Its inputs must exist or be written by a live source; its output is written by no other "
      "object.\n"
      "Example:\n"
      "  weir ctl create view top --view max-bid --output view.top --persist DIR");
  view->final_callback([flags] {
    commit_change(
        *flags, control::Change::create(
                    flags->name,
                    control::ViewSpec{.view = flags->view, .inputs = {}, .output = flags->output}));
  });

  CLI::App* hold = create->add_subcommand(
      "hold", "A durable read hold: the shard's history from now on is kept for READER");
  hold->add_option("NAME", flags->name, "The object's name")->required()->check(object_name());
  hold->add_option("--shard", flags->shard,
                   "The shard held (it exists, or a live object writes it)")
      ->required()
      ->check(non_empty());
  hold->add_option("--reader", flags->reader, "Who holds it (one hold per reader and shard)")
      ->required()
      ->check(non_empty());
  hold->footer(
      "Example:\n"
      "  weir ctl create hold audit --shard auction.bids --reader audit --persist DIR");
  hold->final_callback([flags] {
    commit_change(*flags,
                  control::Change::create(flags->name, control::HoldSpec{.shard = flags->shard,
                                                                         .reader = flags->reader}));
  });
}

}  // namespace

void add_ctl_command(CLI::App& app) {
  auto flags = std::make_shared<CtlFlags>();
  CLI::App* ctl = app.add_subcommand(
      "ctl", "The catalog: create and drop the sources, views and holds that replicas run");
  ctl->require_subcommand(1);
  // `create` may name a location where nothing is yet; the reading commands check it exists.
  add_store_flags(*ctl, flags->store, StoreUse::kAny);
  add_pubsub_flag(*ctl, flags->store.pubsub);
  ctl->footer(
      "Exit codes: 0 ok; 2 refused, nothing committed (a usage error or a change that does not "
      "validate); 3 a conflict with a concurrent change; 1 other errors.\n"
      "Examples:\n"
      "  weir ctl --persist DIR create source auction --source loadgen:auction\n"
      "  weir ctl --persist DIR ls\n"
      "  weir ctl --persist DIR status");

  add_create_commands(*ctl, flags);

  // Before `drop` in the help (and in CliTest's walk, which advances the hold `create` made).
  CLI::App* hold = ctl->add_subcommand("hold", "Change a declared hold");
  hold->require_subcommand(1);
  hold->footer("Example:\n  weir ctl hold advance audit --to 5000 --persist DIR");
  CLI::App* advance = hold->add_subcommand(
      "advance",
      "Move a hold's since forward to --to (never back): the shard's history before it may be "
      "compacted");
  advance->add_option("NAME", flags->name, "The hold's name")->required()->check(object_name());
  advance->add_option("--to", flags->to, "The new since: at least the hold's, at most the upper")
      ->required()
      ->check(unsigned_in());
  advance->footer(
      "Committed as a replace of the hold's row; the replica then moves the hold. Refused "
      "(exit 2, nothing committed) below where the hold is or past the shard's upper.\n"
      "Example:\n"
      "  weir ctl hold advance audit --to 5000 --persist DIR");
  advance->final_callback([flags] { advance_hold(*flags); });

  CLI::App* drop = ctl->add_subcommand(
      "drop", "Drop a catalog object (its shards stay; refused while a view reads them)");
  drop->add_option("NAME", flags->name, "The object's name")->required()->check(object_name());
  drop->footer("Example:\n  weir ctl drop counts --persist DIR");
  drop->final_callback([flags] { commit_change(*flags, control::Change::drop(flags->name)); });

  CLI::App* ls = ctl->add_subcommand(
      "ls", "Print the live objects: NAME, KIND, OBJECT_ID, CREATED_VERSION, SPEC (tab-separated)");
  ls->add_option("--version", flags->version,
                 "The catalog at this version: after the changes before it (default: the latest)")
      ->check(unsigned_in());
  ls->footer("Example:\n  weir ctl ls --persist DIR --version 3");
  ls->final_callback([flags] { list_objects(*flags); });

  CLI::App* status = ctl->add_subcommand(
      "status",
      "Print each object's health as the latest replica reported it in weir.health: NAME, KIND, "
      "OBJECT_ID, STATE, DETAILS (tab-separated); pending if no replica has reported it");
  status->add_option("NAME", flags->name, "Only this object (weir.catalog: the catalog's own row)")
      ->check(CLI::Validator(
          [](std::string& name) -> std::string {
            if (name == control::kCatalogShard) return "";
            const absl::Status valid = control::validate_name(name);
            return valid.ok() ? "" : std::string(valid.message());
          },
          ""));
  status->add_flag("--history", flags->history,
                   "Print instead the transitions kept in weir.health_history, in the order "
                   "recorded: AT, NAME, OBJECT_ID, STATE, DETAILS (tab-separated)");
  status->footer(
      "Examples:\n"
      "  weir ctl status counts --persist DIR\n"
      "  weir ctl status counts --history --persist DIR");
  status->final_callback([flags] { print_status(*flags); });

  CLI::App* history = ctl->add_subcommand(
      "history",
      "Print the changes in order: VERSION, CHANGE, NAME, KIND, OBJECT_ID, SPEC (tab-separated)");
  history->add_option("--from", flags->from, "The first version (default: 0)")
      ->check(unsigned_in());
  history->footer("Example:\n  weir ctl history --persist DIR --from 10");
  history->final_callback([flags] { print_history(*flags); });
}

int usage_exit_code(const CLI::App& app, int code) {
  // CLI11's own codes (a mistyped flag, a missing argument) are 100 and up.
  if (code < 100) return code;
  for (const CLI::App* sub : app.get_subcommands()) {
    if (sub->get_name() == "ctl") return kRefused;
  }
  return code;
}

}  // namespace weir::tools
