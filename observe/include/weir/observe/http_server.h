// HttpServer: a small HTTP/1.1 server for a process's observability endpoints (/metrics,
// /status, the dashboard), on civetweb.
//
//   weir::observe::HttpServerOptions options;
//   options.address = "127.0.0.1:0";  // Port 0: any free port (see port()).
//   auto server = weir::observe::HttpServer::start(options, {
//       {"/healthz", [](const HttpRequest&) { return HttpResponse{.body = "ok\n"}; }},
//   });
//
// Handlers run on the server's own threads (options.threads), never on a worker: a handler must
// only read what workers publish (atomics, snapshots under a lock). Requests the server cannot
// parse, headers over 16 KiB, bodies, and clients that send too slowly (request_timeout) are
// refused by civetweb without reaching a handler; only GET and HEAD reach one (anything else:
// 405). A path with no handler: 404.
//
// A connection holds a thread from its accept until its answer is sent (civetweb serves one
// connection per thread), so the server closes every connection after one answer: a kept-alive
// connection would hold its thread while idle, and a few browser tabs polling every second would
// hold them all, leaving /healthz unanswered. A client that connects and sends nothing holds a
// thread for request_timeout: more such clients than threads delay everyone else that long.
//
// Thread safety: start and the destructor from one thread; port() from any.

#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

struct mg_context;
struct mg_connection;

namespace weir::observe {

struct HttpRequest {
  std::string method;  // "GET" or "HEAD".
  std::string path;    // Without the query: "/status".
  std::string query;   // After '?', undecoded; "" if none.
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  // HOST:PORT. Loopback by default: put a reverse proxy with authentication in front of it to
  // reach it from elsewhere (docs/observability.md).
  std::string address = "127.0.0.1:0";
  int threads = 16;  // Connections served at once; further ones wait in the queue.
  std::chrono::milliseconds request_timeout{10000};  // A slow client is dropped after this.
};

// `--http` as users type it: "PORT" (loopback), ":PORT" (loopback), "HOST:PORT", "[V6]:PORT".
// InvalidArgument naming the flag for anything else (a port outside 0..65535, an empty host).
absl::StatusOr<std::string> parse_http_address(std::string_view flag);

// GET `path` from the server at `address` (HOST:PORT, as parse_http_address gives it): the body
// of a 200 answer, over HTTP/1.0. `timeout` bounds the whole exchange: connecting, sending and
// the complete answer (a server that sends its headers and then stalls, or trickles, is given up
// on). Unavailable (naming the URL) if it cannot connect or the answer is not complete in time;
// ResourceExhausted if the answer is over kMaxHttpAnswerBytes; FailedPrecondition with the body
// for any status but 200.
inline constexpr size_t kMaxHttpAnswerBytes = size_t{64} << 20;
absl::StatusOr<std::string> http_get(std::string_view address, std::string_view path,
                                     std::chrono::milliseconds timeout);

class HttpServer {
 public:
  // Listens on options.address and serves `routes` (exact paths). Fails (naming the address) if
  // the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> start(
      const HttpServerOptions& options, std::map<std::string, HttpHandler> routes);
  // Stops: waits for the requests being served.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The port it listens on (the one picked, for port 0).
  int port() const { return port_; }

 private:
  HttpServer() = default;
  static int dispatch(mg_connection* connection, void* server);

  std::map<std::string, HttpHandler> routes_;  // Read-only once started.
  mg_context* context_ = nullptr;
  int port_ = 0;
};

}  // namespace weir::observe
