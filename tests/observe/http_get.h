// Test helpers for the observability endpoints: a minimal HTTP/1.1 GET over a socket, raw
// requests for hostile-client tests, a strict reader of Prometheus' text exposition format, and
// a raw server for hostile-server tests.

#pragma once

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace weir::observe::testing {

// A connected socket to 127.0.0.1:port, or -1.
inline int connect_local(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends `request` as is and reads until the server closes or `timeout`; the raw response.
inline std::string raw_exchange(int port, const std::string& request,
                                std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const int fd = connect_local(port);
  if (fd < 0) return "";
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string response;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[65536];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    response.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return response;
}

struct HttpResult {
  int status = 0;  // 0: no answer.
  std::string headers, body;
};

inline HttpResult http_get(int port, const std::string& path) {
  const std::string raw = raw_exchange(
      port, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  HttpResult result;
  const size_t end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) return result;
  result.status = std::atoi(raw.c_str() + 9);
  result.headers = raw.substr(0, end);
  result.body = raw.substr(end + 4);
  return result;
}

// One sample of the exposition: name, labels, value.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Parses Prometheus' text format (version 0.0.4) strictly: HELP and TYPE lines, samples with
// label sets, escapes, values; a family's TYPE before its samples and at most once; histogram
// buckets cumulative with a +Inf bucket equal to _count. Returns the samples, or an error line.
inline std::optional<std::vector<Sample>> parse_prometheus(const std::string& text,
                                                           std::string* error) {
  static const std::regex name_re("[a-zA-Z_:][a-zA-Z0-9_:]*");
  static const std::regex label_name_re("[a-zA-Z_][a-zA-Z0-9_]*");
  std::vector<Sample> samples;
  std::map<std::string, std::string> types;
  std::set<std::string> sampled;
  auto fail = [&](const std::string& line, const std::string& why) {
    *error = why + ": '" + line + "'";
    return std::nullopt;
  };
  auto family_of = [&](const std::string& name) {
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
        std::string base = name.substr(0, name.size() - s.size());
        if (types.count(base) && types[base] == "histogram") return base;
      }
    }
    return name;
  };
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream words(line);
      std::string hash, kind, name;
      words >> hash >> kind >> name;
      if (kind == "TYPE") {
        std::string type;
        words >> type;
        if (!std::regex_match(name, name_re)) return fail(line, "bad metric name");
        if (type != "counter" && type != "gauge" && type != "histogram" && type != "summary" &&
            type != "untyped") {
          return fail(line, "unknown type");
        }
        if (types.count(name)) return fail(line, "second TYPE line");
        if (sampled.count(name)) return fail(line, "TYPE after samples");
        types[name] = type;
      } else if (kind == "HELP") {
        if (!std::regex_match(name, name_re)) return fail(line, "bad metric name");
      }
      continue;
    }
    Sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    if (!std::regex_match(s.name, name_re)) return fail(line, "bad metric name");
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos) return fail(line, "label without '='");
        const std::string label = line.substr(i, eq - i);
        if (!std::regex_match(label, label_name_re)) return fail(line, "bad label name");
        i = eq + 1;
        if (i >= line.size() || line[i] != '"') return fail(line, "unquoted label value");
        ++i;
        std::string value;
        for (;; ++i) {
          if (i >= line.size()) return fail(line, "unterminated label value");
          if (line[i] == '"') break;
          if (line[i] == '\\') {
            ++i;
            if (i >= line.size()) return fail(line, "dangling escape");
            if (line[i] == 'n') {
              value.push_back('\n');
            } else if (line[i] == '\\' || line[i] == '"') {
              value.push_back(line[i]);
            } else {
              return fail(line, "unknown escape");
            }
            continue;
          }
          value.push_back(line[i]);
        }
        ++i;
        if (s.labels.count(label)) return fail(line, "label twice");
        s.labels[label] = value;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) return fail(line, "unterminated label set");
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') return fail(line, "no value");
    const std::string value = line.substr(i + 1);
    std::istringstream words(value);
    std::string number, timestamp, extra;
    words >> number >> timestamp >> extra;
    if (!extra.empty()) return fail(line, "trailing text");
    if (number == "+Inf") {
      s.value = INFINITY;
    } else if (number == "-Inf") {
      s.value = -INFINITY;
    } else if (number == "NaN") {
      s.value = NAN;
    } else {
      char* end = nullptr;
      s.value = std::strtod(number.c_str(), &end);
      if (number.empty() || *end != '\0') return fail(line, "value is not a number");
    }
    const std::string family = family_of(s.name);
    if (!types.count(family)) return fail(line, "sample without a TYPE line");
    if (types[family] == "counter" && !(s.value >= 0)) return fail(line, "negative counter");
    sampled.insert(family);
    samples.push_back(std::move(s));
  }
  // Histograms: buckets cumulative, +Inf == _count.
  for (const auto& [family, type] : types) {
    if (type != "histogram") continue;
    double last = 0, inf = -1, count = -1;
    for (const auto& s : samples) {
      if (s.name == family + "_bucket") {
        if (!s.labels.count("le")) {
          *error = family + ": a bucket without le";
          return std::nullopt;
        }
        if (s.value < last) {
          *error = family + ": buckets not cumulative";
          return std::nullopt;
        }
        last = s.value;
        if (s.labels.at("le") == "+Inf") inf = s.value;
      }
      if (s.name == family + "_count") count = s.value;
    }
    if (inf < 0 || inf != count) {
      *error = family + ": no +Inf bucket, or it differs from _count";
      return std::nullopt;
    }
  }
  return samples;
}

