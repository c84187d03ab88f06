#include "weir/control/validate.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codec.h"

#include "weir/ingest/view.h"
#include "weir/status.h"

namespace weir::control {
namespace {

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool is_name_char(char c) { return is_name_start(c) || c == '_' || c == '.' || c == '-'; }

std::string quoted(std::string_view name) {
  return absl::StrCat("\"", absl::CEscape(absl::string_view(name.data(), name.size())), "\"");
}

const char* kind_of(const ObjectSpec& spec) {
  static constexpr const char* kKinds[] = {"source", "view", "hold"};
  return kKinds[spec.index()];
}

// "source \"bids\"": how a message names an object.
std::string named(std::string_view name, const ObjectSpec& spec) {
  return absl::StrCat(kind_of(spec), " ", quoted(name));
}

// Whether `shard` is one of the shards `<prefix>.*`.
bool under(std::string_view shard, std::string_view prefix) {
  return shard.size() > prefix.size() && shard.starts_with(prefix) && shard[prefix.size()] == '.';
}

// Whether `<a>.*` and `<b>.*` share a shard: the same prefix, or one inside the other
// ("pg.eu.orders" could be table "eu.orders" of pg).
bool overlap(std::string_view a, std::string_view b) {
  return a == b || under(a, b) || under(b, a);
}

// The shards an object writes: a source every `<prefix>.*`, a view its output, a hold nothing.
struct Writes {
  std::optional<std::string> prefix;
  std::optional<std::string> shard;

  bool contains(std::string_view name) const {
    return (prefix && under(name, *prefix)) || (shard && *shard == name);
  }
  std::string describe() const { return prefix ? absl::StrCat(*prefix, ".*") : quoted(*shard); }
};

// What a (complete) spec writes. A stored source that does not parse (written by hand) writes
// nothing that validation can know of.
Writes writes_of(const ObjectSpec& spec) {
  Writes writes;
  if (const auto* source = std::get_if<SourceSpec>(&spec)) {
    if (absl::StatusOr<std::string> prefix = shard_prefix(*source); prefix.ok()) {
      writes.prefix = *std::move(prefix);
    }
  } else if (const auto* view = std::get_if<ViewSpec>(&spec)) {
    writes.shard = view->output;
  }
  return writes;
}

// The live object other than `except` that writes `shard`, if any.
const CatalogObject* writer_of(const CatalogSnapshot& catalog, std::string_view shard,
                               std::string_view except) {
  for (const auto& [name, object] : catalog.objects) {
    if (name != except && writes_of(object.spec).contains(shard)) return &object;
  }
  return nullptr;
}

absl::StatusOr<ingest::SourceSpec> parsed(std::string_view name, const SourceSpec& spec) {
  const ingest::SourceSpec given = to_ingest_spec(spec);
  std::vector<std::pair<std::string, std::string>> flags = {{"source", given.source}};
  flags.insert(flags.end(), given.options.begin(), given.options.end());
  for (const std::string& table : given.tables) flags.emplace_back("tables", table);
  absl::StatusOr<ingest::SourceSpec> result = ingest::parse_source_spec(flags);
  if (!result.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("source ", quoted(name), ": ", result.status().message()));
  }
  return result;
}

absl::StatusOr<std::string> prefix_of(const ingest::SourceSpec& spec) {
  if (spec.source == "postgres") {
    WEIR_ASSIGN_OR_RETURN(const ingest::PostgresIngestOptions pg,
                          ingest::to_postgres_options(spec, {}));
    return pg.kind;
  }
  if (spec.source == "mysql") {
    WEIR_ASSIGN_OR_RETURN(const ingest::MysqlIngestOptions my, ingest::to_mysql_options(spec, {}));
    return my.kind;
  }
  return spec.source.substr(spec.source.find(':') + 1);  // loadgen:KIND
}

absl::StatusOr<SourceSpec> complete(std::string_view name, const SourceSpec& given) {
  WEIR_ASSIGN_OR_RETURN(const ingest::SourceSpec spec, parsed(name, given));
  const auto refuse = [name](const absl::Status& status) {
    return absl::InvalidArgumentError(
        absl::StrCat("source ", quoted(name), ": ", status.message()));
  };
  // The definition as a whole (a PostgreSQL source needs --conn and --publication), as a replica
  // will take it; nothing is connected to.
  if (absl::StatusOr<ingest::IngestOptions> options = ingest::to_ingest_options(spec, {});
      !options.ok()) {
    return refuse(options.status());
  }
  if (absl::Status storable = ingest::check_storable(spec); !storable.ok()) {
    return refuse(storable);
  }
  absl::StatusOr<std::string> prefix = prefix_of(spec);
  if (!prefix.ok()) return refuse(prefix.status());
  if (overlap(*prefix, "weir")) {
    return absl::InvalidArgumentError(absl::StrCat("source ", quoted(name), " would write ",
                                                   *prefix, ".*: shards named weir.* are weir's"));
  }
  return from_ingest_spec(spec);
}

absl::StatusOr<ViewSpec> complete(std::string_view name, const ViewSpec& given) {
  const std::string what = absl::StrCat("view ", quoted(name));
  const std::vector<std::string> inputs = ingest::view_inputs(given.view);
  if (inputs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": there is no view ", quoted(given.view),
                     " (there are: ", absl::StrJoin(ingest::known_views(), ", "), ")"));
  }
  ViewSpec spec = given;
  if (spec.inputs.empty()) spec.inputs = inputs;
  if (spec.inputs != inputs) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": view ", given.view, " reads ", absl::StrJoin(inputs, ", "), ", not ",
        absl::StrJoin(spec.inputs, ", "), " (leave the inputs empty to have them filled in)"));
  }
  if (spec.output.empty()) spec.output = "view." + spec.view;
  if (spec.output.starts_with("weir.")) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": its output ", quoted(spec.output),
                                                   " is reserved: shards named weir.* are weir's"));
  }
  for (const std::string& input : spec.inputs) {
    if (spec.output == input) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": its output ", quoted(spec.output), " is one of its inputs"));
    }
    const size_t dot = input.rfind('.');
    if (dot != std::string::npos && under(spec.output, input.substr(0, dot))) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": its output ", quoted(spec.output), " is under ", input.substr(0, dot),
          ".*, the shards of the source its input ", input, " comes from"));
    }
  }
  return spec;
}

