// The metrics hot path and a scrape's cost (src/metrics): a counter increment and a histogram
// observation on one thread and with threads sharing one child (and each with its own, which
// shows what the per-child cache line buys), the label lookup callers should do once, and
// collecting + rendering (and parsing back) a registry of 10k series.
#include <benchmark/benchmark.h>

#include <string>

#include "metrics/exposition.h"
#include "metrics/exposition_parser.h"
#include "metrics/metric_registry.h"

namespace tessera::metrics {
namespace {

MetricRegistry& SharedRegistry() {
  static MetricRegistry* registry = new MetricRegistry();
  return *registry;
}

CounterFamily& Counters() {
  static CounterFamily* family = *SharedRegistry().AddCounter(
      {.name = "tessera_bench_events_total", .help = "Events.", .label_names = {"thread"}});
  return *family;
}

HistogramFamily& Histograms() {
  static HistogramFamily* family = *SharedRegistry().AddHistogram(
      {.name = "tessera_bench_duration_seconds", .help = "Durations.", .label_names = {"thread"}},
      *ExponentialBuckets(1e-6, 4, 12));
  return *family;
}

// Every thread increments the same child: one cache line bounces between the cores.
void BM_CounterIncrementShared(benchmark::State& state) {
  Counter* counter = *Counters().WithLabels({"shared"});
  for (auto _ : state) counter->Increment();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CounterIncrementShared)->ThreadRange(1, 8)->UseRealTime();

// Each thread increments its own child of the same family.
void BM_CounterIncrementOwnChild(benchmark::State& state) {
  Counter* counter = *Counters().WithLabels({std::to_string(state.thread_index())});
  for (auto _ : state) counter->Increment();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CounterIncrementOwnChild)->ThreadRange(1, 8)->UseRealTime();

void BM_CounterAddDouble(benchmark::State& state) {
  Counter* counter = *Counters().WithLabels({"double"});
  for (auto _ : state) counter->Add(0.25);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CounterAddDouble)->ThreadRange(1, 8)->UseRealTime();

void BM_HistogramObserveShared(benchmark::State& state) {
  Histogram* histogram = *Histograms().WithLabels({"shared"});
  double value = 1e-6;
  for (auto _ : state) {
    histogram->Observe(value);
    value = value > 10 ? 1e-6 : value * 1.7;  // walk every bucket
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HistogramObserveShared)->ThreadRange(1, 8)->UseRealTime();

void BM_HistogramObserveOwnChild(benchmark::State& state) {
  Histogram* histogram = *Histograms().WithLabels({std::to_string(state.thread_index())});
  double value = 1e-6;
  for (auto _ : state) {
    histogram->Observe(value);
    value = value > 10 ? 1e-6 : value * 1.7;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HistogramObserveOwnChild)->ThreadRange(1, 8)->UseRealTime();

// What the hot path avoids by keeping the child pointer.
void BM_WithLabelsLookup(benchmark::State& state) {
  (void)Counters().WithLabels({"looked-up"});
  for (auto _ : state) benchmark::DoNotOptimize(Counters().WithLabels({"looked-up"}));
}
BENCHMARK(BM_WithLabelsLookup);

// 10k series: 10 counter families x 1000 (node, device) children, realistic label lengths.
MetricRegistry& TenThousandSeries() {
  static MetricRegistry* registry = [] {
    auto* r = new MetricRegistry();
    for (int f = 0; f < 10; ++f) {
      CounterFamily* family =
          *r->AddCounter({.name = "tessera_bench_family_" + std::to_string(f) + "_total",
                          .help = "A benchmark family.",
                          .label_names = {"node", "device_index"}});
      for (int n = 0; n < 125; ++n) {
        for (int d = 0; d < 8; ++d) {
          (*family->WithLabels({"node-" + std::to_string(n) + ".cluster.local", std::to_string(d)}))
              ->Increment(static_cast<uint64_t>(n * 1000 + d));
        }
      }
    }
    return r;
  }();
  return *registry;
}

void BM_CollectAndRender10kSeries(benchmark::State& state) {
  const MetricRegistry& registry = TenThousandSeries();
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string text = RenderPrometheusText(registry);
    bytes += text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["series"] = 10000;
}
BENCHMARK(BM_CollectAndRender10kSeries)->Unit(benchmark::kMillisecond);

void BM_Collect10kSeries(benchmark::State& state) {
  const MetricRegistry& registry = TenThousandSeries();
  for (auto _ : state) benchmark::DoNotOptimize(registry.Collect());
}
BENCHMARK(BM_Collect10kSeries)->Unit(benchmark::kMillisecond);

void BM_Parse10kSeries(benchmark::State& state) {
  const std::string text = RenderPrometheusText(TenThousandSeries());
  for (auto _ : state) benchmark::DoNotOptimize(ParsePrometheusText(text));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_Parse10kSeries)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessera::metrics

BENCHMARK_MAIN();
