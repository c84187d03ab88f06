// The routes every observer serves alike: /healthz and /readyz (ingest_endpoints.cc,
// replica_endpoints.cc).

#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

#include "weir/observe/http_server.h"

namespace weir::observe::internal {

inline HttpResponse text_response(std::string body, std::string type, int status = 200) {
  return HttpResponse{.status = status, .content_type = std::move(type), .body = std::move(body)};
}

// /healthz: 200 "ok" while the process serves requests. /readyz: 200 when `not_ready` says
// nothing, else 503 with what it says.
inline void add_probes(std::map<std::string, HttpHandler>& routes,
                       std::function<std::string()> not_ready) {
  routes["/healthz"] = [](const HttpRequest&) { return text_response("ok\n", "text/plain"); };
  routes["/readyz"] = [not_ready = std::move(not_ready)](const HttpRequest&) {
    const std::string why = not_ready();
    return why.empty() ? text_response("ready\n", "text/plain")
                       : text_response(absl::StrCat("not ready: ", why, "\n"), "text/plain", 503);
  };
}

}  // namespace weir::observe::internal
