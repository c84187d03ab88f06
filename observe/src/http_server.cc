#include "weir/observe/http_server.h"

#include <charconv>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include <civetweb.h>

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
  init_civetweb_once();
  const std::string url = absl::StrCat("http://", std::string(address), std::string(path));
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(url, ": no port in the address"));
  }
  std::string host(address.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  const int port = std::atoi(std::string(address.substr(colon + 1)).c_str());
  char error[256] = {};
  mg_connection* connection = mg_connect_client(host.c_str(), port, 0, error, sizeof(error));
  if (connection == nullptr) {
    return absl::UnavailableError(absl::StrCat(url, ": ", error[0] ? error : "cannot connect"));
  }
  mg_printf(connection, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
            std::string(path).c_str(), std::string(address).c_str());
  const int got = mg_get_response(connection, error, sizeof(error),
                                  static_cast<int>(std::max<int64_t>(timeout.count(), 1)));
  if (got < 0) {
    mg_close_connection(connection);
    return absl::UnavailableError(absl::StrCat(url, ": ", error[0] ? error : "no answer"));
  }
  const int status = mg_get_response_info(connection)->status_code;
  std::string body;
  char buffer[16384];
  for (;;) {
    const int n = mg_read(connection, buffer, sizeof(buffer));
    if (n <= 0) break;
    body.append(buffer, static_cast<size_t>(n));
  }
  mg_close_connection(connection);
  if (status != 200) {
    return absl::FailedPreconditionError(absl::StrCat(url, ": HTTP ", status, ": ", body));
  }
  return body;
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::start(
    const HttpServerOptions& options, std::map<std::string, HttpHandler> routes) {
  init_civetweb_once();
  std::unique_ptr<HttpServer> server(new HttpServer);
  server->routes_ = std::move(routes);
  const std::string threads = std::to_string(std::max(options.threads, 1));
  const std::string timeout = std::to_string(std::max<int64_t>(options.request_timeout.count(), 1));
  const char* config[] = {"listening_ports",
                          options.address.c_str(),
                          "num_threads",
                          threads.c_str(),
                          "request_timeout_ms",
                          timeout.c_str(),
                          "max_request_size",
                          "16384",
                          "enable_keep_alive",
                          "yes",
                          "keep_alive_timeout_ms",
                          "5000",
                          "linger_timeout_ms",
                          "0",
                          nullptr};
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
