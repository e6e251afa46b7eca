// Copying a large object between two nodes' stores the way node agents do (src/node/
// object_transfer.h): an OfferObject gRPC call, then the bytes over the holder's raw TCP data
// port, sealed (AES-256-GCM chunks) from its arena's mapping and opened in the puller's. On
// loopback: GB/s of
// PullObject for 1 GiB, beside the loopback TCP throughput of machine_ceilings_bench run on the
// same machine.
// Both stores live in this process; the bytes still cross a loopback TCP connection.
#include <cstring>
#include <memory>

#include "benchmark/benchmark.h"
#include "node/object_data_server.h"
#include "node/object_transfer.h"
#include "objects/object_store_server.h"
#include "rpc/channel.h"
#include "rpc/server.h"

namespace tessera {
namespace {

constexpr char kToken[] = "bench";

// The holder's OfferObject, as the node agent serves it.
class Holder : public v1::NodeAgent::Service {
 public:
  explicit Holder(ObjectDataServer* data) : data_(data) {}
  grpc::Status OfferObject(grpc::ServerContext*, const v1::OfferObjectRequest* request,
                           v1::OfferObjectResponse* response) override {
    auto id = ObjectId::FromBinary(request->object_id());
    if (!id.ok()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad id");
    auto offer = data_->OfferObject(*id);
    if (!offer.ok()) return grpc::Status(grpc::StatusCode::INTERNAL, "failed");
    response->set_size(offer->size);
    response->set_metadata(offer->metadata);
    response->set_data_port(data_->port());
    response->set_ticket(offer->ticket);
    response->set_transfer_key(offer->key);
    return grpc::Status::OK;
  }

 private:
  ObjectDataServer* data_;
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

  auto data = ObjectDataServer::Start({&holder_store, holder_arena->get()}, {});
  if (!data.ok()) {
    state.SkipWithError("cannot start the data server");
    return;
  }
  Holder holder(data->get());
  rpc::ServerOptions options;
  options.token = kToken;
  auto server = rpc::RpcServer::Start(options, {&holder});
  if (!server.ok()) {
    state.SkipWithError("cannot start the server");
    return;
  }
  auto stub = v1::NodeAgent::NewStub(rpc::MakeChannel((*server)->address(), kToken));
  const LocalObjectStore puller{&puller_store, puller_arena->get()};
  for (auto _ : state) {
    auto pulled = PullObject({stub.get(), "127.0.0.1"}, absl::Minutes(1), id, puller);
    if (!pulled.ok() || pulled->already_here) {
      state.SkipWithError(pulled.ok() ? "the object was already here"
                                      : std::string(pulled.status().message()).c_str());
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
