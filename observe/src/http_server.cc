#include "weir/observe/http_server.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include <civetweb.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "weir/errno_message.h"

namespace weir::observe {
namespace {

void init_civetweb_once() {
  static std::once_flag once;
  std::call_once(once, [] { mg_init_library(0); });
}

void send(mg_connection* connection, const HttpResponse& response, bool head) {
  mg_response_header_start(connection, response.status);
  mg_response_header_add(connection, "Content-Type", response.content_type.c_str(), -1);
  const std::string length = std::to_string(response.body.size());
  mg_response_header_add(connection, "Content-Length", length.c_str(), -1);
  mg_response_header_add(connection, "Cache-Control", "no-store", -1);
  mg_response_header_add(connection, "X-Content-Type-Options", "nosniff", -1);
  mg_response_header_send(connection);
  if (!head && !response.body.empty()) {
    mg_write(connection, response.body.data(), response.body.size());
  }
}

}  // namespace

absl::StatusOr<std::string> parse_http_address(std::string_view flag) {
  auto invalid = [&](std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http '", std::string(flag), "': ", std::string(why),
        "; expected PORT (on loopback), HOST:PORT or [IPV6]:PORT, with PORT in 0..65535"));
  };
  std::string_view host = "127.0.0.1", port = flag;
  if (const size_t colon = flag.rfind(':'); colon != std::string_view::npos) {
    host = flag.substr(0, colon);
    port = flag.substr(colon + 1);
    if (host.empty()) host = "127.0.0.1";
    if (host.front() == '[' && host.back() != ']') return invalid("an unclosed '['");
    if (host.front() != '[' && host.find(':') != std::string_view::npos) {
      return invalid("an IPv6 host must be in brackets");
    }
  }
  unsigned value = 0;
  const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || error != std::errc() || end != port.data() + port.size()) {
    return invalid("the port is not a number");
  }
  if (value > 65535) return invalid("the port is out of range");
  for (const char c : host) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ||
                    c == ':' || c == '[' || c == ']';
    if (!ok) return invalid("the host has a character that no host name or address has");
  }
  return absl::StrCat(std::string(host), ":", value);
}

