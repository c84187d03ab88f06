// `weir pubsub`: the server that carries news of shards' uppers between processes
// (pubsub/README.md), so that readers in one process wake on another's appends.
//
//   weir pubsub [--listen HOST:PORT]
//
// It keeps nothing on disk: stop and restart it at will (readers poll meanwhile). The first
// SIGINT or SIGTERM stops it (exit 0); an address it cannot listen on exits 1.

#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "checks.h"
#include "commands.h"
#include "stop_signals.h"

#include "weir/pubsub/pubsub.h"

namespace weir::tools {
namespace {

void run_pubsub(const std::string& listen) {
  pubsub::PubSubServerOptions options;
  options.listen = listen;
  absl::StatusOr<std::unique_ptr<pubsub::PubSubServer>> server =
      pubsub::PubSubServer::start(options);
  if (!server.ok()) {
    std::cerr << "weir pubsub: " << server.status() << "\n";
    throw CLI::RuntimeError(1);
  }
  const std::string host = listen.substr(0, listen.rfind(':'));
  std::cerr << "weir pubsub: listening on " << host << ":" << (*server)->port() << std::endl;
  auto stop = std::make_shared<std::atomic<bool>>(false);
  const StopOnSignals signals(stop);
  while (!stop->load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const pubsub::PubSubServer::Stats stats = (*server)->stats();
  (*server)->shutdown();
  std::cerr << "weir pubsub: stopped (" << stats.pushes << " uppers received, " << stats.news_sent
            << " sent, " << stats.sessions_refused << " sessions refused)\n";
}

}  // namespace

void add_pubsub_command(CLI::App& app) {
  auto listen = std::make_shared<std::string>(pubsub::kDefaultListen);
  CLI::App* cmd = app.add_subcommand(
      "pubsub", "Carry news of appends between weir processes, so that readers need not poll");
  cmd->add_option("--listen", *listen, "Where to listen (HOST:PORT; port 0: any free one)")
      ->type_name("HOST:PORT")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            const absl::Status valid = pubsub::check_address(value, /*allow_port_zero=*/true);
            return valid.ok() ? "" : std::string(valid.message());
          },
          ""));
  cmd->footer(
      "Every process that writes or follows shards takes it as --pubsub HOST:PORT (or "
      "WEIR_PUBSUB).\n"
      "Examples:\n"
      "  weir pubsub --listen 0.0.0.0:6876\n"
      "  weir replica --persist DIR --pubsub pubsub-host:6876");
  cmd->final_callback([listen] { run_pubsub(*listen); });
}

}  // namespace weir::tools
