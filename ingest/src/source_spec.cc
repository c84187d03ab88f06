#include "weir/ingest/source_spec.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

#include "weir/sources/loadgen/generator.h"
#include "weir/sources/postgres/pgoutput.h"
#include "weir/status.h"
#include "weir/value_checks.h"

namespace weir::ingest {
namespace {

// The flags of a source definition, sorted.
const std::string kFlags[] = {"add-after",
                              "add-table",
                              "compaction-window",
                              "conn",
                              "fault",
                              "mode",
                              "name",
                              "publication",
                              "rate",
                              "scale",
                              "seed",
                              "server-id",
                              "slot",
                              "snapshot-rows",
                              "source",
                              "tables",
                              "transient-fault",
                              "until",
                              "until-gtid",
                              "until-lsn"};
// `weir ingest` flags that say how a process runs a source, not what it is.
const std::string kProcessFlags[] = {"persist", "blob",          "consensus", "workers",  "w",
                                     "http",    "inject-faults", "quiet",     "log-level"};
const std::string kSources[] = {"loadgen:counter", "loadgen:auction", "postgres", "mysql"};
const std::string kModes[] = {"concurrent", "serial"};
constexpr char kDefaultSource[] = "loadgen:auction";

bool is_list(const std::string& name) { return name == "tables" || name == "snapshot-rows"; }

// PostgreSQL's rule for replication slot names.
absl::Status check_slot(const std::string& slot) {
  const bool ok =
      !slot.empty() && slot.size() <= 63 && std::all_of(slot.begin(), slot.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
      });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("\"", slot, "\" is no replication slot name: 1 to 63 of a-z, 0-9 and _"));
}

// A shard name prefix: it is followed by ".<table>".
absl::Status check_shard_prefix(const std::string& name) {
  const bool ok = !name.empty() && name.front() != '.' && name.back() != '.' &&
                  std::all_of(name.begin(), name.end(), [](char c) {
                    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
                           c == '-' || c == '.';
                  });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("\"", name, "\" is no shard name prefix: letters, digits, _, - and inner ."));
}

// The check of one value of source flag `name`, its message without the flag's name.
absl::Status check_value(const std::string& name, std::string& value) {
  if (name == "source") return check_one_of(value, kSources);
  if (name == "scale") return check_unsigned(value, 0, kMaxScale);
  if (name == "until" || name == "seed" || name == "transient-fault" ||
      name == "compaction-window" || name == "until-gtid") {
    return check_unsigned(value);
  }
  if (name == "server-id") return check_unsigned(value, 0, UINT32_MAX);
  if (name == "rate") return check_number(value, 0, std::numeric_limits<double>::max());
  if (name == "add-after") return check_number(value, 0, kMaxAddAfterSeconds);
  if (name == "mode") return check_one_of(value, kModes);
  if (name == "snapshot-rows") return check_name_and_number(value, '=', "TABLE=N");
  if (name == "fault") return check_name_and_number(value, '@', "TABLE@OFFSET");
  if (name == "slot") return check_slot(value);
  if (name == "name") return check_shard_prefix(value);
  if (name == "until-lsn") return sources::postgres::parse_lsn(value).status();
  return check_non_empty(value);  // tables, add-table, conn, publication.
}

absl::Status unknown_flag(const std::string& name) {
  if (std::find(std::begin(kProcessFlags), std::end(kProcessFlags), name) !=
      std::end(kProcessFlags)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name.size() == 1 ? "-" : "--", name,
                     " is not part of a source definition: it says how a process runs the "
                     "source, not what it ingests"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown flag \"", name, "\" for a source (known: ", absl::StrJoin(kFlags, ", "), ")"));
}

uint64_t to_unsigned(const std::string& canonical) {
  uint64_t value = 0;
  (void)absl::SimpleAtoi(canonical, &value);  // Checked by check_unsigned.
  return value;
}

