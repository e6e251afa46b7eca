// Single-client task microbenchmarks (reference/benchmarks.md A2): a no-op task submitted and
// waited for one at a time (sync), and many submitted before waiting for all (async).
// Needs a running cluster: `tessera up examples/clusters/small.yaml` (TESSERA_STATE_DIR names it),
// then `build-x/bench/task_bench`. This binary is also its own worker.
#include <cstdio>
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