absl::StatusOr<HoldSpec> complete(std::string_view name, const HoldSpec& spec) {
  if (spec.shard.empty() || spec.reader.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("hold ", quoted(name), " needs both a shard and a reader"));
  }
  if (spec.shard.starts_with("weir.")) {
    // A hold on weir.health or weir.catalog would keep their whole history.
    return absl::InvalidArgumentError(
        absl::StrCat("hold ", quoted(name), ": ", quoted(spec.shard), " is weir's own shard"));
  }
  return spec;
}

// `shard`, which `what` reads, exists or is written by a live object other than `except`.
absl::Status check_readable(const CatalogSnapshot& catalog, const ShardExists& exists,
                            std::string_view except, const std::string& what,
                            const std::string& shard) {
  if (writer_of(catalog, shard, except) != nullptr || !exists) return absl::OkStatus();
  WEIR_ASSIGN_OR_RETURN(const bool there, exists(shard));
  if (there) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      what, ": shard ", quoted(shard), " does not exist and no live object writes it"));
}

// The checks of a complete spec against the live objects other than `name` (and the store).
absl::Status check_against(std::string_view name, const SourceSpec& spec,
                           const CatalogSnapshot& catalog, const ShardExists&) {
  const Writes writes = writes_of(spec);
  for (const auto& [other, object] : catalog.objects) {
    if (other == name) continue;
    const Writes theirs = writes_of(object.spec);
    const bool shared = (theirs.prefix && overlap(*writes.prefix, *theirs.prefix)) ||
                        (theirs.shard && under(*theirs.shard, *writes.prefix));
    if (shared) {
      return absl::AlreadyExistsError(
          absl::StrCat("source ", quoted(name), " would write ", writes.describe(), ", and ",
                       named(other, object.spec), " writes ", theirs.describe(),
                       theirs.prefix ? "" : " among them", " (two objects never write one shard)"));
    }
  }
  return absl::OkStatus();
}

