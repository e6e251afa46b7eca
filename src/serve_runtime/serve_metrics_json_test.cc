// The Serve page's JSON: only Serve's families, counters and gauges by value, histograms with
// their bounds and cumulative counts, and no number JSON cannot hold.
#include "serve_runtime/serve_metrics_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "metrics/metric_registry.h"

namespace tessera::serve {
namespace {

TEST(ServeMetricsJsonTest, HasServesFamiliesOnlyWithTheirSeries) {
  metrics::MetricRegistry registry;
  metrics::CounterFamily* requests =
      *registry.AddCounter({.name = "ray_serve_num_http_requests_total",
                            .help = "Requests.",
                            .label_names = {"route", "application"}});
  (*requests->WithLabels({"/", "llm"}))->Increment(3);
  metrics::HistogramFamily* ttft =
      *registry.AddHistogram({.name = "ray_vllm_time_to_first_token_seconds",
                              .help = "TTFT.",
                              .label_names = {"ReplicaId"}},
                             {0.1, 1});
  metrics::Histogram* replica = *ttft->WithLabels({"llm#L#1"});
  replica->Observe(0.05);
  replica->Observe(0.5);
  (*(*registry.AddGauge({.name = "tessera_serve_deployment_replicas", .help = "R."}))
        ->WithLabels({}))
      ->Set(NAN);
  ASSERT_TRUE(registry.AddGauge({.name = "tessera_nodes", .help = "Nodes."}).ok());

  const nlohmann::ordered_json json = ServeMetricsJson(registry.Collect());
  const nlohmann::ordered_json& families = json.at("families");
  ASSERT_EQ(families.size(), 3u) << json.dump();
  EXPECT_EQ(families[0].at("name"), "ray_serve_num_http_requests_total");
  EXPECT_EQ(families[0].at("type"), "counter");
  EXPECT_EQ(families[0].at("help"), "Requests.");
  EXPECT_EQ(families[0].at("series")[0].at("labels"),
            nlohmann::ordered_json({{"route", "/"}, {"application", "llm"}}));
  EXPECT_EQ(families[0].at("series")[0].at("value"), 3);
  const nlohmann::ordered_json& histogram = families[1].at("series")[0];
  EXPECT_EQ(families[1].at("type"), "histogram");
  EXPECT_EQ(histogram.at("count"), 2);
  EXPECT_DOUBLE_EQ(histogram.at("sum").get<double>(), 0.55);
  EXPECT_EQ(histogram.at("bounds"), nlohmann::ordered_json({0.1, 1.0}));
  EXPECT_EQ(histogram.at("counts"), nlohmann::ordered_json({1, 2, 2}));
  EXPECT_EQ(families[2].at("name"), "tessera_serve_deployment_replicas");
  EXPECT_TRUE(families[2].at("series")[0].at("value").is_null());
  EXPECT_NO_THROW(json.dump());
}

}  // namespace
}  // namespace tessera::serve
