#include "weir/protocol/cluster.h"

#include "grpc_transport.h"

namespace weir::cluster {

TransportFactory grpc_transport() {
  return [](const Config& config, TransportReceiver& receiver) {
    return protocol::connect_grpc(config, receiver);
  };
}

}  // namespace weir::cluster
