// The text-format parser: what a rendered registry parses back to, what the format allows
// that our renderer never writes, and bad input refused with its line and column.
#include "metrics/exposition_parser.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "metrics/exposition.h"

namespace tessera::metrics {
namespace {

using ::testing::HasSubstr;

TEST(ExpositionParserTest, ARenderedRegistryParsesBackToItsValues) {
  MetricRegistry registry;
  CounterFamily* tasks = *registry.AddCounter(
      {.name = "tessera_tasks_total", .help = "Tasks.\nAll of them \\o/", .label_names = {"q"}});
  (*tasks->WithLabels({"a \"b\"\n\\c"}))->Increment(3);
  Gauge* temperature =
      *(*registry.AddGauge({.name = "tessera_temperature_celsius", .help = "T."}))->WithLabels({});
  temperature->Set(-0.1);
  Histogram* wait = *(*registry.AddHistogram({.name = "tessera_wait_seconds", .help = "W."}, {0.5}))
                         ->WithLabels({});
  wait->Observe(0.25);
  wait->Observe(2);
  auto registration = registry.AddCallbackGauge(
      {.name = "tessera_weird", .help = "W.", .label_names = {"k"}}, [](SampleSink& sink) {
        (void)sink.Emit({"nan"}, NAN);
        (void)sink.Emit({"inf"}, -INFINITY);
      });

  auto parsed = ParsePrometheusText(RenderPrometheusText(registry));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Value("tessera_tasks_total", {{"q", "a \"b\"\n\\c"}}), 3);
  EXPECT_EQ(parsed->Value("tessera_temperature_celsius"), -0.1);
  EXPECT_EQ(parsed->Value("tessera_wait_seconds_bucket", {{"le", "0.5"}}), 1);
  EXPECT_EQ(parsed->Value("tessera_wait_seconds_bucket", {{"le", "+Inf"}}), 2);
  EXPECT_EQ(parsed->Value("tessera_wait_seconds_sum"), 2.25);
  EXPECT_EQ(parsed->Value("tessera_wait_seconds_count"), 2);
  EXPECT_TRUE(std::isnan(*parsed->Value("tessera_weird", {{"k", "nan"}})));
  EXPECT_EQ(parsed->Value("tessera_weird", {{"k", "inf"}}), -INFINITY);
  EXPECT_EQ(parsed->Value("tessera_tasks_total", {{"q", "other"}}), std::nullopt);
  EXPECT_EQ(parsed->help.at("tessera_tasks_total"), "Tasks.\nAll of them \\o/");
  EXPECT_EQ(parsed->types.at("tessera_wait_seconds"), "histogram");
  EXPECT_EQ(parsed->samples.size(), 8u);
}

TEST(ExpositionParserTest, WhatTheFormatAllowsIsAccepted) {
  auto parsed = ParsePrometheusText(
      "\n"
      "# a plain comment\n"
      "#TYPE x untyped\n"
      "  x\t{ b = \"2\" , a=\"1\", }   7   1700000000000  \n"
      "y{} +inf\n"
      "z 1e3\n"
      "w -Infinity\n"
      "v .5\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Value("x", {{"a", "1"}, {"b", "2"}}), 7);
  EXPECT_EQ(parsed->samples[0].timestamp_ms, 1700000000000);
  EXPECT_EQ(parsed->samples[0].labels[0].first, "b");  // as written
  EXPECT_EQ(parsed->Value("y"), INFINITY);
  EXPECT_EQ(parsed->Value("z"), 1000);
  EXPECT_EQ(parsed->Value("w"), -INFINITY);
  EXPECT_EQ(parsed->Value("v"), 0.5);
  EXPECT_EQ(parsed->types.at("x"), "untyped");
}

TEST(ExpositionParserTest, EmptyInputHasNoSamples) {
  auto parsed = ParsePrometheusText("");
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->samples.empty());
}

struct BadInput {
  const char* text;
  const char* error;
};

class ExpositionParserBadInputTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(ExpositionParserBadInputTest, IsRefusedWithItsLineAndColumn) {
  auto parsed = ParsePrometheusText(GetParam().text);
  ASSERT_FALSE(parsed.ok()) << GetParam().text;
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr(GetParam().error)) << GetParam().text;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ExpositionParserBadInputTest,
    ::testing::Values(
        BadInput{"x 1", "line 1, column 4: the last line does not end"},
        BadInput{"x 1\n9y 2\n", "line 2, column 1: expected a metric name"},
        BadInput{"x\n", "line 1, column 2: expected a value"},
        BadInput{"x one\n", "line 1, column 3: not a number: \"one\""},
        BadInput{"x 0x10\n", "not a number"}, BadInput{"x 1e400\n", "not a number"},
        BadInput{"x 1 12.5\n", "line 1, column 5: not an int64 timestamp"},
        BadInput{"x 1 2 3\n", "line 1, column 7: unexpected text after the timestamp"},
        BadInput{"x{a=\"1\"\n", "line 1, column 8: expected ',' or '}'"},
        BadInput{"x{a=\"1} 2\n", "the label value is not closed"},
        BadInput{"x{a=1} 2\n", "line 1, column 5: expected '\"'"},
        BadInput{"x{a \"1\"} 2\n", "line 1, column 5: expected '=' after label a"},
        BadInput{"x{1a=\"1\"} 2\n", "line 1, column 3: expected a label name"},
        BadInput{"x{a=\"\\t\"} 2\n", "line 1, column 6: unknown escape"},
        BadInput{"x{a=\"1\",a=\"2\"} 2\n", "line 1, column 9: label a appears twice"},
        BadInput{"x{a=\"\xff\"} 2\n", "line 1, column 6: not UTF-8"},
        BadInput{"x{a=\"1\"} 2\nx{a=\"1\"} 3\n", "line 2, column 1: a second sample"},
        BadInput{"# TYPE x counter\n# TYPE x gauge\n", "line 2, column 8: a second TYPE"},
        BadInput{"# HELP x a\n# HELP x b\n", "line 2, column 8: a second HELP"},
        BadInput{"# TYPE x summer\n", "line 1, column 10: unknown metric type \"summer\""},
        BadInput{"# TYPE x gauge extra\n", "unexpected text after the metric type"},
        BadInput{"# TYPE\n", "expected a metric name after TYPE"},
        BadInput{"x_bucket{le=\"1\"} 1\n# TYPE x histogram\n", "comes after its samples"},
        BadInput{"x{a=\"1\"}2\n", "expected a blank before the value"}));

TEST(ExpositionParserTest, ValuesParseLikeGo) {
  EXPECT_EQ(ParsePrometheusValue("42"), 42);
  EXPECT_EQ(ParsePrometheusValue("+42"), 42);
  EXPECT_EQ(ParsePrometheusValue("-1.5e-3"), -0.0015);
  EXPECT_EQ(ParsePrometheusValue("1E3"), 1000);
  EXPECT_EQ(ParsePrometheusValue("5."), 5);
  EXPECT_EQ(ParsePrometheusValue("1e-400"), 0);  // underflow rounds to zero
  EXPECT_EQ(ParsePrometheusValue("Inf"), INFINITY);
  EXPECT_TRUE(std::isnan(*ParsePrometheusValue("nan")));
  for (const char* bad : {"", "+", "--1", "+-1", "1.2.3", "1e", " 1", "0x1p3", "1_000", "Infx"}) {
    EXPECT_EQ(ParsePrometheusValue(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace tessera::metrics
