#include "weir/observe/replica_endpoints.h"

#include <array>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "families.h"
#include "probes.h"
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "weir/status.h"

namespace weir::observe {
namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 5> kStates = {"starting", "running", "stalled", "completed",
                                                     "dropped"};

// Chains `then` after `first` (either may be null).
template <class... Args>
std::function<void(Args...)> chain(std::type_identity_t<std::function<void(Args...)>> first,
                                   std::type_identity_t<std::function<void(Args...)>> then) {
  if (!then) return first;
  return [first = std::move(first), then = std::move(then)](Args... args) {
    first(args...);
    then(args...);
  };
}

json optional_number(const std::optional<uint64_t>& value) {
  return value ? json(*value) : json(nullptr);
}

}  // namespace

ReplicaObserver::ReplicaObserver(std::shared_ptr<persist::PersistClient> client)
    : client_(std::move(client)), started_(std::chrono::steady_clock::now()) {}

ReplicaObserver::~ReplicaObserver() { server_.reset(); }

void ReplicaObserver::instrument(control::ReplicaOptions& options) {
  options.on_execution = chain<uint64_t>(
      [this](uint64_t execution) {
        weir::MutexLock lock(mu_);
        execution_ = execution;
      },
      std::move(options.on_execution));
  options.on_reconciled = chain<const control::ReplicaState&>(
      [this](const control::ReplicaState& state) {
        weir::MutexLock lock(mu_);
        reconciled_ = state.catalog_version;
        objects_.clear();
        for (const auto& object : state.objects) {
          objects_[object.name] = {object.kind, object.object_id};
        }
        // The transitions of objects no longer run go (a dropped one's was its last): what is
        // kept stays as large as what runs.
        // A loop, not erase_if: clang's thread-safety analysis does not see a lambda run under mu_.
        for (auto it = health_.begin(); it != health_.end();) {
          if (it->first != control::kCatalogShard && !objects_.contains(it->first)) {
            it = health_.erase(it);
          } else {
            ++it;
          }
        }
      },
      std::move(options.on_reconciled));
  options.on_health = chain<const control::HealthTransition&>(
      [this](const control::HealthTransition& transition) {
        weir::MutexLock lock(mu_);
        health_[transition.name] = transition;
      },
      std::move(options.on_health));
}

absl::StatusOr<int> ReplicaObserver::serve(const HttpServerOptions& options) {
  std::map<std::string, HttpHandler> routes;
  routes["/metrics"] = [=, this](const HttpRequest&) {
    return internal::text_response(metrics_text(), "text/plain; version=0.0.4; charset=utf-8");
  };
  routes["/status"] = [=, this](const HttpRequest&) {
    return internal::text_response(status_json(), "application/json");
  };
  internal::add_probes(routes, [this] { return not_ready(); });
  WEIR_ASSIGN_OR_RETURN(server_, HttpServer::start(options, std::move(routes)));
  return server_->port();
}

ReplicaObserver::Snapshot ReplicaObserver::snapshot() const {
  Snapshot s;
  {
    weir::MutexLock lock(mu_);
    s.execution = execution_;
    s.reconciled = reconciled_;
    s.objects = objects_;
    s.health = health_;
  }
  // The catalog's latest version: the shard's upper (a read of the head; no catalog yet is 0).
  absl::StatusOr<persist::ShardDescription> head = client_->describe(control::kCatalogShard);
  if (head.ok()) {
    s.latest = head->upper.is_empty()
                   ? absl::StatusOr<uint64_t>(absl::FailedPreconditionError("it is closed"))
                   : absl::StatusOr<uint64_t>(head->upper.time());
  } else if (!absl::IsNotFound(head.status())) {
    s.latest = head.status();
  }
  return s;
}

const control::HealthTransition* ReplicaObserver::health_of(const Snapshot& s,
                                                            const std::string& name) {
  const auto object = s.objects.find(name);
  const auto it = s.health.find(name);
  if (it == s.health.end()) return nullptr;
  // A transition of an earlier object of the same name says nothing of this one.
  if (object != s.objects.end() && it->second.object_id != object->second.object_id) {
    return nullptr;
  }
  return &it->second;
}

std::string ReplicaObserver::not_ready(const Snapshot& s) {
  if (!s.execution) return "no execution taken yet";
  if (!s.latest.ok())
    return absl::StrCat("the catalog does not read: ", s.latest.status().message());
  if (!s.reconciled) return "the catalog is not reconciled yet";
  if (*s.reconciled != *s.latest) {
    return absl::StrCat("reconciled catalog version ", *s.reconciled, ", the latest is ",
                        *s.latest);
  }
  std::vector<std::string> starting;
  for (const auto& [name, object] : s.objects) {
    const control::HealthTransition* health = health_of(s, name);
    if (health == nullptr || health->state == "starting") starting.push_back(name);
  }
  if (!starting.empty()) return absl::StrCat("starting: ", absl::StrJoin(starting, ", "));
  return "";
}

std::string ReplicaObserver::not_ready() const { return not_ready(snapshot()); }

std::string ReplicaObserver::status_json() const {
  const Snapshot s = snapshot();
  json out{{"command", "replica"},
           {"pid", static_cast<int64_t>(getpid())},
           {"uptime_seconds",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count()},
           {"execution", optional_number(s.execution)},
           {"catalog_version", s.latest.ok() ? json(*s.latest) : json(nullptr)},
           {"reconciled_version", optional_number(s.reconciled)},
           {"ready", not_ready(s).empty()}};
  json catalog{{"health", "running"}, {"error", ""}};
  if (auto it = s.health.find(control::kCatalogShard); it != s.health.end()) {
    catalog = {{"health", it->second.state}, {"error", it->second.error}};
  }
  if (!s.latest.ok()) catalog["error"] = s.latest.status().ToString();
  out["catalog"] = std::move(catalog);
  out["objects"] = json::array();
  for (const auto& [name, object] : s.objects) {
    const control::HealthTransition* health = health_of(s, name);
    out["objects"].push_back({{"name", name},
                              {"kind", object.kind},
                              {"object_id", object.object_id},
                              {"health", health ? health->state : "starting"},
                              {"error", health ? health->error : ""},
                              {"restarts", health ? health->restarts : 0}});
  }
  // Errors come from outside (an upstream's messages) and need not be UTF-8: replaced.
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string ReplicaObserver::metrics_text() const {
  const Snapshot s = snapshot();
  internal::Families f;
  if (s.execution) {
    f.gauge("weir_replica_execution", "The replica's execution id.",
            static_cast<double>(*s.execution));
  }
  if (s.latest.ok()) {
    f.gauge("weir_catalog_version", "The catalog's latest version (its number of changes).",
            static_cast<double>(*s.latest));
  }
  if (s.reconciled) {
    f.gauge("weir_replica_reconciled_version", "The catalog version the replica runs.",
            static_cast<double>(*s.reconciled));
  }
  for (const auto& [name, object] : s.objects) {
    const control::HealthTransition* health = health_of(s, name);
    const std::string_view state = health ? std::string_view(health->state) : "starting";
    for (const std::string_view each : kStates) {
      f.gauge("weir_object_health", "1 for the object's health state, 0 for the others.",
              each == state ? 1 : 0, {{"object", name}, {"state", std::string(each)}});
    }
    f.counter("weir_object_restarts_total", "Restarts of the object's runner in this execution.",
              health ? static_cast<double>(health->restarts) : 0, {{"object", name}});
  }
  return f.text();
}

}  // namespace weir::observe
