// `weir persist`: inspects persist shards.
//
//   weir persist --persist DIR ls
//   weir persist cat SHARD --persist DIR    (the store flags may also follow the subcommand)
//   weir persist --blob file:///path --consensus sqlite:///path/consensus.db describe SHARD
//   weir persist --blob file:///path --consensus postgres://... cat SHARD [--as-of T]

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/time/time.h"
#include "checks.h"
#include "commands.h"
#include "shard_text.h"

#include "weir/ingest/postgres.h"
#include "weir/persist/client.h"
#include "weir/sources/postgres/value.h"

namespace weir::tools {
namespace {

using persist::Frontier;
using persist::PersistClient;
using persist::PersistLocation;

struct PersistOptions {
  StoreFlags store;
  std::string shard;
  std::optional<uint64_t> as_of;
};

[[noreturn]] void fail(const absl::Status& status) {
  std::cerr << "weir persist: " << status << "\n";
  throw CLI::RuntimeError(1);
}

template <class T>
T value_or_fail(absl::StatusOr<T> result) {
  if (!result.ok()) {
    fail(result.status());
  }
  return *std::move(result);
}

std::unique_ptr<PersistClient> open_client(const PersistOptions& options) {
  return value_or_fail(PersistClient::open(value_or_fail(store_location(options.store)),
                                           store_config(options.store)));
}

std::string format_time(absl::Time time) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone());
}

// "2026-12-02T06:25:35.000Z (3.2s ago)".
std::string time_and_age(absl::Time time, absl::Time now) {
  if (time == absl::InfinitePast()) return "unknown";
  const absl::Duration age = now - time;
  return format_time(time) + " (" +
         (age >= absl::ZeroDuration()
              ? absl::FormatDuration(absl::Trunc(age, absl::Milliseconds(100))) + " ago"
              : "in the future: clocks differ") +
         ")";
}

// The source identity that `weir ingest` records for the shards PREFIX.* in PREFIX.source (one
// "key=value" row each), joined with spaces; "" when there is none.
std::string source_identity(PersistClient& client, const std::string& shard) {
  const size_t dot = shard.rfind('.');
  if (dot == std::string::npos) return "";
  const std::string source = shard.substr(0, dot) + ".source";
  absl::StatusOr<std::optional<persist::ShardId>> id = client.find_shard(source);
  if (!id.ok() || !id->has_value()) return "";
  absl::StatusOr<persist::SnapshotCursor> cursor = client.inspect_snapshot(source);
  if (!cursor.ok()) return "(" + source + ": " + std::string(cursor.status().message()) + ")";
  std::string out;
  while (cursor->next()) {
    if (cursor->diff() <= 0) continue;
    if (!out.empty()) out += ' ';
    out += escape(cursor->data());
  }
  if (!cursor->status().ok()) {
    out += " (" + source + ": " + std::string(cursor->status().message()) + ")";
  }
  return out + "  (from " + source + ")";
}

void list_shards(const PersistOptions& options) {
  for (const persist::ShardName& shard : value_or_fail(open_client(options)->list_shards())) {
    std::cout << shard.name << "\n";
  }
}

std::optional<sources::postgres::RelationDesc> relation_or_fail(PersistClient& client,
                                                                const std::string& shard) {
  return value_or_fail(tools::relation_of(client, shard));
}

void describe_shard(const PersistOptions& options) {
  std::unique_ptr<PersistClient> client = open_client(options);
  const persist::ShardDescription d = value_or_fail(client->describe(options.shard));
  const absl::Time now = absl::Now();
  std::cout << "shard           " << d.name << "\n"
            << "id              " << d.id.str() << "\n"
            << "seqno           " << d.seqno << "\n"
            << "written         " << (d.seqno == 0 ? "never" : format_time(d.walltime)) << "\n"
            << "upper           " << d.upper.to_string() << "\n"
            << "since           " << d.since.to_string() << "\n";
  if (const std::string source = source_identity(*client, d.name); !source.empty()) {
    std::cout << "source          " << source << "\n";
  }
  uint64_t updates = 0;
  uint64_t bytes = 0;
  for (const auto& batch : d.batches) {
    updates += batch.num_updates;
    bytes += batch.encoded_bytes;
  }
  if (const auto relation = relation_or_fail(*client, d.name)) {
    std::cout << "columns         " << relation->columns.size() << " ("
              << relation->qualified_name() << ", oid " << relation->table_oid << ")\n";
    std::istringstream lines(relation->describe());
    for (std::string line; std::getline(lines, line);) std::cout << "  " << line << "\n";
  }
  std::cout << "batches         " << d.batches.size() << " (" << updates << " updates, " << bytes
            << " bytes encoded)\n";
  for (const auto& batch : d.batches) {
    std::cout << "  ["
              << (batch.description.lower.is_empty()
                      ? std::string("-")
                      : std::to_string(batch.description.lower.time()))
              << ", "
              << (batch.description.upper.is_empty()
                      ? std::string("inf")
                      : std::to_string(batch.description.upper.time()))
              << ")  since " << batch.description.since.to_string() << "  parts " << batch.num_parts
              << "  runs " << batch.num_runs << "  updates " << batch.num_updates << "  bytes "
              << batch.update_bytes << " (encoded " << batch.encoded_bytes << ")\n";
  }
  if (d.fence_epoch != 0) {
    std::cout << "fence           epoch " << d.fence_epoch << "  \"" << escape(d.fence_owner)
              << "\"\n";
  }
  // A handle's fence epoch, if it has one.
  const auto fence_of = [](uint64_t epoch) {
    return epoch == 0 ? std::string() : "  fence " + std::to_string(epoch);
  };
  std::cout << "writers         " << d.writers.size() << "\n";
  for (const auto& writer : d.writers) {
    std::cout << "  " << writer.writer_id << "  \"" << escape(writer.purpose) << "\"  heartbeat "
              << time_and_age(writer.last_heartbeat, now) << "  lease "
              << absl::FormatDuration(writer.lease) << fence_of(writer.fence_epoch) << "\n";
  }
  std::cout << "leased readers  " << d.leased_readers.size() << "\n";
  for (const auto& reader : d.leased_readers) {
    std::cout << "  " << reader.reader_id << "  \"" << escape(reader.purpose) << "\"  since "
              << reader.since.to_string() << "  seqno " << reader.seqno << "  heartbeat "
              << time_and_age(reader.last_heartbeat, now) << "  lease "
              << absl::FormatDuration(reader.lease) << fence_of(reader.fence_epoch) << "\n";
  }
  std::cout << "critical readers " << d.critical_readers.size() << "\n";
  for (const auto& reader : d.critical_readers) {
    std::cout << "  " << reader.reader_id << "  \"" << escape(reader.purpose) << "\"  since "
              << reader.since.to_string() << "  epoch " << reader.epoch << "  moved "
              << time_and_age(reader.last_changed, now) << "\n";
  }
}

