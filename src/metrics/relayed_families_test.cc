// Another process's text read back into families: what holds together is kept (counters,
// gauges, histograms with their buckets), what does not is named and left out, a label set on
// every series keeps sources apart, and several sources merge into one list.
#include "metrics/relayed_families.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "metrics/exposition.h"

namespace tessera::metrics {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

RelayedFamilies Read(std::string_view text) {
  absl::StatusOr<ParsedExposition> parsed = ParsePrometheusText(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? FamiliesOfExposition(*parsed) : RelayedFamilies();
}

const FamilySnapshot* Find(const std::vector<FamilySnapshot>& families, std::string_view name) {
  for (const FamilySnapshot& family : families) {
    if (family.name == name) return &family;
  }
  return nullptr;
}

// What the built-in LLM engine renders (python/tessera/serve/llm/metrics.py), shortened.
constexpr char kEngineText[] =
    "# HELP ray_vllm_time_to_first_token_seconds Histogram of time to first token in seconds.\n"
    "# TYPE ray_vllm_time_to_first_token_seconds histogram\n"
    "ray_vllm_time_to_first_token_seconds_bucket{ReplicaId=\"a#L#1\",engine=\"0\","
    "model_name=\"m\",le=\"0.01\"} 1.0\n"
    "ray_vllm_time_to_first_token_seconds_bucket{ReplicaId=\"a#L#1\",engine=\"0\","
    "model_name=\"m\",le=\"0.1\"} 3.0\n"
    "ray_vllm_time_to_first_token_seconds_bucket{ReplicaId=\"a#L#1\",engine=\"0\","
    "model_name=\"m\",le=\"+Inf\"} 4.0\n"
    "ray_vllm_time_to_first_token_seconds_sum{ReplicaId=\"a#L#1\",engine=\"0\","
    "model_name=\"m\"} 0.5\n"
    "ray_vllm_time_to_first_token_seconds_count{ReplicaId=\"a#L#1\",engine=\"0\","
    "model_name=\"m\"} 4.0\n"
    "# HELP ray_vllm_num_requests_running Number of requests in model execution batches.\n"
    "# TYPE ray_vllm_num_requests_running gauge\n"
    "ray_vllm_num_requests_running{ReplicaId=\"a#L#1\",engine=\"0\",model_name=\"m\"} 2.0\n"
    "# HELP ray_vllm_generation_tokens_total Number of generation tokens processed.\n"
    "# TYPE ray_vllm_generation_tokens_total counter\n"
    "ray_vllm_generation_tokens_total{ReplicaId=\"a#L#1\",engine=\"0\",model_name=\"m\"} 40.0\n";

TEST(RelayedFamiliesTest, TheEnginesTextBecomesItsFamilies) {
  const RelayedFamilies read = Read(kEngineText);
  EXPECT_THAT(read.dropped, IsEmpty());
  ASSERT_EQ(read.families.size(), 3u);
  const FamilySnapshot* ttft = Find(read.families, "ray_vllm_time_to_first_token_seconds");
  ASSERT_NE(ttft, nullptr);
  EXPECT_EQ(ttft->type, MetricType::kHistogram);
  EXPECT_EQ(ttft->help, "Histogram of time to first token in seconds.");
  EXPECT_THAT(ttft->label_names, ElementsAre("ReplicaId", "engine", "model_name"));
  EXPECT_THAT(ttft->bucket_bounds, ElementsAre(0.01, 0.1));
  ASSERT_EQ(ttft->series.size(), 1u);
  EXPECT_THAT(ttft->series[0].label_values, ElementsAre("a#L#1", "0", "m"));
  EXPECT_THAT(ttft->series[0].cumulative_counts, ElementsAre(1u, 3u, 4u));
  EXPECT_EQ(ttft->series[0].sum, 0.5);
  const FamilySnapshot* tokens = Find(read.families, "ray_vllm_generation_tokens_total");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->type, MetricType::kCounter);
  EXPECT_EQ(tokens->series[0].value, 40);
}

TEST(RelayedFamiliesTest, ReadFamiliesRenderBackToTheSameSamples) {
  const RelayedFamilies read = Read(kEngineText);
  absl::StatusOr<ParsedExposition> again = ParsePrometheusText(RenderPrometheusText(read.families));
  ASSERT_TRUE(again.ok()) << again.status();
  const std::vector<std::pair<std::string, std::string>> labels = {
      {"ReplicaId", "a#L#1"}, {"engine", "0"}, {"model_name", "m"}};
  auto with_le = [&labels](std::string le) {
    auto out = labels;
    out.emplace_back("le", std::move(le));
    return out;
  };
  EXPECT_EQ(again->Value("ray_vllm_time_to_first_token_seconds_bucket", with_le("0.1")), 3);
  EXPECT_EQ(again->Value("ray_vllm_time_to_first_token_seconds_bucket", with_le("+Inf")), 4);
  EXPECT_EQ(again->Value("ray_vllm_time_to_first_token_seconds_count", labels), 4);
  EXPECT_EQ(again->Value("ray_vllm_num_requests_running", labels), 2);
}

TEST(RelayedFamiliesTest, FamiliesThatDoNotHoldTogetherAreNamedAndLeftOut) {
  const RelayedFamilies read = Read(
      "untyped_thing 1\n"
      "# TYPE s summary\n"
      "s{quantile=\"0.5\"} 1\n"
      "s_sum 1\n"
      "s_count 1\n"
      "# TYPE no_inf histogram\n"
      "no_inf_bucket{le=\"1\"} 1\n"
      "no_inf_sum 1\n"
      "no_inf_count 1\n"
      "# TYPE cut histogram\n"
      "cut_bucket{le=\"1\"} 1\n"
      "cut_bucket{le=\"+Inf\"} 2\n"
      "cut_sum 1\n"
      "cut_count 3\n"
      "# TYPE down histogram\n"
      "down_bucket{le=\"1\"} 2\n"
      "down_bucket{le=\"+Inf\"} 1\n"
      "down_sum 1\n"
      "down_count 1\n"
      "# TYPE half histogram\n"
      "half_bucket{le=\"+Inf\"} 1.5\n"
      "half_sum 1\n"
      "half_count 1.5\n"
      "# TYPE apart histogram\n"
      "apart_bucket{a=\"x\",le=\"1\"} 1\n"
      "apart_bucket{a=\"x\",le=\"+Inf\"} 1\n"
      "apart_sum{a=\"x\"} 1\n"
      "apart_count{a=\"x\"} 1\n"
      "apart_bucket{a=\"y\",le=\"2\"} 1\n"
      "apart_bucket{a=\"y\",le=\"+Inf\"} 1\n"
      "apart_sum{a=\"y\"} 1\n"
      "apart_count{a=\"y\"} 1\n"
      "# TYPE requests counter\n"
      "requests 1\n"
      "# TYPE fine gauge\n"
      "fine 1\n");
  ASSERT_EQ(read.families.size(), 1u);
  EXPECT_EQ(read.families[0].name, "fine");
  EXPECT_EQ(read.families[0].help, "fine");  // no HELP: its name
  const std::string dropped = absl::StrJoin(read.dropped, "\n");
  for (const char* why :
       {"untyped_thing: no TYPE", "s: summary families are not relayed",
        "no_inf: a series has no +Inf bucket", "cut: a series' _count differs from its +Inf bucket",
        "down: ", "half: a count 1.5 is not a whole number",
        "apart: its series have different bucket bounds",
        "requests: counter requests must end with \"_total\""}) {
    EXPECT_THAT(dropped, HasSubstr(why));
  }
  EXPECT_EQ(read.dropped.size(), 8u);
}

TEST(RelayedFamiliesTest, LabelNamesAreTheUnionOfTheSeries) {
  const RelayedFamilies read = Read(
      "# TYPE g gauge\n"
      "g{b=\"1\"} 1\n"
      "g{a=\"2\"} 2\n");
  ASSERT_EQ(read.families.size(), 1u);
  EXPECT_THAT(read.families[0].label_names, ElementsAre("a", "b"));
  ASSERT_EQ(read.families[0].series.size(), 2u);
  EXPECT_THAT(read.families[0].series[0].label_values, ElementsAre("", "1"));
  EXPECT_THAT(read.families[0].series[1].label_values, ElementsAre("2", ""));
}

TEST(RelayedFamiliesTest, SetLabelAddsOrReplacesTheLabelOnEverySeries) {
  RelayedFamilies read = Read(
      "# TYPE g gauge\n"
      "g{ReplicaId=\"spoofed\",z=\"1\"} 1\n"
      "# TYPE h gauge\n"
      "h{a=\"1\"} 1\n");
  ASSERT_TRUE(SetLabel(read.families, "ReplicaId", "app#D#1").ok());
  EXPECT_THAT(read.families[0].label_names, ElementsAre("ReplicaId", "z"));
  EXPECT_THAT(read.families[0].series[0].label_values, ElementsAre("app#D#1", "1"));
  EXPECT_THAT(read.families[1].label_names, ElementsAre("ReplicaId", "a"));
  EXPECT_THAT(read.families[1].series[0].label_values, ElementsAre("app#D#1", "1"));
  EXPECT_EQ(SetLabel(read.families, "le", "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SetLabel(read.families, "bad-name", "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.families[0].label_names, ElementsAre("ReplicaId", "z"));
}

TEST(RelayedFamiliesTest, SourcesMergeByNameAndADisagreeingOneIsLeftOut) {
  RelayedFamilies one = Read("# TYPE g gauge\ng{a=\"1\"} 1\n# TYPE c_total counter\nc_total 1\n");
  RelayedFamilies two = Read("# TYPE g gauge\ng{b=\"2\"} 2\n# TYPE c_total gauge\nc_total 5\n");
  // c_total as a gauge breaks the suffix rule itself: only the first source has it.
  EXPECT_EQ(two.families.size(), 1u);
  RelayedFamilies three = Read("# TYPE g counter\n");  // no samples: nothing
  RelayedFamilies four = Read("# TYPE g histogram\ng_bucket{le=\"+Inf\"} 1\ng_sum 1\ng_count 1\n");
  std::vector<std::string> dropped;
  const std::vector<FamilySnapshot> merged =
      MergeFamilies({one.families, two.families, three.families, four.families}, &dropped);
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[0].name, "c_total");
  const FamilySnapshot& g = merged[1];
  EXPECT_THAT(g.label_names, ElementsAre("a", "b"));
  ASSERT_EQ(g.series.size(), 2u);
  EXPECT_THAT(g.series[0].label_values, ElementsAre("", "2"));
  EXPECT_THAT(g.series[1].label_values, ElementsAre("1", ""));
  EXPECT_THAT(dropped, ElementsAre(HasSubstr("g: an earlier source has it")));
}

}  // namespace
}  // namespace tessera::metrics