// A source definition being parsed: flags are added one by one, then checked together.
class Parser {
 public:
  absl::Status add(const std::string& name, const std::string& given) {
    if (!is_source_flag(name)) return unknown_flag(name);
    if (!is_list(name)) {
      std::string value(given);
      WEIR_RETURN_IF_ERROR(check_source_flag(name, value));
      if (!scalars_.emplace(name, std::move(value)).second) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, ": given twice; give it once"));
      }
      return absl::OkStatus();
    }
    for (absl::string_view element : absl::StrSplit(given, ',')) {
      WEIR_RETURN_IF_ERROR(add_element(name, std::string(element)));
    }
    return absl::OkStatus();
  }

  // One element of a list flag, as it is (a table's name may hold a comma).
  absl::Status add_element(const std::string& name, std::string value) {
    WEIR_RETURN_IF_ERROR(check_source_flag(name, value));
    if (name == "tables") {
      tables_.push_back(std::move(value));
    } else {
      const size_t at = value.find('=');
      std::string rows = value.substr(at + 1);
      WEIR_RETURN_IF_ERROR(check_unsigned(rows));  // The canonical number.
      snapshot_rows_[value.substr(0, at)] = rows;  // A later one of a table wins.
    }
    return absl::OkStatus();
  }

  absl::StatusOr<SourceSpec> finish() && {
    SourceSpec spec;
    if (auto source = scalars_.extract("source")) spec.source = std::move(source.mapped());
    if (!snapshot_rows_.empty()) {
      scalars_["snapshot-rows"] = absl::StrJoin(snapshot_rows_, ",", absl::PairFormatter("="));
    }
    spec.options.assign(scalars_.begin(), scalars_.end());
    spec.tables = std::move(tables_);
    WEIR_RETURN_IF_ERROR(check_together(spec));
    return spec;
  }

 private:
  const std::string* find(const std::string& name) const {
    const auto it = scalars_.find(name);
    return it == scalars_.end() ? nullptr : &it->second;
  }

  // What `weir ingest` checks of its flags together before any work: the tables a load
  // generator's flags name are known here, a database's only once it is connected.
  absl::Status check_together(const SourceSpec& spec) const {
    const std::string* add_table = find("add-table");
    if (find("add-after") != nullptr && add_table == nullptr) {
      return absl::InvalidArgumentError("--add-after requires --add-table");
    }
    if (add_table != nullptr &&
        (spec.tables.empty() ||
         std::find(spec.tables.begin(), spec.tables.end(), *add_table) != spec.tables.end())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--add-table: \"", *add_table,
          "\" is ingested from the start: --tables lists the tables ingested before it is added"));
    }
    if (spec.source.rfind("loadgen:", 0) != 0) return absl::OkStatus();
    sources::loadgen::GeneratorOptions options;
    options.kind = spec.source.substr(8);
    auto generator = sources::loadgen::Generator::make(options);
    if (!generator.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--source: ", generator.status().message()));
    }
    auto check = [&](const char* flag, const std::string& table) -> absl::Status {
      if (auto index = generator->table_index(table); !index.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(flag, ": ", index.status().message()));
      }
      return absl::OkStatus();
    };
    for (const std::string& table : spec.tables) WEIR_RETURN_IF_ERROR(check("--tables", table));
    if (add_table != nullptr) WEIR_RETURN_IF_ERROR(check("--add-table", *add_table));
    for (const auto& [table, rows] : snapshot_rows_) {
      WEIR_RETURN_IF_ERROR(check("--snapshot-rows", table));
    }
    if (const std::string* fault = find("fault")) {
      WEIR_RETURN_IF_ERROR(check("--fault", fault->substr(0, fault->find('@'))));
    }
    return absl::OkStatus();
  }

  std::map<std::string, std::string> scalars_;
  std::map<std::string, std::string> snapshot_rows_;
  std::vector<std::string> tables_;
};

// `spec` checked and in canonical form, whoever made it.
absl::StatusOr<SourceSpec> canonical(const SourceSpec& spec) {
  Parser parser;
  WEIR_RETURN_IF_ERROR(parser.add("source", spec.source));
  for (const auto& [name, value] : spec.options) {
    if (name == "source" || name == "tables") {
      return absl::InvalidArgumentError(absl::StrCat("a source definition holds ", name,
                                                     " in its own field, not among its options"));
    }
    WEIR_RETURN_IF_ERROR(parser.add(name, value));
  }
  for (const std::string& table : spec.tables) {
    WEIR_RETURN_IF_ERROR(parser.add_element("tables", table));
  }
  return std::move(parser).finish();
}

// The value of `name` in a canonical spec: as given, else its default (source_flag_default),
// else "".
std::string get(const SourceSpec& spec, const std::string& name) {
  const auto it =
      std::lower_bound(spec.options.begin(), spec.options.end(), name,
                       [](const auto& option, const std::string& n) { return option.first < n; });
  return it != spec.options.end() && it->first == name ? it->second : source_flag_default(name);
}

