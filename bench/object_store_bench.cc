// Object store figures (issue 5 item 7, "large put" and "small put/get"):
//
// - memcpy of 800 MiB between two warm buffers of this process: the ceiling a put is read against.
// - Large put: one 800 MiB buffer through ObjectStoreClient into a store that runs in ANOTHER
//   process (forked at start, as the node agent would host it): Create (one round trip; the
//   client maps the object's pages with one madvise), one memcpy into shared memory, Seal. The
//   "warm" variant reuses one client (its mapping already populated by earlier puts); the "fresh
//   client" variant connects a new client per iteration (connect time excluded), as a new worker
//   would, so page-table population is paid every time.
// - Small put+get: 100 bytes: Create, copy, Seal, Get, Release, Delete through the socket.
// - Large get on the same node: Get of a sealed 800 MiB object returns a view of the store's
//   memory (a map, not a copy): with the default page population (one madvise over the object),
//   and without it (pages fault lazily on first touch, not measured here); bytes_copied = 0.
//
//   build/bench/object_store_bench [--benchmark_filter=...]
//
// The forked store process is killed and the socket folder removed before main returns.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "objects/object_store_client.h"
#include "objects/object_store_server.h"

namespace tessera {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kLarge = 800 * kMiB;
constexpr uint64_t kCapacity = kLarge + 64 * kMiB;

std::string g_socket;

// Touched once so no benchmark pays for first-touch faults of its source or destination.
std::vector<char>& Source() {
  static std::vector<char> source(kLarge, 'a');
  return source;
}

std::unique_ptr<ObjectStoreClient> Connect(uint64_t populate_threshold = 1 << 20) {
  auto client = ObjectStoreClient::Connect(
      {.socket_path = g_socket, .populate_threshold_bytes = populate_threshold});
  if (!client.ok()) {
    std::fprintf(stderr, "connect: %s\n", client.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(client);
}

void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}

void BM_Memcpy800MiB(benchmark::State& state) {
  std::vector<char>& src = Source();
  static std::vector<char> dst(kLarge, 'b');
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kLarge);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kLarge));
}
BENCHMARK(BM_Memcpy800MiB)->Unit(benchmark::kMillisecond)->Iterations(5)->UseRealTime();

void BM_LargePut800MiB(benchmark::State& state) {
  const bool fresh_client = state.range(0) == 1;
  std::vector<char>& src = Source();
  std::unique_ptr<ObjectStoreClient> client = Connect();
  for (auto _ : state) {
    if (fresh_client) {
      state.PauseTiming();
      client = Connect();
      state.ResumeTiming();
    }
    const ObjectId id = ObjectId::FromRandom();
    Check(client->Put(id, std::string_view(src.data(), kLarge), "", {}), "put");
    state.PauseTiming();
    Check(client->Delete(id), "delete");
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kLarge));
  state.SetLabel(fresh_client ? "fresh client each put" : "warm client");
}
BENCHMARK(BM_LargePut800MiB)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5)
    ->UseRealTime();

void BM_SmallPutGet100B(benchmark::State& state) {
  std::unique_ptr<ObjectStoreClient> client = Connect();
  const std::string value(100, 'v');
  for (auto _ : state) {
    const ObjectId id = ObjectId::FromRandom();
    Check(client->Put(id, value, "", {}), "put");
    {
      absl::StatusOr<ObjectBuffer> buf = client->Get(id);
      Check(buf.status(), "get");
      benchmark::DoNotOptimize(buf->data()[0]);
    }
    Check(client->Delete(id), "delete");
  }
  state.SetLabel("create+seal+get+release+delete: 5 round trips");
}
BENCHMARK(BM_SmallPutGet100B)->UseRealTime();

void BM_LargeGet800MiB(benchmark::State& state) {
  const bool populate = state.range(0) == 1;
  std::unique_ptr<ObjectStoreClient> writer = Connect();
  const ObjectId id = ObjectId::FromRandom();
  Check(writer->Put(id, std::string_view(Source().data(), kLarge), "", {}), "put");
  std::unique_ptr<ObjectStoreClient> reader = Connect(populate ? 1 << 20 : UINT64_MAX);
  const uint8_t* first = nullptr;
  bool same_memory = true;
  for (auto _ : state) {
    absl::StatusOr<ObjectBuffer> buf = reader->Get(id);
    Check(buf.status(), "get");
    if (first == nullptr) first = buf->data();
    same_memory = same_memory && buf->data() == first && buf->size() == kLarge;
    benchmark::DoNotOptimize(buf->data());
  }
  Check(writer->Delete(id), "delete");
  // Every Get returned the same address inside the mapped arena: a view, no bytes copied.
  state.counters["bytes_copied"] = same_memory ? 0 : static_cast<double>(kLarge);
  state.SetLabel(populate ? "map + populate page tables" : "map only (lazy faults)");
}
BENCHMARK(BM_LargeGet800MiB)->Arg(1)->Arg(0)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  char dir_template[] = "/tmp/tessera-object-bench-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return 1;
  const std::string dir = dir_template;
  tessera::g_socket = dir + "/objects.sock";

  // The store runs in its own process, forked before this process starts any thread.
  int ready[2];
  if (pipe(ready) != 0) return 1;
  const pid_t store_pid = fork();
  if (store_pid == 0) {
    close(ready[0]);
    auto server = tessera::ObjectStoreServer::Start(
        {.socket_path = tessera::g_socket, .capacity_bytes = tessera::kCapacity});
    const char ok = server.ok() ? '1' : '0';
    if (!server.ok()) std::fprintf(stderr, "store: %s\n", server.status().ToString().c_str());
    (void)!write(ready[1], &ok, 1);
    close(ready[1]);
    if (server.ok()) pause();  // until the parent kills it
    _exit(server.ok() ? 0 : 1);
  }
  close(ready[1]);
  char ok = '0';
  (void)!read(ready[0], &ok, 1);
  close(ready[0]);

  int rc = 1;
  if (ok == '1') {
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    rc = 0;
  }
  kill(store_pid, SIGKILL);
  waitpid(store_pid, nullptr, 0);
  unlink(tessera::g_socket.c_str());
  rmdir(dir.c_str());
  return rc;
}