absl::Status check_against(std::string_view name, const ViewSpec& spec,
                           const CatalogSnapshot& catalog, const ShardExists& exists) {
  const std::string what = absl::StrCat("view ", quoted(name));
  if (const CatalogObject* writer = writer_of(catalog, spec.output, name)) {
    return absl::AlreadyExistsError(
        absl::StrCat(what, ": its output ", quoted(spec.output), " is written by ",
                     named(writer->name, writer->spec), " (two objects never write one shard)"));
  }
  for (const std::string& input : spec.inputs) {
    WEIR_RETURN_IF_ERROR(check_readable(catalog, exists, name, what, input));
  }
  return absl::OkStatus();
}

absl::Status check_against(std::string_view name, const HoldSpec& spec,
                           const CatalogSnapshot& catalog, const ShardExists& exists) {
  const std::string what = absl::StrCat("hold ", quoted(name));
  for (const auto& [other, object] : catalog.objects) {
    const auto* hold = std::get_if<HoldSpec>(&object.spec);
    if (other != name && hold != nullptr && hold->shard == spec.shard &&
        hold->reader == spec.reader) {
      return absl::AlreadyExistsError(absl::StrCat(what, ": reader ", quoted(spec.reader),
                                                   " holds ", quoted(spec.shard), " already (hold ",
                                                   quoted(other), ")"));
    }
  }
  return check_readable(catalog, exists, name, what, spec.shard);
}