void cat_shard(const PersistOptions& options) {
  std::unique_ptr<PersistClient> client = open_client(options);
  if (!value_or_fail(client->find_shard(options.shard)).has_value()) {
    fail(absl::NotFoundError("no shard named \"" + options.shard + "\""));
  }
  const persist::ShardDescription d = value_or_fail(client->describe(options.shard));
  if (!options.as_of && d.upper == Frontier(0)) return;  // Nothing is final yet: no rows.
  const uint64_t as_of =
      options.as_of.value_or(d.upper.is_empty() ? UINT64_MAX : d.upper.time() - 1);
  // A leased reader holds what the read needs (its since and the parts of its state) until the
  // read ends: compaction and GC running meanwhile cannot remove parts from under it.
  // Registering it is a write: where consensus cannot take one (a stopped process holding
  // SQLite's write lock, say), read without a hold and say so.
  absl::StatusOr<persist::ReadHandle> reader =
      client->open_reader(options.shard, "weir persist cat");
  absl::Cleanup expire = [&reader] {
    if (reader.ok()) (void)reader->expire();
  };
  if (!reader.ok() && reader.status().code() != absl::StatusCode::kUnavailable &&
      reader.status().code() != absl::StatusCode::kDeadlineExceeded) {
    fail(reader.status());
  }
  if (!reader.ok()) {
    std::cerr << "weir persist cat: reading without a hold (" << reader.status()
              << "): a compaction or GC meanwhile may remove a part before it is read\n";
  }
  persist::SnapshotCursor cursor =
      value_or_fail(reader.ok() ? reader->snapshot_cursor(as_of)
                                : client->inspect_snapshot(options.shard, as_of));
  // Typed rows print as COPY prints them (tab-separated columns, \N for NULL).
  const std::optional<sources::postgres::RelationDesc> relation = relation_or_fail(*client, d.name);
  std::string line;
  while (cursor.next()) {
    line.clear();
    if (const absl::Status printed = append_row(relation, d.name, cursor.data(), line);
        !printed.ok()) {
      fail(printed);
    }
    line += '\t';
    line += std::to_string(cursor.time());
    line += '\t';
    line += std::to_string(cursor.diff());
    line += '\n';
    std::cout << line;
  }
  std::cout.flush();
  if (!cursor.status().ok()) {
    fail(cursor.status());
  }
}

}  // namespace

void add_persist_command(CLI::App& app) {
  auto options = std::make_shared<PersistOptions>();
  CLI::App* persist = app.add_subcommand("persist", "Inspect persist shards");
  persist->require_subcommand(1);
  add_store_flags(*persist, options->store);
  // The store flags may come before the subcommand or after it (main.cc: fallthrough).
  persist->footer(
      "Examples:\n"
      "  weir persist --persist DIR ls\n"
      "  weir persist cat auction.users --persist DIR\n"
      "  weir persist --blob file:///DIR/blob --consensus postgres://u@h/db describe orders");

  CLI::App* ls = persist->add_subcommand("ls", "Print the shard names, one per line");
  ls->footer("Example:\n  weir persist ls --persist DIR");
  ls->final_callback([options] { list_shards(*options); });

  CLI::App* describe =
      persist->add_subcommand("describe", "Print a shard's upper, since, batches and handles");
  describe->add_option("SHARD", options->shard, "Shard name")->required()->check(non_empty());
  describe->footer("Example:\n  weir persist describe auction.bids --persist DIR");
  describe->final_callback([options] { describe_shard(*options); });

  CLI::App* cat = persist->add_subcommand(
      "cat",
      "Print the consolidated contents as DATA<tab>TIME<tab>DIFF lines (typed rows as COPY "
      "prints them)");
  cat->add_option("SHARD", options->shard, "Shard name")->required()->check(non_empty());
  add_reader_lease_flag(*cat, options->store);
  cat->add_option("--as-of", options->as_of,
                  "Read at this time (default: the latest readable time, upper - 1)")
      ->check(unsigned_in());
  cat->footer("Example:\n  weir persist cat auction.users --persist DIR --as-of 100");
  cat->final_callback([options] { cat_shard(*options); });
}

}  // namespace weir::tools
