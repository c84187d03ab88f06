#include "weir/worker/logging.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "log_file.h"
#include <fcntl.h>
#include <unistd.h>

#include "weir/errno_message.h"

namespace weir {
namespace {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

// Event times count from the process's first logged event, so the workers' times compare.
std::chrono::nanoseconds since_epoch(std::chrono::steady_clock::time_point now) {
  static const std::chrono::steady_clock::time_point epoch = now;
  return now - epoch;
}

void append_string(std::string_view text, std::string& out) {
  out.push_back('"');
  for (char c : text) {
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\t':
        out.append("\\t");
        break;
      case '\r':
        out.append("\\r");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static constexpr char kHex[] = "0123456789abcdef";
          out.append("\\u00");
          out.push_back(kHex[(c >> 4) & 0xf]);
          out.push_back(kHex[c & 0xf]);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

void append_address(std::span<const size_t> address, std::string& out) {
  out.push_back('[');
  for (size_t i = 0; i < address.size(); ++i) {
    if (i > 0) out.push_back(',');
    absl::StrAppend(&out, address[i]);
  }
  out.push_back(']');
}

const char* boolean(bool b) { return b ? "true" : "false"; }

}  // namespace

std::string_view kind_name(const LogEventData& data) {
  return std::visit(
      Overloaded{
          [](const OperatorBuilt&) { return std::string_view("operator_built"); },
          [](const OperatorDropped&) { return std::string_view("operator_dropped"); },
          [](const ScheduleStart&) { return std::string_view("schedule_start"); },
          [](const ScheduleStop&) { return std::string_view("schedule_stop"); },
          [](const Messages&) { return std::string_view("messages"); },
          [](const ProgressBatch&) { return std::string_view("progress"); },
          [](const Park&) { return std::string_view("park"); },
          [](const Unpark&) { return std::string_view("unpark"); },
          [](const DataflowCreated&) { return std::string_view("dataflow_created"); },
          [](const DataflowCompleted&) { return std::string_view("dataflow_completed"); },
          [](const DataflowDropped&) { return std::string_view("dataflow_dropped"); },
          [](const ChannelBuilt&) { return std::string_view("channel_built"); },
          [](const ChannelDropped&) { return std::string_view("channel_dropped"); },
      },
      data);
}

void append_json(const LogEvent& event, std::string& out) {
  absl::StrAppend(&out, "{\"time_ns\":", event.time.count(), ",\"worker\":", event.worker,
                  ",\"event\":\"");
  out.append(kind_name(event.data));
  out.push_back('"');
  std::visit(Overloaded{
                 [&](const OperatorBuilt& e) {
                   absl::StrAppend(&out, ",\"id\":", e.id, ",\"address\":");
                   append_address(e.address, out);
                   out.append(",\"name\":");
                   append_string(e.name, out);
                 },
                 [&](const OperatorDropped& e) {
                   absl::StrAppend(&out, ",\"id\":", e.id, ",\"address\":");
                   append_address(e.address, out);
                 },
                 [&](const ScheduleStart& e) { absl::StrAppend(&out, ",\"id\":", e.id); },
                 [&](const ScheduleStop& e) {
                   absl::StrAppend(&out, ",\"id\":", e.id, ",\"duration_ns\":", e.duration.count());
                 },
                 [&](const Messages& e) {
                   absl::StrAppend(&out, ",\"is_send\":", boolean(e.is_send),
                                   ",\"channel\":", e.channel, ",\"source\":", e.source,
                                   ",\"target\":", e.target, ",\"records\":", e.records,
                                   ",\"bytes\":", e.bytes);
                 },
                 [&](const ProgressBatch& e) {
                   absl::StrAppend(&out, ",\"is_send\":", boolean(e.is_send),
                                   ",\"channel\":", e.channel, ",\"source\":", e.source,
                                   ",\"updates\":", e.updates, ",\"nested\":", e.nested);
                 },
                 [&](const Park& e) {
                   if (e.timeout) {
                     absl::StrAppend(&out, ",\"timeout_ns\":", e.timeout->count());
                   } else {
                     out.append(",\"timeout_ns\":null");
                   }
                 },
                 [&](const Unpark&) {},
                 [&](const DataflowCreated& e) {
                   absl::StrAppend(&out, ",\"index\":", e.index, ",\"name\":");
                   append_string(e.name, out);
                 },
                 [&](const DataflowCompleted& e) { absl::StrAppend(&out, ",\"index\":", e.index); },
                 [&](const DataflowDropped& e) { absl::StrAppend(&out, ",\"index\":", e.index); },
                 [&](const ChannelBuilt& e) {
                   absl::StrAppend(&out, ",\"id\":", e.id, ",\"scope\":");
                   append_address(e.scope, out);
                   absl::StrAppend(&out, ",\"source\":[", e.source, ",", e.source_port,
                                   "],\"target\":[", e.target, ",", e.target_port, "],\"pact\":");
                   append_string(e.pact, out);
                 },
                 [&](const ChannelDropped& e) { absl::StrAppend(&out, ",\"id\":", e.id); },
             },
             event.data);
  out.push_back('}');
}

Logger& Logger::inactive() {
  static Logger* const logger = new Logger(0);  // Never destroyed: channel ends may outlive it.
  return *logger;
}

void Logger::set_sink(LogSink sink) {
  LogSink old = std::exchange(sink_, std::move(sink));
  active_ = static_cast<bool>(sink_);
  starts_.clear();
}

void Logger::add_sink(LogSink sink) {
  if (!sink) return;
  if (!sink_) {
    set_sink(std::move(sink));
    return;
  }
  sink_ = [first = std::move(sink_), second = std::move(sink)](const LogEvent& event) {
    first(event);
    second(event);
  };
}

void Logger::log(const LogEventData& data) {
  // A batch takes the time of the worker's last timed event (the start of the operator run it is
  // sent or received in, mostly): one clock read less per batch, the most frequent event.
  if (!std::holds_alternative<Messages>(data) || last_time_.count() == 0) {
    last_time_ = since_epoch(std::chrono::steady_clock::now());
  }
  sink_(LogEvent{worker_, last_time_, data});
}

void Logger::schedule_start(uint64_t id) {
  const auto now = std::chrono::steady_clock::now();
  starts_.push_back(now);
  last_time_ = since_epoch(now);
  sink_(LogEvent{worker_, last_time_, ScheduleStart{id}});
}

void Logger::schedule_stop(uint64_t id) {
  const auto now = std::chrono::steady_clock::now();
  std::chrono::nanoseconds duration{0};
  if (!starts_.empty()) {  // Empty if the sink was set while the operator ran.
    duration = now - starts_.back();
    starts_.pop_back();
  }
  last_time_ = since_epoch(now);
  sink_(LogEvent{worker_, last_time_, ScheduleStop{id, duration}});
}

void Logger::operators_built(std::span<const size_t> scope_path, std::span<const std::string> names,
                             std::vector<uint64_t>& ids) {
  ids.assign(names.size(), 0);
  for (size_t node = 1; node < names.size(); ++node) ids[node] = next_operator_id_++;
  if (!active_) return;
  address_.assign(scope_path.begin(), scope_path.end());
  address_.push_back(0);
  for (size_t node = 1; node < names.size(); ++node) {
    address_.back() = node;
    log(OperatorBuilt{ids[node], address_, names[node]});
  }
}

void Logger::operators_dropped(std::span<const size_t> scope_path, std::span<const uint64_t> ids) {
  if (!active_) return;
  address_.assign(scope_path.begin(), scope_path.end());
  address_.push_back(0);
  for (size_t node = 1; node < ids.size(); ++node) {
    address_.back() = node;
    log(OperatorDropped{ids[node], address_});
  }
}

namespace internal {

absl::StatusOr<std::shared_ptr<LogFile>> LogFile::open(std::string path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat("WEIR_LOG: cannot open '", path,
                                                   "' for writing: ", weir::errno_message(errno)));
  }
  return std::make_shared<LogFile>(std::move(path), fd);
}

LogFile::~LogFile() { ::close(fd_); }

void LogFile::write(std::string_view lines) {
  weir::MutexLock lock(mu_);
  while (!lines.empty() && status_.ok()) {
    const ssize_t n = ::write(fd_, lines.data(), lines.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      status_ = absl::InternalError(
          absl::StrCat("WEIR_LOG: writing '", path_, "' failed: ", weir::errno_message(errno)));
      return;
    }
    lines.remove_prefix(static_cast<size_t>(n));
  }
}

absl::Status LogFile::status() const {
  weir::MutexLock lock(mu_);
  return status_;
}

LogSink LogFile::sink() {
  // The buffer flushes when the sink (held by the worker's logger) is destroyed.
  struct Writer {
    explicit Writer(std::shared_ptr<LogFile> f) : file(std::move(f)) {}
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;
    ~Writer() {
      if (!buffer.empty()) file->write(buffer);
    }
    std::shared_ptr<LogFile> file;
    std::string buffer;
  };
  auto writer = std::make_shared<Writer>(shared_from_this());
  return [writer](const LogEvent& event) {
    append_json(event, writer->buffer);
    writer->buffer.push_back('\n');
    if (writer->buffer.size() >= kLogFlushBytes) {
      writer->file->write(writer->buffer);
      writer->buffer.clear();
    }
  };
}

std::string log_path_from_env() {
  const char* value = std::getenv("WEIR_LOG");  // NOLINT(concurrency-mt-unsafe): read-only
  return value == nullptr ? std::string() : std::string(value);
}

}  // namespace internal
}  // namespace weir
