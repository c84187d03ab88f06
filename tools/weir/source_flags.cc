#include "source_flags.h"

#include <cstdint>
#include <limits>

#include "checks.h"

#include "weir/ingest/source_spec.h"

namespace weir::tools {
namespace {

// Checks a source flag as it is parsed, by the rules of source definitions (source_spec.h), so
// that `weir ingest` and a stored definition say the same of a value; --help shows `shown`'s
// description ("0..1000000", "{a,b}").
CLI::Validator source_check(const std::string& name, const CLI::Validator& shown) {
  return CLI::Validator(
      [name](std::string& value) -> std::string {
        const absl::Status status = ingest::check_source_flag(name, value);
        if (status.ok()) return "";
        std::string message(status.message());
        const std::string prefix = "--" + name + ": ";  // CLI11 names the option itself.
        if (message.rfind(prefix, 0) == 0) message.erase(0, prefix.size());
        return message;
      },
      shown.get_description());
}

// Adds the source flag --`name`, shown in --help as a T with its default (if it has one). Its
// values are read back by source_flags.
template <typename T>
CLI::Option* add_source_flag(CLI::App& cmd, const std::string& name, const std::string& help,
                             const CLI::Validator& shown = CLI::Validator()) {
  CLI::Option* option = cmd.add_option_function<T>(
      "--" + name, [](const T&) {}, help);
  const std::string shown_default = ingest::source_flag_default(name);
  if (!shown_default.empty()) option->default_str(shown_default);
  return option->check(source_check(name, shown));
}

}  // namespace

void add_source_flags(CLI::App& cmd) {
  add_source_flag<std::string>(cmd, "source",
                               "loadgen:counter, loadgen:auction, postgres or mysql (MariaDB)",
                               one_of({"loadgen:counter", "loadgen:auction", "postgres", "mysql"}));
  add_source_flag<uint64_t>(cmd, "scale", "snapshot size multiplier",
                            unsigned_in(0, ingest::kMaxScale));
  add_source_flag<uint64_t>(cmd, "until", "stop after this upstream offset");
  add_source_flag<double>(cmd, "rate", "upstream changes per second (0: as fast as possible)",
                          number_in(0, std::numeric_limits<double>::max()));
  add_source_flag<std::string>(cmd, "mode", "concurrent (per-export progress) or serial",
                               one_of({"concurrent", "serial"}));
  add_source_flag<std::vector<std::string>>(cmd, "tables", "tables to ingest (default: all)")
      ->delimiter(',');
  add_source_flag<std::vector<std::string>>(cmd, "snapshot-rows",
                                            "TABLE=N: snapshot size of one table");
  add_source_flag<uint64_t>(cmd, "seed", "generator seed");
  add_source_flag<std::string>(cmd, "fault", "TABLE@OFFSET: a bad row (definite error)");
  add_source_flag<uint64_t>(cmd, "transient-fault", "fail once at this offset (transient error)");
  CLI::Option* add_table = add_source_flag<std::string>(
      cmd, "add-table", "a table to add while running (one not in --tables)");
  add_source_flag<double>(cmd, "add-after", "seconds before adding --add-table",
                          number_in(0, ingest::kMaxAddAfterSeconds))
      ->needs(add_table);
  add_source_flag<uint64_t>(cmd, "compaction-window",
                            "offsets of history kept readable behind the latest (each shard's "
                            "since is held at upper - 1 - N; 18446744073709551615: all)");
  add_source_flag<std::string>(cmd, "conn",
                               "postgres: libpq connection string or URL of the upstream "
                               "database; mysql: 'host=H port=P user=U password=W database=D'");
  add_source_flag<std::string>(cmd, "publication", "postgres: the publication to ingest");
  add_source_flag<std::string>(cmd, "slot",
                               "postgres: the logical replication slot (default: weir_ and a "
                               "hash of the persist location; created if missing)");
  add_source_flag<std::string>(cmd, "name",
                               "postgres, mysql: the shards' name prefix (default: pg, mysql)");
  add_source_flag<std::string>(cmd, "until-lsn",
                               "postgres: stop once every table is complete up to this LSN (X/Y)");
  add_source_flag<uint64_t>(cmd, "until-gtid",
                            "mysql: stop once every table holds every transaction up to this "
                            "GTID sequence number");
  add_source_flag<uint32_t>(cmd, "server-id",
                            "mysql: the binlog dump's server id, unique among the server's "
                            "replicas (default: a hash of the persist location)",
                            unsigned_in(0, UINT32_MAX));
}

std::vector<std::pair<std::string, std::string>> source_flags(const CLI::App& cmd) {
  std::vector<std::pair<std::string, std::string>> given;
  for (const CLI::Option* option : cmd.get_options()) {
    const std::string& name = option->get_single_name();
    if (!ingest::is_source_flag(name)) continue;
    for (const std::string& value : option->results()) given.emplace_back(name, value);
  }
  return given;
}

}  // namespace weir::tools
