#include "shard_text.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "checks.h"

#include "weir/ingest/ingest.h"
#include "weir/observe/log.h"
#include "weir/pubsub/pubsub.h"
#include "weir/status.h"

namespace weir::tools {

void add_store_flags(CLI::App& app, StoreFlags& flags, StoreUse use) {
  CLI::Option* dir =
      app.add_option("--persist", flags.dir,
                     "Persist directory: blobs in DIR/blob, SQLite consensus in DIR/consensus.db");
  CLI::Option* blob =
      app.add_option("--blob", flags.blob_url, "Blob store URL: file:///DIR or mem://");
  CLI::Option* consensus =
      app.add_option("--consensus", flags.consensus_url,
                     "Consensus URL: sqlite:///PATH/consensus.db or postgres://...");
  // A command that reads a location that exists: a mistyped path is an error, not a new, empty
  // location.
  const bool existing = use == StoreUse::kExisting;
  dir->type_name("DIR")->check(existing ? existing_persist_dir() : persist_dir());
  blob->type_name("URL")->check(blob_url(existing));
  consensus->type_name("URL")->check(consensus_url(existing));
  dir->excludes(blob)->excludes(consensus);
  blob->needs(consensus);
  consensus->needs(blob);
}

absl::Status check_store_exists(const StoreFlags& flags) {
  const auto check = [](const char* flag, const CLI::Validator& validator,
                        std::string value) -> absl::Status {
    if (value.empty()) return absl::OkStatus();
    const std::string error = validator(value);
    if (error.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", error));
  };
  WEIR_RETURN_IF_ERROR(check("--persist", existing_persist_dir(), flags.dir));
  WEIR_RETURN_IF_ERROR(check("--blob", blob_url(/*existing=*/true), flags.blob_url));
  return check("--consensus", consensus_url(/*existing=*/true), flags.consensus_url);
}

bool store_may_exist(const StoreFlags& flags) {
  std::error_code error;
  if (!flags.dir.empty()) {
    return std::filesystem::exists(std::filesystem::path(flags.dir) / "consensus.db", error);
  }
  constexpr std::string_view kSqlite = "sqlite://";
  if (flags.consensus_url.starts_with(kSqlite)) {
    return std::filesystem::exists(flags.consensus_url.substr(kSqlite.size()), error);
  }
  return true;
}

void add_reader_lease_flag(CLI::App& app, StoreFlags& flags) {
  app.add_option("--reader-lease", flags.reader_lease_s,
                 "Seconds without a heartbeat after which a reader this command leaves behind "
                 "(killed) stops holding the shard back")
      ->type_name("SECONDS")
      ->check(number_in(1, 86400))
      ->capture_default_str();
}

void add_pubsub_flag(CLI::App& app, std::string& address) {
  app.add_option("--pubsub", address,
                 "A `weir pubsub` (HOST:PORT) that tells other processes of this one's appends "
                 "and this one of theirs, so that readers need not poll")
      ->type_name("HOST:PORT")
      ->envname("WEIR_PUBSUB")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            const absl::Status valid = pubsub::check_address(value);
            return valid.ok() ? "" : std::string(valid.message());
          },
          ""));
}

std::shared_ptr<persist::UpperRelay> relay_for(const std::string& address) {
  if (address.empty()) return persist::process_relay();
  pubsub::GrpcRelayOptions options;
  options.address = address;
  options.on_connection = [address](bool connected, const std::string& why) {
    observe::log(connected ? observe::LogLevel::kInfo : observe::LogLevel::kWarn,
                 connected ? absl::StrCat("pubsub ", address, ": connected")
                           : absl::StrCat("pubsub ", address, ": lost (", why,
                                          "); readers poll until it is back"));
  };
  return std::make_shared<pubsub::GrpcUpperRelay>(std::move(options));
}

persist::PersistConfig store_config(const StoreFlags& flags) {
  persist::PersistConfig config;
  config.reader_lease = absl::Seconds(flags.reader_lease_s);
  config.relay = relay_for(flags.pubsub);
  return config;
}

absl::StatusOr<persist::PersistLocation> store_location(const StoreFlags& flags) {
  if (flags.dir.empty() && (flags.blob_url.empty() || flags.consensus_url.empty())) {
    return absl::InvalidArgumentError("give --persist DIR, or --blob URL and --consensus URL");
  }
  return flags.dir.empty() ? persist::PersistLocation{flags.blob_url, flags.consensus_url}
                           : persist::PersistLocation::in_directory(flags.dir);
}

absl::StatusOr<std::optional<sources::postgres::RelationDesc>> relation_of(
    persist::PersistClient& client, const std::string& shard) {
  const size_t dot = shard.find('.');
  if (dot == std::string::npos) return std::nullopt;
  const std::string kind = shard.substr(0, dot);
  WEIR_ASSIGN_OR_RETURN(auto schemas_shard, client.find_shard(kind + ".schemas"));
  if (!schemas_shard.has_value()) return std::nullopt;
  WEIR_ASSIGN_OR_RETURN(const auto schemas, ingest::read_schemas(client, kind));
  auto it = schemas.find(shard.substr(dot + 1));
  if (it == schemas.end()) return std::nullopt;
  return sources::postgres::RelationDesc::decode(it->second);
}

absl::Status append_row(const std::optional<sources::postgres::RelationDesc>& relation,
                        const std::string& shard, std::string_view data, std::string& line) {
  if (!relation || data.starts_with("!")) {
    line += escape(data);
    return absl::OkStatus();
  }
  const absl::Status printed = sources::postgres::print_row(*relation, data, line);
  if (!printed.ok()) {
    return absl::DataLossError(
        "shard " + shard +
        ": a row does not decode with its relation description: " + std::string(printed.message()));
  }
  return absl::OkStatus();
}

}  // namespace weir::tools