// The value of the sample `name` whose labels include `labels`, if there is one.
inline std::optional<double> sample_value(const std::vector<Sample>& samples,
                                          const std::string& name,
                                          const std::map<std::string, std::string>& labels = {}) {
  for (const auto& s : samples) {
    if (s.name != name) continue;
    bool match = true;
    for (const auto& [k, v] : labels) {
      auto it = s.labels.find(k);
      match &= it != s.labels.end() && it->second == v;
    }
    if (match) return s.value;
  }
  return std::nullopt;
}

// A hostile or broken HTTP server for clients' tests, on 127.0.0.1 (a free port): every
// connection gets a thread that reads the request head and calls `respond(path, connection)`,
// which writes what it likes (RawServer::send_all) and may wait (RawServer::pause) before
// returning; the connection is closed then. The destructor ends pauses, closes every connection
// and joins.
class RawServer {
 public:
  using Respond = std::function<void(const std::string& path, int fd, RawServer& server)>;

  explicit RawServer(Respond respond) : respond_(std::move(respond)) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(addr);
    if (listener_ < 0 || bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(listener_, 64) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &size) != 0) {
      return;
    }
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~RawServer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = true;
      for (int fd : open_) shutdown(fd, SHUT_RDWR);
    }
    stop_.notify_all();
    shutdown(listener_, SHUT_RDWR);
    if (acceptor_.joinable()) acceptor_.join();
    for (auto& t : connections_) t.join();
    close(listener_);
  }
  RawServer(const RawServer&) = delete;
  RawServer& operator=(const RawServer&) = delete;

  int port() const { return port_; }  // 0: it could not listen.

  // Writes all of `data`; false once the peer is gone or the server stops.
  static bool send_all(int fd, std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // Waits `d`; false if the server stopped meanwhile.
  bool pause(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mu_);
    return !stop_.wait_for(lock, d, [&] { return stopped_; });
  }

 private:
  void accept_loop() {
    for (;;) {
      const int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) {
        close(fd);
        return;
      }
      open_.push_back(fd);
      connections_.emplace_back([this, fd] { serve(fd); });
    }
  }
  void serve(int fd) {
    std::string head;
    char buffer[4096];
    while (head.find("\r\n\r\n") == std::string::npos && head.size() < 65536) {
      const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      head.append(buffer, static_cast<size_t>(n));
    }
    const size_t first = head.find(' '), second = head.find(' ', first + 1);
    if (first != std::string::npos && second != std::string::npos) {
      respond_(head.substr(first + 1, second - first - 1), fd, *this);
    }
    std::lock_guard<std::mutex> lock(mu_);
    std::erase(open_, fd);
    close(fd);
  }

  Respond respond_;
  int listener_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable stop_;
  bool stopped_ = false;
  std::vector<int> open_;
  std::vector<std::thread> connections_;
};

}  // namespace weir::observe::testing
