// Single-client task microbenchmarks (reference/benchmarks.md A2): a no-op task submitted and
// waited for one at a time (sync), and many submitted before waiting for all (async); actor
// calls 1:1 sync and async, and n:n (4 caller threads x 5000 calls round-robin over N actors:
// the reference's 4 tasks are driver threads here, calls from inside tasks are not supported).
// Needs a running cluster: `tessera up examples/clusters/small.yaml` (TESSERA_STATE_DIR names it),
// then `build-x/bench/task_bench`. This binary is also its own worker.
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "tessera/tessera.h"

namespace {

int NoOp(int x) { return x; }
TESSERA_REMOTE(NoOp);

void BM_TaskSync(benchmark::State& state) {
  for (auto _ : state) {
    auto value = tessera::Get(tessera::Task(NoOp).Remote(1));
    if (!value.ok()) state.SkipWithError(std::string(value.status().message()).c_str());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TaskSync)->UseRealTime();

void BM_TaskAsync(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) {
    std::vector<tessera::ObjectRef<int>> refs;
    refs.reserve(n);
    for (int i = 0; i < n; ++i) refs.push_back(tessera::Task(NoOp).Remote(i));
    auto values = tessera::Get(refs);
    if (!values.ok()) state.SkipWithError(std::string(values.status().message()).c_str());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_TaskAsync)->Arg(1000)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);

class Echo {
 public:
  int Call(int x) { return x; }
};
std::unique_ptr<Echo> MakeEcho() { return std::make_unique<Echo>(); }
TESSERA_ACTOR(MakeEcho);
TESSERA_ACTOR_METHOD(&Echo::Call);

// One actor for every loop, made (and waited for) before the first timed call.
const tessera::ActorHandle<Echo>& SharedActor() {
  static auto* actor = [] {
    auto* a = new tessera::ActorHandle<Echo>(tessera::Actor(MakeEcho).Remote());
    (void)tessera::Get(a->Task(&Echo::Call).Remote(0));
    return a;
  }();
  return *actor;
}

void BM_ActorCallSync(benchmark::State& state) {
  const auto& actor = SharedActor();
  for (auto _ : state) {
    auto value = tessera::Get(actor.Task(&Echo::Call).Remote(1));
    if (!value.ok()) state.SkipWithError(std::string(value.status().message()).c_str());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ActorCallSync)->UseRealTime();

void BM_ActorCallAsync(benchmark::State& state) {
  const auto& actor = SharedActor();
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) {
    std::vector<tessera::ObjectRef<int>> refs;
    refs.reserve(n);
    for (int i = 0; i < n; ++i) refs.push_back(actor.Task(&Echo::Call).Remote(i));
    auto values = tessera::Get(refs);
    if (!values.ok()) state.SkipWithError(std::string(values.status().message()).c_str());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_ActorCallAsync)->Arg(1000)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_ActorCallsNToN(benchmark::State& state) {
  const int actors = static_cast<int>(state.range(0));
  constexpr int kCallers = 4;
  constexpr int kCallsPerCaller = 5000;
  std::vector<tessera::ActorHandle<Echo>> handles;
  for (int i = 0; i < actors; ++i) handles.push_back(tessera::Actor(MakeEcho).Remote());
  for (auto& h : handles) (void)tessera::Get(h.Task(&Echo::Call).Remote(0));
  for (auto _ : state) {
    std::vector<std::thread> callers;
    for (int c = 0; c < kCallers; ++c) {
      callers.emplace_back([&, c] {
        std::vector<tessera::ObjectRef<int>> refs;
        refs.reserve(kCallsPerCaller);
        for (int i = 0; i < kCallsPerCaller; ++i) {
          refs.push_back(handles[(c + i) % actors].Task(&Echo::Call).Remote(i));
        }
        (void)tessera::Get(refs);
      });
    }
    for (auto& t : callers) t.join();
  }
  for (auto& h : handles) (void)tessera::Kill(h);
  state.SetItemsProcessed(state.iterations() * kCallers * kCallsPerCaller);
}
BENCHMARK(BM_ActorCallsNToN)->Arg(4)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  if (absl::Status s = tessera::Init(); !s.ok()) {
    std::fprintf(stderr, "task_bench: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  tessera::Shutdown();
  return 0;
}