std::optional<uint64_t> get_unsigned(const SourceSpec& spec, const std::string& name) {
  const std::string value = get(spec, name);
  if (value.empty()) return std::nullopt;
  return to_unsigned(value);
}

absl::StatusOr<sources::ProgressMode> mode_of(const SourceSpec& spec) {
  return sources::parse_progress_mode(get(spec, "mode"));
}

absl::StatusOr<PostgresIngestOptions> postgres_options(const SourceSpec& spec,
                                                       const RunSettings& settings) {
  if (spec.source != "postgres") {
    return absl::InvalidArgumentError(
        absl::StrCat("--source ", spec.source, " is not a PostgreSQL source"));
  }
  PostgresIngestOptions pg;
  pg.conninfo = get(spec, "conn");
  pg.publication = get(spec, "publication");
  if (pg.conninfo.empty() || pg.publication.empty()) {
    return absl::InvalidArgumentError("--source postgres needs --conn and --publication");
  }
  pg.slot = get(spec, "slot");
  if (pg.slot.empty()) pg.slot = default_slot_name(settings.location_key);
  pg.kind = get(spec, "name");
  if (pg.kind.empty()) pg.kind = "pg";
  pg.workers = settings.workers;
  WEIR_ASSIGN_OR_RETURN(pg.mode, mode_of(spec));
  if (const std::string lsn = get(spec, "until-lsn"); !lsn.empty()) {
    WEIR_ASSIGN_OR_RETURN(pg.until, sources::postgres::parse_lsn(lsn));
  }
  return pg;
}

absl::StatusOr<MysqlIngestOptions> mysql_options(const SourceSpec& spec,
                                                 const RunSettings& settings) {
  if (spec.source != "mysql") {
    return absl::InvalidArgumentError(
        absl::StrCat("--source ", spec.source, " is not a MariaDB (mysql) source"));
  }
  MysqlIngestOptions my;
  my.conninfo = get(spec, "conn");
  if (my.conninfo.empty()) return absl::InvalidArgumentError("--source mysql needs --conn");
  my.kind = get(spec, "name");
  if (my.kind.empty()) my.kind = "mysql";
  my.workers = settings.workers;
  WEIR_ASSIGN_OR_RETURN(my.mode, mode_of(spec));
  my.replica_server_id = static_cast<uint32_t>(get_unsigned(spec, "server-id").value_or(0));
  my.replica_key = settings.location_key;
  my.until_seq = get_unsigned(spec, "until-gtid");
  return my;
}

// Whether a libpq or MariaDB connection string (key=value pairs or a URL) holds a password.
bool holds_password(const std::string& conn) {
  const std::string text = absl::AsciiStrToLower(conn);
  // password= (or sslpassword=, the client key's) as a key: at the start, after a space, or as
  // a URL's query parameter; libpq allows spaces around the '='.
  for (const std::string key : {"password", "sslpassword"}) {
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1)) {
      const bool starts = at == 0 ||
                          absl::ascii_isspace(static_cast<unsigned char>(text[at - 1])) ||
                          text[at - 1] == '?' || text[at - 1] == '&';
      size_t end = at + key.size();
      while (end < text.size() && absl::ascii_isspace(static_cast<unsigned char>(text[end]))) {
        ++end;
      }
      if (starts && end < text.size() && text[end] == '=') return true;
    }
  }
  // scheme://user:password@host...
  if (const size_t scheme = text.find("://"); scheme != std::string::npos) {
    std::string authority = text.substr(scheme + 3);
    authority = authority.substr(0, authority.find_first_of("/?#"));
    const size_t at = authority.rfind('@');
    if (at != std::string::npos && authority.substr(0, at).find(':') != std::string::npos) {
      return true;
    }
  }
  return false;
}

// `value` as a shell word.
std::string shell_word(const std::string& value) {
  const bool plain = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("_-./:@=,+%").find(c) != std::string_view::npos;
  });
  if (plain) return value;
  return absl::StrCat("'", absl::StrJoin(absl::StrSplit(value, '\''), "'\\''"), "'");
}

}  // namespace

std::string source_flag_default(std::string_view name) {
  if (name == "source") return kDefaultSource;
  if (name == "scale") return "1";
  if (name == "rate") return "1000";
  if (name == "mode") return "concurrent";
  if (name == "seed") return "42";
  if (name == "compaction-window") return std::to_string(IngestOptions{}.compaction_window);
  return "";
}

bool is_source_flag(std::string_view name) {
  return std::binary_search(std::begin(kFlags), std::end(kFlags), name);
}

