#include "checks.h"

#include <filesystem>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "weir/observe/http_server.h"
#include "weir/value_checks.h"

namespace weir::tools {
namespace {

namespace fs = std::filesystem;

// "file" and "/d" of "file:///d"; nullopt without "://".
std::optional<std::pair<std::string_view, std::string_view>> split_url(std::string_view url) {
  const size_t at = url.find("://");
  if (at == std::string_view::npos) return std::nullopt;
  return std::pair(url.substr(0, at), url.substr(at + 3));
}

std::string in_quotes(const std::string& text) { return "\"" + text + "\""; }

// The message of a failed check ("" for none): CLI11 puts the option's name before it.
std::string message(const absl::Status& status) { return std::string(status.message()); }

}  // namespace

CLI::Validator unsigned_in(uint64_t min, uint64_t max) {
  const bool bounded = min != 0 || max != UINT64_MAX;
  return CLI::Validator(
      [min, max](std::string& input) { return message(check_unsigned(input, min, max)); },
      bounded ? absl::StrCat(min, "..", max) : "");
}

CLI::Validator worker_count() { return unsigned_in(1, kMaxWorkers); }

CLI::Validator number_in(double min, double max) {
  const bool unbounded = max == std::numeric_limits<double>::max();
  return CLI::Validator(
      [min, max](std::string& input) { return message(check_number(input, min, max)); },
      unbounded ? absl::StrCat(min, "..") : absl::StrCat(min, "..", max));
}

CLI::Validator non_empty() {
  return CLI::Validator([](std::string& input) { return message(check_non_empty(input)); }, "");
}

CLI::Validator one_of(std::initializer_list<std::string> names) {
  std::vector<std::string> all(names);
  return CLI::Validator([all](std::string& input) { return message(check_one_of(input, all)); },
                        absl::StrCat("{", absl::StrJoin(all, ","), "}"));
}

CLI::Validator name_and_number(char separator, const std::string& what) {
  return CLI::Validator(
      [separator, what](std::string& input) {
        return message(check_name_and_number(input, separator, what));
      },
      "");
}

CLI::Validator persist_dir() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        if (input.empty()) return "must not be empty";
        std::error_code error;
        if (fs::exists(input, error) && !fs::is_directory(input, error)) {
          return absl::StrCat(in_quotes(input), " is not a directory");
        }
        return "";
      },
      "");
}

CLI::Validator existing_persist_dir() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        if (input.empty()) return "must not be empty";
        std::error_code error;
        const std::string no = absl::StrCat("no persist location at ", input);
        if (!fs::exists(input, error)) return no + " (no such directory)";
        if (!fs::is_directory(input, error)) return no + " (not a directory)";
        if (!fs::exists(fs::path(input) / "consensus.db", error)) {
          return no +
                 " (no consensus.db in it: is it the directory `weir ingest --persist` was "
                 "given?)";
        }
        return "";
      },
      "");
}

CLI::Validator blob_url(bool existing) {
  return CLI::Validator(
      [existing](std::string& input) -> std::string {
        if (input.empty()) return "must not be empty";
        const auto url = split_url(input);
        if (url && url->first == "mem") return "";
        if (url && url->first == "file" && !url->second.empty()) {
          std::error_code error;
          if (existing && !fs::is_directory(std::string(url->second), error)) {
            return absl::StrCat("no blob store at ", input, " (no such directory)");
          }
          return "";
        }
        return absl::StrCat("expected file:///DIR or mem://[NAME], got ", in_quotes(input));
      },
      "");
}

CLI::Validator consensus_url(bool existing) {
  return CLI::Validator(
      [existing](std::string& input) -> std::string {
        if (input.empty()) return "must not be empty";
        const auto url = split_url(input);
        if (url &&
            (url->first == "mem" || url->first == "postgres" || url->first == "postgresql")) {
          return "";
        }
        if (url && url->first == "sqlite" && !url->second.empty()) {
          std::error_code error;
          if (existing && !fs::is_regular_file(std::string(url->second), error)) {
            return absl::StrCat("no consensus at ", input, " (no such file)");
          }
          return "";
        }
        return absl::StrCat("expected sqlite:///PATH, postgres://... or mem://[NAME], got ",
                            in_quotes(input));
      },
      "");
}

CLI::Validator http_address() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        const absl::StatusOr<std::string> address = observe::parse_http_address(input);
        if (address.ok()) return "";
        std::string message(address.status().message());
        if (message.rfind("--http ", 0) == 0) message.erase(0, 7);  // CLI11 names the option.
        return message;
      },
      "");
}

}  // namespace weir::tools
