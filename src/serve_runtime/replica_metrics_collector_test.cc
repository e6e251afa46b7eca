// The replicas' own metrics relayed on the registry: what each kept replica answers, tagged with
// its ReplicaId, merged across replicas; a replica's bad text leaves only that replica out; a
// replica no longer kept loses its series at once, and a late answer does not bring them back;
// a call still in flight is not made again.
#include "serve_runtime/replica_metrics_collector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "metrics/exposition.h"
#include "metrics/exposition_parser.h"
#include "serve_runtime/replica_test_fakes.h"

namespace tessera::serve {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using fakes::FakeReplicaRuntime;
using fakes::WaitUntil;

// What a Serve LLM replica answers (python/tessera/serve/llm/metrics.py's shape).
std::string EngineText(int tokens, const std::string& replica_tag = "") {
  const std::string tag = replica_tag.empty() ? "" : "ReplicaId=\"" + replica_tag + "\",";
  return "# HELP ray_vllm_generation_tokens_total Number of generation tokens processed.\n"
         "# TYPE ray_vllm_generation_tokens_total counter\n"
         "ray_vllm_generation_tokens_total{" +
         tag + "engine=\"0\",model_name=\"m\"} " + std::to_string(tokens) +
         "\n"
         "# HELP ray_vllm_time_to_first_token_seconds TTFT.\n"
         "# TYPE ray_vllm_time_to_first_token_seconds histogram\n"
         "ray_vllm_time_to_first_token_seconds_bucket{" +
         tag +
         "engine=\"0\",model_name=\"m\",le=\"0.1\"} 1\n"
         "ray_vllm_time_to_first_token_seconds_bucket{" +
         tag +
         "engine=\"0\",model_name=\"m\",le=\"+Inf\"} 2\n"
         "ray_vllm_time_to_first_token_seconds_sum{" +
         tag +
         "engine=\"0\",model_name=\"m\"} 0.3\n"
         "ray_vllm_time_to_first_token_seconds_count{" +
         tag + "engine=\"0\",model_name=\"m\"} 2\n";
}

class ReplicaMetricsCollectorTest : public ::testing::Test {
 protected:
  ReplicaMetricsCollectorTest() {
    absl::StatusOr<std::unique_ptr<ReplicaMetricsCollector>> made =
        ReplicaMetricsCollector::Create({.runtime = &runtime_, .registry = &registry_});
    EXPECT_TRUE(made.ok()) << made.status();
    collector_ = *std::move(made);
  }

  // The head's /metrics as a scraper reads it.
  metrics::ParsedExposition Scrape() {
    absl::StatusOr<metrics::ParsedExposition> parsed =
        metrics::ParsePrometheusText(metrics::RenderPrometheusText(registry_));
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    return parsed.ok() ? *parsed : metrics::ParsedExposition();
  }

  static std::optional<double> Tokens(const metrics::ParsedExposition& scraped,
                                      const std::string& replica) {
    return scraped.Value("ray_vllm_generation_tokens_total",
                         {{"ReplicaId", replica}, {"engine", "0"}, {"model_name", "m"}});
  }

  // Collects once and waits for every answer to be taken in.
  void CollectAndSettle(size_t replicas) {
    const size_t before = runtime_.calls_of(kMetricsMethod);
    collector_->Collect();
    ASSERT_TRUE(WaitUntil([&] { return runtime_.calls_of(kMetricsMethod) == before + replicas; }));
    // The fake answers in order on one thread: a probe call posted now is answered after them.
    absl::Notification drained;
    runtime_.Call("probe", "get_num_ongoing_requests", std::nullopt, absl::Seconds(1),
                  [&drained](absl::StatusOr<std::string>) { drained.Notify(); });
    ASSERT_TRUE(drained.WaitForNotificationWithTimeout(fakes::kPatience));
  }

