#include "weir/observe/log.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include <spdlog/details/log_msg.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

namespace weir::observe {
namespace {

thread_local std::string log_origin = "main";

// %* in the pattern: this thread's origin ("w1", "main").
class OriginFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    dest.append(log_origin.data(), log_origin.data() + log_origin.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<OriginFlag>();
  }
};

// Formatted lines to a function, or to stderr.
class OutputSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void set_output(std::function<void(const std::string&)> output) {
    std::lock_guard<std::mutex> lock(this->mutex_);
    output_ = std::move(output);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    spdlog::memory_buf_t formatted;
    this->formatter_->format(message, formatted);
    std::string line(formatted.data(), formatted.size());
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (output_) {
      output_(line);
    } else {
      line.push_back('\n');
      std::fwrite(line.data(), 1, line.size(), stderr);
    }
  }
  void flush_() override { std::fflush(stderr); }

 private:
  std::function<void(const std::string&)> output_;
};

struct Logging {
  std::shared_ptr<OutputSink> sink = std::make_shared<OutputSink>();
  std::shared_ptr<spdlog::logger> logger;
  Logging() {
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<OriginFlag>('*').set_pattern("%Y-%m-%d %H:%M:%S.%e %-5l [%*] %v");
    sink->set_formatter(std::move(formatter));
    logger = std::make_shared<spdlog::logger>("weir", sink);
    logger->set_level(spdlog::level::info);
    logger->flush_on(spdlog::level::trace);
  }
};

Logging& logging() {
  static Logging* l = new Logging;  // Never destroyed: threads may log during exit.
  return *l;
}

spdlog::level::level_enum to_spdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return spdlog::level::trace;
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
    case LogLevel::kOff:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}

}  // namespace

absl::StatusOr<LogLevel> parse_log_level(std::string_view text, std::string_view source) {
  static constexpr std::pair<std::string_view, LogLevel> kLevels[] = {
      {"trace", LogLevel::kTrace}, {"debug", LogLevel::kDebug},  {"info", LogLevel::kInfo},
      {"warn", LogLevel::kWarn},   {"warning", LogLevel::kWarn}, {"error", LogLevel::kError},
      {"off", LogLevel::kOff}};
  for (const auto& [name, level] : kLevels) {
    if (text == name) return level;
  }
  return absl::InvalidArgumentError(absl::StrCat(std::string(source), "='", std::string(text),
                                                 "': expected trace, debug, info, warn (or "
                                                 "warning, as lines print it), error or off"));
}

absl::Status init_logging(const std::optional<std::string>& flag) {
  LogLevel level = LogLevel::kInfo;
  if (flag) {
    auto parsed = parse_log_level(*flag, "--log-level");
    if (!parsed.ok()) return parsed.status();
    level = *parsed;
  } else if (const char* env = std::getenv("WEIR_LOG_LEVEL");  // NOLINT(concurrency-mt-unsafe)
             env != nullptr && *env != '\0') {
    auto parsed = parse_log_level(env, "WEIR_LOG_LEVEL");
    if (!parsed.ok()) return parsed.status();
    level = *parsed;
  }
  logging().logger->set_level(to_spdlog(level));
  return absl::OkStatus();
}

void set_log_output(std::function<void(const std::string&)> output) {
  logging().sink->set_output(std::move(output));
}

void set_log_worker(size_t worker) { log_origin = absl::StrCat("w", worker); }

bool log_enabled(LogLevel level) { return logging().logger->should_log(to_spdlog(level)); }

void log(LogLevel level, std::string_view message) {
  logging().logger->log(to_spdlog(level), "{}", message);
}

}  // namespace weir::observe
