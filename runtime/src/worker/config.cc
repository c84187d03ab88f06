#include "weir/worker/config.h"

#include <charconv>
#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace weir {

// --operator-timeout-ms beyond this (about 11.6 days) would overflow the watchdog's clock sums.
constexpr uint64_t kMaxOperatorTimeoutMs = 1'000'000'000;

namespace {

absl::StatusOr<size_t> parse_count(const std::string& flag, const std::string& value) {
  size_t result = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, result);
  if (ec != std::errc() || ptr != end || value.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag ", flag, " expects a non-negative integer, got '", value, "'"));
  }
  return result;
}

// "1"/"true" or "0"/"false" (also empty: false), the value of a switch or variable `what`.
absl::StatusOr<bool> parse_bool(const std::string& what, const std::string& value) {
  if (value == "1" || value == "true") return true;
  if (value == "0" || value == "false" || value.empty()) return false;
  return absl::InvalidArgumentError(
      absl::StrCat(what, " expects 1, true, 0 or false, got '", value, "'"));
}

}  // namespace

absl::StatusOr<Config> Config::from_args(std::vector<std::string>& args) {
  Config config;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read once at start-up; weir never sets the environment.
  if (const char* id = std::getenv("WEIR_CLUSTER_ID"); id != nullptr) config.cluster_id = id;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): as above.
  if (const char* inc = std::getenv("WEIR_INCARNATION"); inc != nullptr) {
    auto parsed = parse_count("$WEIR_INCARNATION", inc);
    if (!parsed.ok()) return parsed.status();
    config.incarnation = *parsed;
  }
  // NOLINTNEXTLINE(concurrency-mt-unsafe): as above.
  if (const char* secret = std::getenv("WEIR_CLUSTER_SECRET"); secret != nullptr) {
    config.cluster_secret = secret;
  }
  // NOLINTNEXTLINE(concurrency-mt-unsafe): as above.
  if (const char* file = std::getenv("WEIR_CLUSTER_SECRET_FILE"); file != nullptr) {
    config.cluster_secret_file = file;
  }
  // NOLINTNEXTLINE(concurrency-mt-unsafe): as above.
  if (const char* insecure = std::getenv("WEIR_INSECURE_LINKS"); insecure != nullptr) {
    auto parsed = parse_bool("$WEIR_INSECURE_LINKS", insecure);
    if (!parsed.ok()) return parsed.status();
    config.insecure_links = *parsed;
  }
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    std::string flag = arg, value;
    bool has_value = false;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_value = true;
    }
    if (flag == "--insecure-links") {  // A switch: a value only as --insecure-links=VALUE.
      auto parsed = has_value ? parse_bool("flag " + flag, value) : absl::StatusOr<bool>(true);
      if (!parsed.ok()) return parsed.status();
      config.insecure_links = *parsed;
      continue;
    }
    const bool known = flag == "-w" || flag == "--workers" || flag == "-n" ||
                       flag == "--processes" || flag == "-p" || flag == "--process" ||
                       flag == "-h" || flag == "--hostfile" || flag == "--cluster-id" ||
                       flag == "--incarnation" || flag == "--heartbeat-timeout-ms" ||
                       flag == "--startup-timeout-ms" || flag == "--operator-timeout-ms" ||
                       flag == "--tls-cert" || flag == "--tls-key" || flag == "--tls-ca" ||
                       flag == "--cluster-secret-file" || flag == "--flow-window-bytes";
    if (!known) {
      rest.push_back(arg);
      continue;
    }
    if (!has_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("flag ", flag, " expects a value"));
      }
      value = args[++i];
    }
    if (flag == "-h" || flag == "--hostfile") {
      config.hostfile = value;
      continue;
    }
    if (flag == "--cluster-id") {
      config.cluster_id = value;
      continue;
    }
    if (flag == "--cluster-secret-file") {
      config.cluster_secret_file = value;
      continue;
    }
    if (flag == "--tls-cert" || flag == "--tls-key" || flag == "--tls-ca") {
      (flag == "--tls-cert"  ? config.tls_cert
       : flag == "--tls-key" ? config.tls_key
                             : config.tls_ca) = value;
      continue;
    }
    auto count = parse_count(flag, value);
    if (!count.ok()) return count.status();
    if (flag == "-w" || flag == "--workers") {
      if (*count == 0) return absl::InvalidArgumentError("flag -w/--workers must be at least 1");
      config.workers = *count;
    } else if (flag == "-n" || flag == "--processes") {
      if (*count == 0) return absl::InvalidArgumentError("flag -n/--processes must be at least 1");
      config.processes = *count;
    } else if (flag == "--incarnation") {
      config.incarnation = *count;
    } else if (flag == "--heartbeat-timeout-ms") {
      config.heartbeat_timeout = std::chrono::milliseconds(*count);
    } else if (flag == "--startup-timeout-ms") {
      config.startup_timeout = std::chrono::milliseconds(*count);
    } else if (flag == "--operator-timeout-ms") {
      if (*count > kMaxOperatorTimeoutMs) {
        return absl::InvalidArgumentError(absl::StrCat("flag --operator-timeout-ms is at most ",
                                                       kMaxOperatorTimeoutMs, " (0 turns it off)"));
      }
      config.operator_timeout = std::chrono::milliseconds(*count);
    } else if (flag == "--flow-window-bytes") {
      config.flow_window_bytes = *count;
    } else {
      config.process = *count;
    }
  }
  args = std::move(rest);
  if (config.process >= config.processes) {
    return absl::InvalidArgumentError(absl::StrCat("process index -p ", config.process,
                                                   " is out of range for -n ", config.processes));
  }
  return config;
}

absl::StatusOr<Config> Config::from_args(int& argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto config = from_args(args);
  if (!config.ok()) return config;
  // The remaining arguments are a subsequence of argv: keep them, in order.
  int out = 1;
  size_t next = 0;
  for (int i = 1; i < argc && next < args.size(); ++i) {
    if (args[next] == argv[i]) {
      argv[out++] = argv[i];
      ++next;
    }
  }
  argc = out;
  argv[argc] = nullptr;
  return config;
}

absl::Status Config::validate() const {
  if (workers == 0) return absl::InvalidArgumentError("at least one worker is required");
  if (operator_timeout.count() > static_cast<int64_t>(kMaxOperatorTimeoutMs)) {
    return absl::InvalidArgumentError(absl::StrCat("the operator timeout is at most ",
                                                   kMaxOperatorTimeoutMs, " ms (0 turns it off)"));
  }
  if (flow_window_bytes > kMaxFlowWindowBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the flow window (--flow-window-bytes) is at most ", kMaxFlowWindowBytes,
                     " bytes (0 turns flow control off)"));
  }
  if (process >= processes) {
    return absl::InvalidArgumentError("process index -p " + std::to_string(process) +
                                      " is out of range for -n " + std::to_string(processes));
  }
  if (processes > 1 && !transport) {
    return absl::UnimplementedError(
        "multi-process execution (-n " + std::to_string(processes) +
        ") needs the cluster transport: link weir::protocol and run through "
        "weir::cluster::execute (weir/protocol/cluster.h); this program runs one process with -w "
        "workers");
  }
  return absl::OkStatus();
}

}  // namespace weir