// A live view (other than `live` itself) that reads a shard `live` writes and `replacement` (none:
// a drop) would not.
absl::Status check_readers(const CatalogObject& live, const ObjectSpec* replacement,
                           const CatalogSnapshot& catalog) {
  const Writes before = writes_of(live.spec);
  const Writes after = replacement ? writes_of(*replacement) : Writes{};
  for (const auto& [other, object] : catalog.objects) {
    const auto* view = std::get_if<ViewSpec>(&object.spec);
    if (other == live.name || view == nullptr) continue;
    for (const std::string& input : view->inputs) {
      if (before.contains(input) && !after.contains(input)) {
        return absl::FailedPreconditionError(
            absl::StrCat("cannot ", replacement ? "replace " : "drop ", named(live.name, live.spec),
                         ": view ", quoted(other), " reads ", input,
                         ", which it writes (drop view ", quoted(other), " first)"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status validate_name(std::string_view name) {
  if (name.empty()) {
    return absl::InvalidArgumentError("a catalog object needs a name");
  }
  if (name.size() > kMaxNameLength) {
    return absl::InvalidArgumentError(absl::StrCat("catalog name ", quoted(name), " has ",
                                                   name.size(), " characters; at most ",
                                                   kMaxNameLength, " are allowed"));
  }
  for (size_t i = 0; i < name.size(); ++i) {
    if (!(i == 0 ? is_name_start(name[i]) : is_name_char(name[i]))) {
      return absl::InvalidArgumentError(absl::StrCat("catalog name ", quoted(name), " has ",
                                                     quoted(name.substr(i, 1)), " at position ", i,
                                                     ": names match [a-z0-9][a-z0-9_.-]*"));
    }
  }
  if (name.starts_with("weir.")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "catalog name ", quoted(name), " is reserved: names starting with \"weir.\" are weir's"));
  }
  return absl::OkStatus();
}

ShardExists shards_of(persist::PersistClient& client) {
  return [&client](const std::string& shard) -> absl::StatusOr<bool> {
    WEIR_ASSIGN_OR_RETURN(const std::optional<persist::ShardId> id, client.find_shard(shard));
    return id.has_value();
  };
}

ingest::SourceSpec to_ingest_spec(const SourceSpec& spec) {
  ingest::SourceSpec out;
  out.source = spec.source;
  for (const SourceOption& option : spec.options)
    out.options.emplace_back(option.key, option.value);
  out.tables = spec.tables;
  return out;
}

SourceSpec from_ingest_spec(const ingest::SourceSpec& spec) {
  SourceSpec out;
  out.source = spec.source;
  for (const auto& [key, value] : spec.options) out.options.push_back({key, value});
  out.tables = spec.tables;
  return out;
}

absl::StatusOr<std::string> shard_prefix(const SourceSpec& spec) {
  WEIR_ASSIGN_OR_RETURN(const ingest::SourceSpec checked, parsed("", spec));
  return prefix_of(checked);
}

absl::StatusOr<ObjectSpec> complete_spec(std::string_view name, const ObjectSpec& spec) {
  return std::visit(
      [name](const auto& given) -> absl::StatusOr<ObjectSpec> {
        WEIR_ASSIGN_OR_RETURN(auto completed, complete(name, given));
        return ObjectSpec(std::move(completed));
      },
      spec);
}

absl::Status validate_live(const CatalogObject& object, const CatalogSnapshot& catalog) {
  WEIR_RETURN_IF_ERROR(validate_name(object.name));
  WEIR_ASSIGN_OR_RETURN(const ObjectSpec spec, complete_spec(object.name, object.spec));
  return std::visit(
      [&](const auto& completed) {
        return check_against(object.name, completed, catalog, /*exists=*/nullptr);
      },
      spec);
}

absl::Status validate(const Change& change, const CatalogSnapshot& catalog,
                      const ShardExists& exists) {
  WEIR_RETURN_IF_ERROR(validate_name(change.name));
  const CatalogObject* live = catalog.find(change.name);
  switch (change.kind) {
    case ChangeKind::kCreate:
      if (live != nullptr) {
        return absl::AlreadyExistsError(absl::StrCat("catalog object ", quoted(change.name),
                                                     " exists already (created by version ",
                                                     live->created_version, ")"));
      }
      break;
    case ChangeKind::kDrop:
    case ChangeKind::kReplace:
      if (live == nullptr) {
        return absl::NotFoundError(absl::StrCat("there is no catalog object ", quoted(change.name),
                                                " (at version ", catalog.version, ")"));
      }
      if (change.kind == ChangeKind::kDrop) {
        return check_readers(*live, nullptr, catalog);
      }
      if (live->spec.index() != change.spec.index()) {
        return absl::InvalidArgumentError(
            absl::StrCat("catalog object ", quoted(change.name), " is a ", kind_of(live->spec),
                         "; a replace cannot make it a ", kind_of(change.spec)));
      }
      break;
  }
  WEIR_ASSIGN_OR_RETURN(const ObjectSpec spec, complete_spec(change.name, change.spec));
  if (live != nullptr) {
    if (internal::canonical(live->spec) == internal::canonical(spec)) {
      return absl::InvalidArgumentError(
          absl::StrCat("replacing catalog object ", quoted(change.name), " would change nothing"));
    }
    const auto* was = std::get_if<HoldSpec>(&live->spec);
    const auto* hold = std::get_if<HoldSpec>(&spec);
    if (was != nullptr && hold != nullptr && was->shard == hold->shard &&
        was->reader == hold->reader && hold->since < was->since) {
      // The replica moves the hold forward only: a since once given up is not held again.
      return absl::FailedPreconditionError(
          absl::StrCat("hold ", quoted(change.name), " on ", quoted(hold->shard), " is at since ",
                       was->since, ": a hold only moves forward (asked for ", hold->since, ")"));
    }
    WEIR_RETURN_IF_ERROR(check_readers(*live, &spec, catalog));
  }
  return std::visit(
      [&](const auto& completed) { return check_against(change.name, completed, catalog, exists); },
      spec);
}

}  // namespace weir::control