  metrics::MetricRegistry registry_;
  FakeReplicaRuntime runtime_;
  std::unique_ptr<ReplicaMetricsCollector> collector_;
};

TEST_F(ReplicaMetricsCollectorTest, EachReplicasSeriesAreRelayedWithItsReplicaId) {
  runtime_.SetAnswer("app#L#1", kMetricsMethod, EngineText(40));
  runtime_.SetAnswer("app#L#2", kMetricsMethod, EngineText(7, "app#L#1"));  // a spoofed id
  collector_->Keep({"app#L#1", "app#L#2"});
  CollectAndSettle(2);

  const metrics::ParsedExposition scraped = Scrape();
  EXPECT_EQ(Tokens(scraped, "app#L#1"), 40);
  EXPECT_EQ(Tokens(scraped, "app#L#2"), 7) << "a replica's series carry its own id";
  EXPECT_EQ(scraped.types.at("ray_vllm_time_to_first_token_seconds"), "histogram");
  EXPECT_EQ(scraped.Value(
                "ray_vllm_time_to_first_token_seconds_bucket",
                {{"ReplicaId", "app#L#2"}, {"engine", "0"}, {"model_name", "m"}, {"le", "0.1"}}),
            1);
  EXPECT_EQ(scraped.help.at("ray_vllm_generation_tokens_total"),
            "Number of generation tokens processed.");
}

TEST_F(ReplicaMetricsCollectorTest, AnAnswerReplacesTheReplicasSeries) {
  runtime_.SetAnswer("app#L#1", kMetricsMethod, EngineText(1));
  collector_->Keep({"app#L#1"});
  CollectAndSettle(1);
  EXPECT_EQ(Tokens(Scrape(), "app#L#1"), 1);
  runtime_.SetAnswer("app#L#1", kMetricsMethod, EngineText(5));
  CollectAndSettle(1);
  EXPECT_EQ(Tokens(Scrape(), "app#L#1"), 5);
}

TEST_F(ReplicaMetricsCollectorTest, ABadAnswerLeavesOnlyThatReplicaOut) {
  ASSERT_TRUE(registry_.AddGauge({.name = "tessera_head_own", .help = "Own."}).ok());
  runtime_.SetAnswer("app#L#1", kMetricsMethod, EngineText(3));
  runtime_.SetAnswer("app#L#2", kMetricsMethod, std::string("not { prometheus text\n"));
  runtime_.SetAnswer("app#L#3", kMetricsMethod, absl::InternalError("AttributeError"));
  runtime_.SetAnswer("app#L#4", kMetricsMethod,
                     std::string("# TYPE tessera_head_own gauge\ntessera_head_own 99\n"
                                 "# TYPE ray_vllm_generation_tokens_total gauge\n"
                                 "ray_vllm_generation_tokens_total 1\n"));
  collector_->Keep({"app#L#1", "app#L#2", "app#L#3", "app#L#4"});
  CollectAndSettle(4);

  const std::string text = metrics::RenderPrometheusText(registry_);
  const metrics::ParsedExposition scraped = Scrape();
  EXPECT_EQ(Tokens(scraped, "app#L#1"), 3);
  EXPECT_THAT(text, Not(HasSubstr("app#L#2")));
  EXPECT_THAT(text, Not(HasSubstr("app#L#3")));
  // Replica 4's families break a rule (a gauge named _total) or take the head's own name.
  EXPECT_THAT(text, Not(HasSubstr("app#L#4")));
  EXPECT_EQ(scraped.Value("tessera_head_own"), 0);

  // A replica whose text is good again is relayed again.
  runtime_.SetAnswer("app#L#2", kMetricsMethod, EngineText(9));
  CollectAndSettle(4);
  EXPECT_EQ(Tokens(Scrape(), "app#L#2"), 9);
}

TEST_F(ReplicaMetricsCollectorTest, AReplicaNoLongerKeptLosesItsSeriesAtOnce) {
  runtime_.SetAnswer("app#L#1", kMetricsMethod, EngineText(3));
  runtime_.SetAnswer("app#L#2", kMetricsMethod, EngineText(4));
  collector_->Keep({"app#L#1", "app#L#2"});
  CollectAndSettle(2);
  collector_->Keep({"app#L#2"});
  const metrics::ParsedExposition scraped = Scrape();
  EXPECT_FALSE(Tokens(scraped, "app#L#1").has_value());
  EXPECT_EQ(Tokens(scraped, "app#L#2"), 4);
  collector_->Keep({});
  EXPECT_TRUE(collector_->Families().empty());
  EXPECT_EQ(metrics::RenderPrometheusText(registry_), "");
}

TEST_F(ReplicaMetricsCollectorTest, ALateAnswerForAForgottenReplicaChangesNothing) {
  runtime_.SetAnswer("app#L#1", kMetricsMethod, EngineText(3));
  runtime_.HoldCalls(kMetricsMethod);
  collector_->Keep({"app#L#1"});
  collector_->Collect();
  ASSERT_TRUE(WaitUntil([&] { return runtime_.calls_of(kMetricsMethod) == 1; }));
  // In flight: the next collection does not ask again.
  collector_->Collect();
  EXPECT_EQ(runtime_.calls_of(kMetricsMethod), 1u);
  collector_->Keep({});
  runtime_.ReleaseHeld();
  CollectAndSettle(0);
  EXPECT_TRUE(collector_->Families().empty());
}

TEST_F(ReplicaMetricsCollectorTest, ItNeedsARuntimeAndARegistry) {
  EXPECT_EQ(ReplicaMetricsCollector::Create({.runtime = &runtime_}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReplicaMetricsCollector::Create({.registry = &registry_}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ReplicaMetricsCollectorTest, TheRelayEndsWithTheCollector) {
  runtime_.SetAnswer("app#L#1", kMetricsMethod, EngineText(3));
  collector_->Keep({"app#L#1"});
  CollectAndSettle(1);
  EXPECT_EQ(Tokens(Scrape(), "app#L#1"), 3);
  collector_.reset();
  EXPECT_EQ(metrics::RenderPrometheusText(registry_), "");
}

}  // namespace
}  // namespace tessera::serve
