// Copying a large object between two nodes' stores over the node agents' FetchObject stream
// (src/node/object_transfer.h), on loopback: GB/s of PullObject for 1 GiB, beside the loopback
// TCP throughput of machine_ceilings_bench run on the same machine. Both stores live in this
// process; the bytes still cross gRPC's loopback TCP connection.
#include <cstring>
#include <memory>

#include "benchmark/benchmark.h"
#include "node/object_transfer.h"
#include "objects/object_store_server.h"
#include "rpc/channel.h"
#include "rpc/server.h"

namespace tessera {
namespace {

constexpr char kToken[] = "bench";

// The holder's side of the stream, as the node agent serves it.
class Holder : public v1::NodeAgent::Service {
 public:
  explicit Holder(LocalObjectStore local) : local_(local) {}
  grpc::Status FetchObject(grpc::ServerContext*, const v1::FetchObjectRequest* request,
                           grpc::ServerWriter<v1::ObjectChunk>* writer) override {
    auto id = ObjectId::FromBinary(request->object_id());
    if (!id.ok()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad id");
    absl::Status status =
        StreamObject(local_, *id, [&](const v1::ObjectChunk& c) { return writer->Write(c); });
    return status.ok() ? grpc::Status::OK : grpc::Status(grpc::StatusCode::INTERNAL, "failed");
  }

 private:
  LocalObjectStore local_;
};

void BM_PullObject(benchmark::State& state) {
  const uint64_t bytes = static_cast<uint64_t>(state.range(0)) << 20;
  const uint64_t capacity = bytes + (64 << 20);
  ObjectStore holder_store(ObjectStoreOptions{.capacity_bytes = capacity});
  ObjectStore puller_store(ObjectStoreOptions{.capacity_bytes = capacity});
  auto holder_arena = SharedMemoryArena::Create(capacity, ArenaCreateOptions{});
  auto puller_arena = SharedMemoryArena::Create(capacity, ArenaCreateOptions{});
  if (!holder_arena.ok() || !puller_arena.ok()) {
    state.SkipWithError("cannot create the arenas");
    return;
  }
  const ObjectId id = ObjectId::FromRandom();
  auto location = holder_store.Create(kLocalStoreClient, id, bytes, "", {});
  if (!location.ok()) {
    state.SkipWithError("cannot create the object");
    return;
  }
  std::memset((*holder_arena)->base() + location->offset, 7, bytes);
  (void)holder_store.Seal(kLocalStoreClient, id);

  Holder holder({&holder_store, holder_arena->get()});
  rpc::ServerOptions options;
  options.token = kToken;
  auto server = rpc::RpcServer::Start(options, {&holder});
  if (!server.ok()) {
    state.SkipWithError("cannot start the server");
    return;
  }
  auto stub = v1::NodeAgent::NewStub(rpc::MakeChannel((*server)->address()));
  const LocalObjectStore puller{&puller_store, puller_arena->get()};
  for (auto _ : state) {
    auto pulled = PullObject(*stub, kToken, absl::Minutes(1), id, puller);
    if (!pulled.ok() || pulled->already_here) {
      state.SkipWithError("the pull failed");
      break;
    }
    state.PauseTiming();
    (void)puller_store.Delete(id);
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_PullObject)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace tessera

BENCHMARK_MAIN();
