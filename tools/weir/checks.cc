#include "checks.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "weir/observe/http_server.h"

namespace weir::tools {
namespace {

namespace fs = std::filesystem;

bool is_decimal(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "file" and "/d" of "file:///d"; nullopt without "://".
std::optional<std::pair<std::string_view, std::string_view>> split_url(std::string_view url) {
  const size_t at = url.find("://");
  if (at == std::string_view::npos) return std::nullopt;
  return std::pair(url.substr(0, at), url.substr(at + 3));
}

std::string in_quotes(const std::string& text) { return "\"" + text + "\""; }

}  // namespace

CLI::Validator unsigned_in(uint64_t min, uint64_t max) {
  const bool bounded = min != 0 || max != UINT64_MAX;
  const std::string expected =
      bounded ? absl::StrCat("expected a whole number from ", min, " to ", max)
              : std::string("expected a whole number (0 or more, digits only)");
  return CLI::Validator(
      [min, max, expected](std::string& input) -> std::string {
        uint64_t value = 0;
        if (!is_decimal(input) || !absl::SimpleAtoi(input, &value) || value < min || value > max) {
          return absl::StrCat(expected, ", got ", in_quotes(input));
        }
        input = std::to_string(value);  // "010" is 10, not octal 8 as CLI11 would read it.
        return "";
      },
      bounded ? absl::StrCat(min, "..", max) : "");
}

CLI::Validator worker_count() { return unsigned_in(1, kMaxWorkers); }

CLI::Validator number_in(double min, double max) {
  const bool unbounded = max == std::numeric_limits<double>::max();
  const std::string expected = unbounded
                                   ? absl::StrCat("expected a number from ", min, " up")
                                   : absl::StrCat("expected a number from ", min, " to ", max);
  return CLI::Validator(
      [min, max, expected](std::string& input) -> std::string {
        char* end = nullptr;
        const double value = input.empty() || std::isspace(static_cast<unsigned char>(input[0]))
                                 ? std::nan("")
                                 : std::strtod(input.c_str(), &end);
        if (end != input.c_str() + input.size() || !std::isfinite(value) || value < min ||
            value > max) {
          return absl::StrCat(expected, ", got ", in_quotes(input));
        }
        return "";
      },
      unbounded ? absl::StrCat(min, "..") : absl::StrCat(min, "..", max));
}

CLI::Validator non_empty() {
  return CLI::Validator(
      [](std::string& input) -> std::string { return input.empty() ? "must not be empty" : ""; },
      "");
}

CLI::Validator one_of(std::initializer_list<std::string> names) {
  std::vector<std::string> all(names);
  return CLI::Validator(
      [all](std::string& input) -> std::string {
        if (std::find(all.begin(), all.end(), input) != all.end()) return "";
        return absl::StrCat(in_quotes(input), " is not one of ", absl::StrJoin(all, ", "));
      },
      absl::StrCat("{", absl::StrJoin(all, ","), "}"));
}

CLI::Validator name_and_number(char separator, const std::string& what) {
  return CLI::Validator(
      [separator, what](std::string& input) -> std::string {
        const size_t at = input.find(separator);
        uint64_t value = 0;
        if (at == 0 || at == std::string::npos || !is_decimal(input.substr(at + 1)) ||
            !absl::SimpleAtoi(input.substr(at + 1), &value)) {
          return absl::StrCat("expected ", what, ", got ", in_quotes(input));
        }
        return "";
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