absl::StatusOr<std::string> http_get(std::string_view address, std::string_view path,
                                     std::chrono::milliseconds timeout) {
  // Plain sockets, not civetweb's client: its reads after the headers wait without a limit.
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  const std::string url = absl::StrCat("http://", std::string(address), std::string(path));
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(url, ": no port in the address"));
  }
  std::string host(address.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port(address.substr(colon + 1));
  // Milliseconds left before the deadline, at least 0.
  auto left = [&] {
    return static_cast<int>(std::clamp<int64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count(), 0,
        std::numeric_limits<int>::max()));
  };
  auto late = [&] {
    return absl::UnavailableError(absl::StrCat(
        url, ": no complete answer within ", std::chrono::duration<double>(timeout).count(), " s"));
  };

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int error = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); error != 0) {
    return absl::UnavailableError(absl::StrCat(url, ": ", gai_strerror(error)));
  }
  int fd = -1;
  std::string connect_error = "cannot connect";
  for (const addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int error = connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (error == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (poll(&p, 1, left()) <= 0) {
        error = ETIMEDOUT;
      } else {
        socklen_t size = sizeof(error);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) error = errno;
      }
    }
    if (error != 0) {
      connect_error = weir::errno_message(error);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return absl::UnavailableError(absl::StrCat(url, ": ", connect_error));
  absl::Cleanup close_fd = [fd] { close(fd); };

  // HTTP/1.0: the answer is not chunked, and it ends at its Content-Length or when the server
  // closes.
  const std::string request =
      absl::StrCat("GET ", std::string(path), " HTTP/1.0\r\nHost: ", std::string(address),
                   "\r\nUser-Agent: weir\r\n\r\n");
  for (size_t sent = 0; sent < request.size();) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, left()) <= 0) return late();
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) return absl::UnavailableError(absl::StrCat(url, ": ", weir::errno_message(errno)));
    sent += static_cast<size_t>(n);
  }

  std::string answer;
  size_t header_end = std::string::npos;
  std::optional<size_t> length;  // The body's, from Content-Length.
  char buffer[65536];
  for (;;) {
    if (header_end != std::string::npos && length && answer.size() >= header_end + *length) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, left()) <= 0) return late();
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n < 0) return absl::UnavailableError(absl::StrCat(url, ": ", weir::errno_message(errno)));
    if (n == 0) break;  // Closed: the answer is what came.
    answer.append(buffer, static_cast<size_t>(n));
    if (answer.size() > kMaxHttpAnswerBytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat(url, ": the answer is over ", kMaxHttpAnswerBytes >> 20, " MiB"));
    }
    if (header_end == std::string::npos) {
      const size_t end = answer.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      header_end = end + 4;
      const std::vector<std::string> lines = absl::StrSplit(answer.substr(0, end), "\r\n");
      for (const std::string& line : lines) {
        const size_t sep = line.find(':');
        if (sep == std::string::npos ||
            !absl::EqualsIgnoreCase(line.substr(0, sep), "Content-Length")) {
          continue;
        }
        size_t value = 0;
        if (!absl::SimpleAtoi(line.substr(sep + 1), &value)) {
          return absl::DataLossError(absl::StrCat(url, ": a bad Content-Length: ", line));
        }
        length = value;
      }
    }
  }
  int status = 0;
  if (header_end == std::string::npos || !absl::StartsWith(answer, "HTTP/1.") ||
      answer.size() < 12 || !absl::SimpleAtoi(answer.substr(9, 3), &status)) {
    return absl::UnavailableError(absl::StrCat(url, ": not an HTTP answer"));
  }
  std::string body = answer.substr(header_end);
  if (length) {
    if (body.size() < *length) {
      return absl::UnavailableError(
          absl::StrCat(url, ": the answer ended after ", body.size(), " of ", *length, " bytes"));
    }
    body.resize(*length);
  }
  if (status != 200) {
    return absl::FailedPreconditionError(absl::StrCat(url, ": HTTP ", status, ": ", body));
  }
  return body;
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::start(
    const HttpServerOptions& options, std::map<std::string, HttpHandler> routes) {
  init_civetweb_once();
  // civetweb's "Failed to setup server ports" would not say why.
  constexpr unsigned kIpv6Feature = 8;  // MG_FEATURES_IPV6
  if (!options.address.empty() && options.address.front() == '[' &&
      mg_check_feature(kIpv6Feature) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot serve HTTP on ", options.address,
        ": this build's HTTP server (civetweb) has no IPv6; use an IPv4 address such as "
        "127.0.0.1:PORT (loopback) or 0.0.0.0:PORT"));
  }
  std::unique_ptr<HttpServer> server(new HttpServer);
  server->routes_ = std::move(routes);
  const std::string threads = std::to_string(std::max(options.threads, 1));
  const std::string timeout = std::to_string(std::max<int64_t>(options.request_timeout.count(), 1));
  const char* config[] = {"listening_ports", options.address.c_str(), "num_threads",
                          threads.c_str(), "request_timeout_ms", timeout.c_str(),
                          "max_request_size", "16384",
                          // One answer per connection (see the header): a kept-alive one
                          // would hold its thread while idle.
                          "enable_keep_alive", "no", "linger_timeout_ms", "0", nullptr};
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof(callbacks));
  // civetweb logs errors of single connections (a client that went away) to stderr by default;
  // they are the client's business, not the process's.
  callbacks.log_message = [](const mg_connection*, const char*) { return 1; };
  mg_init_data init{};
  init.callbacks = &callbacks;
  init.user_data = server.get();
  init.configuration_options = config;
  char error_text[256] = {};
  mg_error_data error{};
  error.text = error_text;
  error.text_buffer_size = sizeof(error_text);
  server->context_ = mg_start2(&init, &error);
  if (server->context_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot serve HTTP on ", options.address, ": ",
                                               error_text[0] ? error_text : "civetweb failed"));
  }
  mg_set_request_handler(server->context_, "/", &HttpServer::dispatch, server.get());
  mg_server_port ports[4];
  const int count = mg_get_server_ports(server->context_, 4, ports);
  if (count > 0) server->port_ = ports[0].port;
  return server;
}

HttpServer::~HttpServer() {
  if (context_ != nullptr) mg_stop(context_);
}

int HttpServer::dispatch(mg_connection* connection, void* data) {
  auto* server = static_cast<HttpServer*>(data);
  const mg_request_info* info = mg_get_request_info(connection);
  HttpRequest request;
  request.method = info->request_method ? info->request_method : "";
  request.path = info->local_uri ? info->local_uri : "";
  request.query = info->query_string ? info->query_string : "";
  const bool head = request.method == "HEAD";
  if (request.method != "GET" && !head) {
    send(connection, HttpResponse{.status = 405, .body = "only GET and HEAD are served here\n"},
         false);
    return 405;
  }
  HttpResponse response;
  auto route = server->routes_.find(request.path);
  if (route == server->routes_.end()) {
    std::string known;
    for (const auto& [path, handler] : server->routes_) absl::StrAppend(&known, " ", path);
    response = HttpResponse{.status = 404, .body = absl::StrCat("no such path; try", known, "\n")};
  } else {
    try {
      response = route->second(request);
    } catch (const std::exception& e) {
      response = HttpResponse{.status = 500, .body = absl::StrCat("error: ", e.what(), "\n")};
    }
  }
  send(connection, response, head);
  return response.status;
}

}  // namespace weir::observe
