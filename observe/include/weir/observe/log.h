// Logs of weir's commands, through spdlog: one line per event on stderr (or where the command
// sends them, such as above its live display), with the time, the level, where the line comes
// from (`w1`: worker 1's thread; `main` otherwise) and the message:
//
//   2026-12-03 13:52:01.123 info  [w1] bids: snapshot durable after 1.2 s
//
// The level is the first of --log-level, WEIR_LOG_LEVEL and `info` that is set: trace, debug,
// info, warn, error or off; lines below it are dropped before they are formatted.
//
//   WEIR_RETURN_IF_ERROR(weir::observe::init_logging(flag));
//   weir::observe::log(weir::observe::LogLevel::kInfo, "starting");
//
// Thread safety: everything here may be called from any thread; set_log_worker is per thread.

#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace weir::observe {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kOff };

// "trace" .. "off" (case as written); InvalidArgument naming `source` (the flag or variable)
// and the accepted words otherwise.
absl::StatusOr<LogLevel> parse_log_level(std::string_view text, std::string_view source);

// Sets the level from `flag` (--log-level, if given) or WEIR_LOG_LEVEL. Call once, early.
absl::Status init_logging(const std::optional<std::string>& flag);

// Where formatted lines go (each without its newline); null: stderr.
void set_log_output(std::function<void(const std::string&)> output);

// Lines logged by this thread carry `w<worker>`.
void set_log_worker(size_t worker);

bool log_enabled(LogLevel level);
void log(LogLevel level, std::string_view message);

}  // namespace weir::observe
