// The rendered text format, byte for byte: one golden text per metric type, escaping of HELP
// and label values, float formatting, and the order of families and series.
#include "metrics/exposition.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"
#include "metrics/exposition_parser.h"

namespace tessera::metrics {
namespace {

TEST(ExpositionTest, ACounterRendersHelpTypeAndOneLinePerSeries) {
  MetricRegistry registry;
  CounterFamily* tasks = *registry.AddCounter({.name = "tessera_tasks_finished_total",
                                               .help = "Tasks that ran to the end.",
                                               .label_names = {"outcome", "node"}});
  (*tasks->WithLabels({"succeeded", "n1"}))->Increment(41);
  (*tasks->WithLabels({"failed", "n1"}))->Increment();
  EXPECT_EQ(RenderPrometheusText(registry),
            "# HELP tessera_tasks_finished_total Tasks that ran to the end.\n"
            "# TYPE tessera_tasks_finished_total counter\n"
            "tessera_tasks_finished_total{outcome=\"failed\",node=\"n1\"} 1\n"
            "tessera_tasks_finished_total{outcome=\"succeeded\",node=\"n1\"} 41\n");
}

TEST(ExpositionTest, AGaugeWithoutLabelsRendersItsValueBare) {
  MetricRegistry registry;
  Gauge* gauge = *(*registry.AddGauge({.name = "tessera_store_used_bytes",
                                       .help = "Bytes used in the object store."}))
                      ->WithLabels({});
  gauge->Set(1.5e9);
  EXPECT_EQ(RenderPrometheusText(registry),
            "# HELP tessera_store_used_bytes Bytes used in the object store.\n"
            "# TYPE tessera_store_used_bytes gauge\n"
            "tessera_store_used_bytes 1500000000\n");
}

TEST(ExpositionTest, AHistogramRendersCumulativeBucketsThenSumAndCount) {
  MetricRegistry registry;
  HistogramFamily* durations = *registry.AddHistogram({.name = "tessera_task_duration_seconds",
                                                       .help = "Task execution time.",
                                                       .label_names = {"node"}},
                                                      {0.1, 1});
  Histogram* n1 = *durations->WithLabels({"n1"});
  for (double v : {0.05, 0.5, 0.5, 3.0}) n1->Observe(v);
  EXPECT_EQ(RenderPrometheusText(registry),
            "# HELP tessera_task_duration_seconds Task execution time.\n"
            "# TYPE tessera_task_duration_seconds histogram\n"
            "tessera_task_duration_seconds_bucket{node=\"n1\",le=\"0.1\"} 1\n"
            "tessera_task_duration_seconds_bucket{node=\"n1\",le=\"1\"} 3\n"
            "tessera_task_duration_seconds_bucket{node=\"n1\",le=\"+Inf\"} 4\n"
            "tessera_task_duration_seconds_sum{node=\"n1\"} 4.05\n"
            "tessera_task_duration_seconds_count{node=\"n1\"} 4\n");
}

TEST(ExpositionTest, AnUnlabelledHistogramHasOnlyTheLeLabel) {
  MetricRegistry registry;
  ASSERT_TRUE(
      registry.AddHistogram({.name = "tessera_object_size_bytes", .help = "Object sizes."}, {1024})
          .ok());
  EXPECT_EQ(RenderPrometheusText(registry),
            "# HELP tessera_object_size_bytes Object sizes.\n"
            "# TYPE tessera_object_size_bytes histogram\n"
            "tessera_object_size_bytes_bucket{le=\"1024\"} 0\n"
            "tessera_object_size_bytes_bucket{le=\"+Inf\"} 0\n"
            "tessera_object_size_bytes_sum 0\n"
            "tessera_object_size_bytes_count 0\n");
}

TEST(ExpositionTest, ACallbackGaugeRendersWhatItEmitted) {
  MetricRegistry registry;
  auto registration = registry.AddCallbackGauge(
      {.name = "tessera_node_devices", .help = "Devices.", .label_names = {"family"}},
      [](SampleSink& sink) {
        (void)sink.Emit({"nvidia"}, 8);
        (void)sink.Emit({"amd"}, 2);
      });
  ASSERT_TRUE(registration.ok());
  EXPECT_EQ(RenderPrometheusText(registry),
            "# HELP tessera_node_devices Devices.\n"
            "# TYPE tessera_node_devices gauge\n"
            "tessera_node_devices{family=\"amd\"} 2\n"
            "tessera_node_devices{family=\"nvidia\"} 8\n");
}

TEST(ExpositionTest, HelpAndLabelValuesAreEscaped) {
  MetricRegistry registry;
  GaugeFamily* family = *registry.AddGauge({.name = "tessera_escaped",
                                            .help = "A \\ backslash,\na newline, a \"quote\".",
                                            .label_names = {"path"}});
  (*family->WithLabels({"C:\\dir \"x\"\nnext"}))->Set(1);
  EXPECT_EQ(RenderPrometheusText(registry),
            "# HELP tessera_escaped A \\\\ backslash,\\na newline, a \"quote\".\n"
            "# TYPE tessera_escaped gauge\n"
            "tessera_escaped{path=\"C:\\\\dir \\\"x\\\"\\nnext\"} 1\n");
}

TEST(ExpositionTest, FamiliesComeInNameOrder) {
  MetricRegistry registry;
  ASSERT_TRUE(registry.AddGauge({.name = "tessera_b", .help = "B."}).ok());
  ASSERT_TRUE(registry.AddGauge({.name = "tessera_a", .help = "A."}).ok());
  EXPECT_EQ(RenderPrometheusText(registry),
            "# HELP tessera_a A.\n# TYPE tessera_a gauge\ntessera_a 0\n"
            "# HELP tessera_b B.\n# TYPE tessera_b gauge\ntessera_b 0\n");
}

TEST(ExpositionTest, ValuesRoundTripAndSpecialsAreSpelledThePrometheusWay) {
  EXPECT_EQ(FormatPrometheusValue(0), "0");
  EXPECT_EQ(FormatPrometheusValue(41), "41");
  EXPECT_EQ(FormatPrometheusValue(-2.5), "-2.5");
  EXPECT_EQ(FormatPrometheusValue(0.1), "0.1");
  EXPECT_EQ(FormatPrometheusValue(1e-300), "1e-300");
  EXPECT_EQ(FormatPrometheusValue(INFINITY), "+Inf");
  EXPECT_EQ(FormatPrometheusValue(-INFINITY), "-Inf");
  EXPECT_EQ(FormatPrometheusValue(NAN), "NaN");
  for (double v : {0.1 + 0.2, 1.0 / 3, 123456789.123456789, 5e-324,
                   std::numeric_limits<double>::max(), 9007199254740993.0}) {
    const std::optional<double> back = ParsePrometheusValue(FormatPrometheusValue(v));
    ASSERT_TRUE(back.has_value()) << FormatPrometheusValue(v);
    EXPECT_EQ(*back, v) << FormatPrometheusValue(v);
  }
}

TEST(ExpositionTest, TheContentTypeIsTheTextFormats) {
  EXPECT_EQ(kPrometheusTextContentType, "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace
}  // namespace tessera::metrics
