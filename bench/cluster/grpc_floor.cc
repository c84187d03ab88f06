// grpc_floor [ROUND_TRIPS] [STREAM_MIB]: the floors under the cluster transport, measured with
// gRPC alone on loopback in one process (a synchronous server and client on the Link service):
//
// - ping-pong: one FrameBatch carrying a 64-byte Data payload goes back and forth on one
//   bidirectional stream, ROUND_TRIPS times (default 20000). Figure: µs per round trip.
// - streaming: the client writes STREAM_MIB MiB (default 1024) as FrameBatches of 64 KiB and of
//   1 MiB payloads on one stream as fast as it can; the server reads them all. Figure: bytes/s.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "bench_util.h"
#include <grpcpp/grpcpp.h>

#include "weir/protocol/v1/link.grpc.pb.h"

namespace {

using weir::protocol::v1::FrameBatch;
using weir::protocol::v1::Link;

// Echoes every batch that carries a Data frame; counts, and answers once at the end, the
// batches of a stream that starts with a Heartbeat.
class Floor final : public Link::Service {
  grpc::Status Connect(grpc::ServerContext*,
                       grpc::ServerReaderWriter<FrameBatch, FrameBatch>* stream) override {
    FrameBatch batch;
    if (!stream->Read(&batch)) return grpc::Status::OK;
    if (batch.frames_size() > 0 && batch.frames(0).has_heartbeat()) {
      uint64_t bytes = 0;
      while (stream->Read(&batch)) bytes += batch.frames(0).data().payload().size();
      FrameBatch done;
      done.add_frames()->mutable_data()->set_channel(bytes);
      stream->Write(done);
      return grpc::Status::OK;
    }
    do {
      stream->Write(batch);
    } while (stream->Read(&batch));
    return grpc::Status::OK;
  }
};

FrameBatch data_batch(size_t bytes) {
  FrameBatch batch;
  batch.add_frames()->mutable_data()->set_payload(std::string(bytes, 'x'));
  return batch;
}

double stream(Link::Stub& stub, size_t message_bytes, uint64_t total_bytes) {
  grpc::ClientContext context;
  auto call = stub.Connect(&context);
  FrameBatch start;
  start.add_frames()->mutable_heartbeat();
  call->Write(start);
  const FrameBatch batch = data_batch(message_bytes);
  const uint64_t messages = total_bytes / message_bytes;
  weir::bench::Timer timer;
  for (uint64_t i = 0; i < messages; ++i) call->Write(batch);
  call->WritesDone();
  FrameBatch done;
  call->Read(&done);
  const double seconds = timer.seconds();
  call->Finish();
  if (done.frames(0).data().channel() != messages * message_bytes) {
    std::fprintf(stderr, "grpc_floor: the server received %llu bytes, expected %llu\n",
                 static_cast<unsigned long long>(done.frames(0).data().channel()),
                 static_cast<unsigned long long>(messages * message_bytes));
    std::exit(1);
  }
  return static_cast<double>(messages * message_bytes) / seconds;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t round_trips = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 20000;
  const uint64_t stream_bytes = (argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1024) << 20;

  Floor service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(-1);
  auto server = builder.BuildAndStart();
  if (!server) {
    std::fprintf(stderr, "grpc_floor: cannot start a server on loopback\n");
    return 1;
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                           grpc::InsecureChannelCredentials(), args);
  auto stub = Link::NewStub(channel);

  {
    grpc::ClientContext context;
    auto call = stub->Connect(&context);
    const FrameBatch ping = data_batch(64);
    FrameBatch pong;
    for (int i = 0; i < 1000; ++i) call->Write(ping), call->Read(&pong);  // Warm up.
    weir::bench::Timer timer;
    for (uint64_t i = 0; i < round_trips; ++i) {
      call->Write(ping);
      if (!call->Read(&pong)) {
        std::fprintf(stderr, "grpc_floor: the ping-pong stream broke\n");
        return 1;
      }
    }
    const double us = timer.seconds() * 1e6 / static_cast<double>(round_trips);
    call->WritesDone();
    call->Finish();
    std::printf("grpc_floor: 64 B ping-pong: %.1f us per round trip\n", us);
    weir::bench::result("grpc_pingpong_us", us, "us");
  }
  const double small = stream(*stub, 64 << 10, stream_bytes);
  const double large = stream(*stub, 1 << 20, stream_bytes);
  std::printf("grpc_floor: streaming %.0f MB/s with 64 KiB messages, %.0f MB/s with 1 MiB\n",
              small / 1e6, large / 1e6);
  weir::bench::result("grpc_stream_64k_bytes_per_s", small, "bytes/s");
  weir::bench::result("grpc_stream_1m_bytes_per_s", large, "bytes/s");
  server->Shutdown();
  return 0;
}