absl::Status check_source_flag(std::string_view given, std::string& value) {
  const std::string name(given);
  if (!is_source_flag(name)) return unknown_flag(name);
  if (absl::Status status = check_value(name, value); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", status.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<SourceSpec> parse_source_spec(
    std::span<const std::pair<std::string, std::string>> flags) {
  Parser parser;
  bool source = false;
  for (const auto& [name, value] : flags) {
    WEIR_RETURN_IF_ERROR(parser.add(name, value));
    source = source || name == "source";
  }
  if (!source) WEIR_RETURN_IF_ERROR(parser.add("source", kDefaultSource));
  return std::move(parser).finish();
}

absl::StatusOr<IngestOptions> to_ingest_options(const SourceSpec& given,
                                                const RunSettings& settings) {
  WEIR_ASSIGN_OR_RETURN(const SourceSpec spec, canonical(given));
  IngestOptions options;
  options.location = settings.location;
  options.workers.workers = settings.workers;
  WEIR_ASSIGN_OR_RETURN(const sources::ProgressMode mode, mode_of(spec));
  if (spec.source == "postgres") {
    WEIR_ASSIGN_OR_RETURN(PostgresIngestOptions pg, postgres_options(spec, settings));
    options.upstream = make_postgres_source(std::move(pg));
  } else if (spec.source == "mysql") {
    WEIR_ASSIGN_OR_RETURN(MysqlIngestOptions my, mysql_options(spec, settings));
    options.upstream = make_mysql_source(std::move(my));
  }
  auto& g = options.source.generator;
  g.kind = options.upstream ? "" : spec.source.substr(8);
  g.scale = get_unsigned(spec, "scale").value_or(0);
  g.seed = get_unsigned(spec, "seed").value_or(0);
  const std::vector<std::string> entries =
      absl::StrSplit(get(spec, "snapshot-rows"), ',', absl::SkipEmpty());
  for (const std::string& entry : entries) {
    const size_t at = entry.find('=');
    g.snapshot_rows[entry.substr(0, at)] = to_unsigned(entry.substr(at + 1));
  }
  if (const std::string fault = get(spec, "fault"); !fault.empty()) {
    const size_t at = fault.find('@');
    g.fault_table = fault.substr(0, at);
    g.fault_offset = to_unsigned(fault.substr(at + 1));
  }
  options.source.rate = std::strtod(get(spec, "rate").c_str(), nullptr);
  options.source.until = get_unsigned(spec, "until");
  options.source.transient_fault = get_unsigned(spec, "transient-fault");
  options.source.mode = mode;
  options.tables = spec.tables;
  options.compaction_window = get_unsigned(spec, "compaction-window").value_or(0);
  options.add_table = get(spec, "add-table");
  options.add_after = std::chrono::milliseconds(
      static_cast<int64_t>(std::strtod(get(spec, "add-after").c_str(), nullptr) * 1000));
  return options;
}

absl::StatusOr<PostgresIngestOptions> to_postgres_options(const SourceSpec& spec,
                                                          const RunSettings& settings) {
  WEIR_ASSIGN_OR_RETURN(const SourceSpec checked, canonical(spec));
  return postgres_options(checked, settings);
}

absl::StatusOr<MysqlIngestOptions> to_mysql_options(const SourceSpec& spec,
                                                    const RunSettings& settings) {
  WEIR_ASSIGN_OR_RETURN(const SourceSpec checked, canonical(spec));
  return mysql_options(checked, settings);
}

absl::Status check_storable(const SourceSpec& spec) {
  for (const auto& [name, value] : spec.options) {
    if (name != "conn" || !holds_password(value)) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "--conn holds a password, and a stored source definition can be read by anyone who can "
        "read the catalog: leave the password out of --conn and give it to the process that "
        "runs the source, ",
        spec.source == "mysql"
            ? "in MYSQL_PWD in its environment"
            : "in a password file (PGPASSFILE in its environment, else ~/.pgpass) or in "
              "PGPASSWORD"));
  }
  return absl::OkStatus();
}

std::string to_string(const SourceSpec& spec) {
  std::string out = absl::StrCat("--source ", shell_word(spec.source));
  for (const auto& [name, value] : spec.options) {
    absl::StrAppend(&out, " --", name, " ", shell_word(value));
  }
  if (!spec.tables.empty()) {
    absl::StrAppend(&out, " --tables ", shell_word(absl::StrJoin(spec.tables, ",")));
  }
  return out;
}

}  // namespace weir::ingest
