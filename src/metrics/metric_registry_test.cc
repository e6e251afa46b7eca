// The registry's rules: which definitions it accepts, that registering again returns the same
// family or fails, that children are stable and count from any thread, and that callbacks run
// at collection until their registration ends.
#include "metrics/metric_registry.h"

#include <cmath>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::metrics {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

MetricDefinition Def(std::string name, std::vector<std::string> labels = {}) {
  return {.name = std::move(name), .help = "Some help.", .label_names = std::move(labels)};
}

const FamilySnapshot* FindFamily(const std::vector<FamilySnapshot>& families,
                                 std::string_view name) {
  for (const FamilySnapshot& family : families) {
    if (family.name == name) return &family;
  }
  return nullptr;
}

TEST(MetricRegistryTest, ACounterMustEndInTotalAndNothingElseMay) {
  MetricRegistry registry;
  auto counter = registry.AddCounter(Def("tessera_tasks"));
  ASSERT_FALSE(counter.ok());
  EXPECT_THAT(counter.status().message(), HasSubstr("must end with \"_total\""));
  EXPECT_TRUE(registry.AddCounter(Def("tessera_tasks_total")).ok());
  auto gauge = registry.AddGauge(Def("tessera_running_total"));
  ASSERT_FALSE(gauge.ok());
  EXPECT_THAT(gauge.status().message(), HasSubstr("counters only"));
}

TEST(MetricRegistryTest, NamesAreCheckedAgainstThePrometheusRules) {
  MetricRegistry registry;
  for (const char* bad : {"", "1abc", "tessera-tasks", "tessera tasks", "__tessera", "tässera"}) {
    EXPECT_EQ(registry.AddGauge(Def(bad)).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_TRUE(registry.AddGauge(Def("tessera:recorded")).ok());
  EXPECT_TRUE(registry.AddGauge(Def("_private_gauge")).ok());
  // The prefix is a convention only.
  EXPECT_TRUE(registry.AddGauge(Def("process_open_fds")).ok());
}

TEST(MetricRegistryTest, LabelNamesAreCheckedAndReservedOnesRefused) {
  MetricRegistry registry;
  EXPECT_THAT(registry.AddGauge(Def("tessera_a", {"__reserved"})).status().message(),
              HasSubstr("reserves"));
  EXPECT_THAT(registry.AddGauge(Def("tessera_b", {"has-dash"})).status().message(),
              HasSubstr("does not match"));
  EXPECT_THAT(registry.AddGauge(Def("tessera_c", {"node", "node"})).status().message(),
              HasSubstr("appears twice"));
  EXPECT_THAT(registry.AddHistogram(Def("tessera_d_seconds", {"le"}), {1}).status().message(),
              HasSubstr("reserved for buckets"));
  EXPECT_FALSE(registry.AddGauge(Def("tessera_e", {"quantile"})).ok());
  EXPECT_TRUE(registry.AddGauge(Def("tessera_f", {"node", "device_index"})).ok());
}

TEST(MetricRegistryTest, HelpIsRequired) {
  MetricRegistry registry;
  auto family = registry.AddGauge({.name = "tessera_nodes", .help = ""});
  ASSERT_FALSE(family.ok());
  EXPECT_THAT(family.status().message(), HasSubstr("no HELP"));
}

TEST(MetricRegistryTest, OnlyHistogramsMayUseTheirSeriesSuffixes) {
  MetricRegistry registry;
  for (const char* name : {"tessera_x_bucket", "tessera_x_sum", "tessera_x_count"}) {
    EXPECT_FALSE(registry.AddGauge(Def(name)).ok()) << name;
  }
}

TEST(MetricRegistryTest, TheSameDefinitionReturnsTheSameFamily) {
  MetricRegistry registry;
  auto first = registry.AddCounter(Def("tessera_tasks_total", {"outcome"}));
  auto second = registry.AddCounter(Def("tessera_tasks_total", {"outcome"}));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, *second);
}

TEST(MetricRegistryTest, ADifferentDefinitionOfATakenNameIsAnError) {
  MetricRegistry registry;
  ASSERT_TRUE(registry.AddCounter(Def("tessera_tasks_total", {"outcome"})).ok());
  auto other_labels = registry.AddCounter(Def("tessera_tasks_total", {"node"}));
  EXPECT_EQ(other_labels.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(other_labels.status().message(), HasSubstr("labels (outcome)"));
  auto other_help = registry.AddCounter(
      {.name = "tessera_tasks_total", .help = "Other.", .label_names = {"outcome"}});
  EXPECT_EQ(other_help.status().code(), absl::StatusCode::kAlreadyExists);

  ASSERT_TRUE(registry.AddHistogram(Def("tessera_wait_seconds"), {0.1, 1}).ok());
  EXPECT_EQ(registry.AddGauge(Def("tessera_wait_seconds")).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.AddHistogram(Def("tessera_wait_seconds"), {0.1, 2}).status().code(),
            absl::StatusCode::kAlreadyExists);
  // A trailing +Inf is the implicit bucket: the same definition.
  EXPECT_TRUE(registry.AddHistogram(Def("tessera_wait_seconds"), {0.1, 1, INFINITY}).ok());
  // A labelled gauge and a callback gauge are different definitions too.
  ASSERT_TRUE(registry.AddGauge(Def("tessera_nodes")).ok());
  EXPECT_EQ(registry.AddCallbackGauge(Def("tessera_nodes"), [](SampleSink&) {}).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(MetricRegistryTest, HistogramBoundsMustIncrease) {
  MetricRegistry registry;
  EXPECT_THAT(registry.AddHistogram(Def("tessera_a_seconds"), {1, 1}).status().message(),
              HasSubstr("strictly increasing"));
  EXPECT_THAT(registry.AddHistogram(Def("tessera_b_seconds"), {2, 1}).status().message(),
              HasSubstr("strictly increasing"));
  EXPECT_THAT(registry.AddHistogram(Def("tessera_c_seconds"), {NAN}).status().message(),
              HasSubstr("not a finite number"));
  EXPECT_TRUE(registry.AddHistogram(Def("tessera_d_seconds"), {}).ok());  // +Inf only
}

TEST(MetricRegistryTest, BucketHelpersMakeTheBoundsTheySay) {
  EXPECT_THAT(*LinearBuckets(1, 2, 3), ElementsAre(1, 3, 5));
  EXPECT_THAT(*ExponentialBuckets(0.001, 10, 4), ElementsAre(0.001, 0.01, 0.1, 1));
  EXPECT_FALSE(LinearBuckets(0, 0, 3).ok());
  EXPECT_FALSE(ExponentialBuckets(0, 2, 3).ok());
  EXPECT_FALSE(ExponentialBuckets(1, 1, 3).ok());
}

TEST(MetricRegistryTest, AChildIsStableAndItsLabelValuesAreChecked) {
  MetricRegistry registry;
  CounterFamily* family = *registry.AddCounter(Def("tessera_tasks_total", {"outcome", "node"}));
  Counter* ok = *family->WithLabels({"ok", "n1"});
  EXPECT_EQ(*family->WithLabels({"ok", "n1"}), ok);
  EXPECT_EQ(*family->WithLabels(std::vector<std::string>{"ok", "n1"}), ok);
  EXPECT_NE(*family->WithLabels({"failed", "n1"}), ok);
  EXPECT_THAT(family->WithLabels({"ok"}).status().message(), HasSubstr("2 label(s), got 1"));
  EXPECT_THAT(family->WithLabels({"ok", "\xff"}).status().message(), HasSubstr("not UTF-8"));
  // Any UTF-8, the empty string included.
  EXPECT_TRUE(family->WithLabels({"", "nœud \"1\"\n"}).ok());
}

TEST(MetricRegistryTest, CountersOnlyGoUp) {
  MetricRegistry registry;
  Counter* counter = *(*registry.AddCounter(Def("tessera_cpu_seconds_total")))->WithLabels({});
  counter->Increment();
  counter->Increment(2);
  counter->Add(0.5);
  counter->Add(-10);
  counter->Add(NAN);
  EXPECT_DOUBLE_EQ(counter->Value(), 3.5);
}

TEST(MetricRegistryTest, GaugesSetAndAdd) {
  MetricRegistry registry;
  Gauge* gauge = *(*registry.AddGauge(Def("tessera_workers")))->WithLabels({});
  gauge->Set(4);
  gauge->Add(-1.5);
  EXPECT_DOUBLE_EQ(gauge->Value(), 2.5);
}

TEST(MetricRegistryTest, HistogramsCountEachObservationInTheFirstBucketThatHoldsIt) {
  MetricRegistry registry;
  Histogram* histogram =
      *(*registry.AddHistogram(Def("tessera_wait_seconds"), {0.1, 1, 10}))->WithLabels({});
  for (double v : {0.05, 0.1, 0.5, 1.0, 5.0, 50.0}) histogram->Observe(v);
  EXPECT_THAT(histogram->CumulativeCounts(), ElementsAre(2, 4, 5, 6));
  EXPECT_DOUBLE_EQ(histogram->Sum(), 56.65);
  histogram->Observe(NAN);  // only in +Inf
  EXPECT_THAT(histogram->CumulativeCounts(), ElementsAre(2, 4, 5, 7));
}

TEST(MetricRegistryTest, CollectGivesFamiliesInNameOrderAndSeriesInLabelOrder) {
  MetricRegistry registry;
  GaugeFamily* b = *registry.AddGauge(Def("tessera_b", {"node"}));
  ASSERT_TRUE(registry.AddGauge(Def("tessera_a")).ok());
  ASSERT_TRUE(registry.AddGauge(Def("tessera_empty", {"node"})).ok());  // no series: left out
  (*b->WithLabels({"n2"}))->Set(2);
  (*b->WithLabels({"n1"}))->Set(1);
  const std::vector<FamilySnapshot> families = registry.Collect();
  ASSERT_EQ(families.size(), 2u);
  EXPECT_EQ(families[0].name, "tessera_a");  // unlabelled: 0 from the start
  ASSERT_EQ(families[0].series.size(), 1u);
  EXPECT_EQ(families[0].series[0].value, 0);
  EXPECT_EQ(families[1].name, "tessera_b");
  ASSERT_EQ(families[1].series.size(), 2u);
  EXPECT_THAT(families[1].series[0].label_values, ElementsAre("n1"));
  EXPECT_THAT(families[1].series[1].label_values, ElementsAre("n2"));
}

TEST(MetricRegistryTest, CountsFromManyThreadsAddUp) {
  MetricRegistry registry;
  Counter* counter = *(*registry.AddCounter(Def("tessera_events_total")))->WithLabels({});
  Histogram* histogram =
      *(*registry.AddHistogram(Def("tessera_size_bytes"), {10, 100}))->WithLabels({});
  constexpr int kThreads = 8;
  constexpr int kEach = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        counter->Increment();
        histogram->Observe(i % 3 == 0 ? 5 : 50);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(counter->Value(), kThreads * kEach);
  EXPECT_EQ(histogram->CumulativeCounts().back(), static_cast<uint64_t>(kThreads * kEach));
}

TEST(MetricRegistryTest, ACallbackEmitsItsSamplesAtEachCollect) {
  MetricRegistry registry;
  int objects = 3;
  auto registration = registry.AddCallbackGauge(
      Def("tessera_store_objects", {"store"}), [&objects](SampleSink& sink) {
        EXPECT_TRUE(sink.Emit({"b"}, objects).ok());
        EXPECT_TRUE(sink.Emit({"a"}, 1).ok());
        EXPECT_TRUE(sink.Emit({"a"}, 99).ok());  // a second time: the first value stays
        EXPECT_FALSE(sink.Emit({"a", "extra"}, 1).ok());
      });
  ASSERT_TRUE(registration.ok()) << registration.status();
  objects = 7;
  const std::vector<FamilySnapshot> families = registry.Collect();
  const FamilySnapshot* family = FindFamily(families, "tessera_store_objects");
  ASSERT_NE(family, nullptr);
  ASSERT_EQ(family->series.size(), 2u);
  EXPECT_THAT(family->series[0].label_values, ElementsAre("a"));
  EXPECT_EQ(family->series[0].value, 1);
  EXPECT_EQ(family->series[1].value, 7);
}

TEST(MetricRegistryTest, ACallbackStopsWhenItsRegistrationEndsAndCanBeReplaced) {
  MetricRegistry registry;
  int runs = 0;
  auto counting = [&runs](SampleSink& sink) {
    ++runs;
    (void)sink.Emit({}, 1);
  };
  {
    auto registration = registry.AddCallbackCounter(Def("tessera_evictions_total"), counting);
    ASSERT_TRUE(registration.ok());
    EXPECT_EQ(registry.AddCallbackCounter(Def("tessera_evictions_total"), counting).status().code(),
              absl::StatusCode::kAlreadyExists);
    registry.Collect();
    EXPECT_EQ(runs, 1);
  }
  EXPECT_EQ(FindFamily(registry.Collect(), "tessera_evictions_total"), nullptr);
  EXPECT_EQ(runs, 1);
  auto again = registry.AddCallbackCounter(Def("tessera_evictions_total"), counting);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NE(FindFamily(registry.Collect(), "tessera_evictions_total"), nullptr);
  EXPECT_EQ(runs, 2);
}

TEST(MetricRegistryTest, ARegistrationMayOutliveItsRegistry) {
  CallbackRegistration registration;
  {
    MetricRegistry registry;
    registration = *registry.AddCallbackGauge(Def("tessera_x"), [](SampleSink&) {});
  }
  EXPECT_TRUE(registration.active());
  registration.Reset();
  EXPECT_FALSE(registration.active());
}

TEST(MetricRegistryTest, ACallbackMayUseTheRegistry) {
  MetricRegistry registry;
  auto registration = registry.AddCallbackGauge(Def("tessera_x"), [&registry](SampleSink& sink) {
    EXPECT_TRUE(registry.AddGauge(Def("tessera_y")).ok());
    (void)sink.Emit({}, 1);
  });
  ASSERT_TRUE(registration.ok());
  EXPECT_EQ(registry.Collect().size(), 1u);  // tessera_y appeared after the family list was read
  EXPECT_EQ(registry.Collect().size(), 2u);
}

// A relayed family as another process's text would give it.
FamilySnapshot Relayed(std::string name, MetricType type, std::vector<std::string> labels,
                       std::vector<SeriesSnapshot> series, std::vector<double> bounds = {}) {
  FamilySnapshot family;
  family.name = std::move(name);
  family.help = "Relayed.";
  family.type = type;
  family.label_names = std::move(labels);
  family.bucket_bounds = std::move(bounds);
  family.series = std::move(series);
  return family;
}

SeriesSnapshot Value(std::vector<std::string> labels, double value) {
  SeriesSnapshot series;
  series.label_values = std::move(labels);
  series.value = value;
  return series;
}

SeriesSnapshot Counts(std::vector<uint64_t> cumulative, double sum) {
  SeriesSnapshot series;
  series.cumulative_counts = std::move(cumulative);
  series.sum = sum;
  return series;
}

TEST(MetricRegistryTest, ARelaysFamiliesJoinTheRegistrysInNameOrder) {
  MetricRegistry registry;
  ASSERT_TRUE(registry.AddGauge(Def("tessera_m")).ok());
  int runs = 0;
  auto relay = registry.AddRelay([&runs] {
    ++runs;
    return std::vector<FamilySnapshot>{
        Relayed("ray_z_seconds", MetricType::kHistogram, {}, {Counts({1, 3}, 2.5)}, {0.5}),
        Relayed("ray_a", MetricType::kGauge, {"r"}, {Value({"b"}, 2), Value({"a"}, 1)}),
    };
  });
  ASSERT_TRUE(relay.ok()) << relay.status();
  const std::vector<FamilySnapshot> families = registry.Collect();
  EXPECT_EQ(runs, 1);
  ASSERT_EQ(families.size(), 3u);
  EXPECT_EQ(families[0].name, "ray_a");
  EXPECT_EQ(families[1].name, "ray_z_seconds");
  EXPECT_EQ(families[2].name, "tessera_m");
  ASSERT_EQ(families[0].series.size(), 2u);
  EXPECT_THAT(families[0].series[0].label_values, ElementsAre("a"));  // sorted
  EXPECT_THAT(families[1].series[0].cumulative_counts, ElementsAre(1u, 3u));
  relay->Reset();
  EXPECT_EQ(registry.Collect().size(), 1u);
  EXPECT_EQ(runs, 1);
}

TEST(MetricRegistryTest, ARelayedFamilyThatBreaksARuleOrTakesANameIsLeftOut) {
  MetricRegistry registry;
  ASSERT_TRUE(registry.AddGauge(Def("tessera_taken")).ok());
  auto relay = registry.AddRelay([] {
    return std::vector<FamilySnapshot>{
        Relayed("tessera_taken", MetricType::kGauge, {}, {Value({}, 5)}),
        Relayed("ray_requests", MetricType::kCounter, {}, {Value({}, 1)}),  // no _total
        Relayed("ray_short", MetricType::kGauge, {"a", "b"}, {Value({"x"}, 1)}),
        Relayed("ray_le", MetricType::kGauge, {"le"}, {Value({"1"}, 1)}),
        Relayed("ray_down_seconds", MetricType::kHistogram, {}, {Counts({3, 1}, 1)}, {0.5}),
        Relayed("ray_few_seconds", MetricType::kHistogram, {}, {Counts({3}, 1)}, {0.5}),
        Relayed("ray_inf_seconds", MetricType::kHistogram, {}, {Counts({1, 1}, 1)}, {INFINITY}),
        Relayed("ray_ok", MetricType::kGauge, {}, {Value({}, 1)}),
        Relayed("ray_ok", MetricType::kGauge, {}, {Value({}, 2)}),  // a second time: the first
    };
  });
  ASSERT_TRUE(relay.ok());
  const std::vector<FamilySnapshot> families = registry.Collect();
  ASSERT_EQ(families.size(), 2u);
  EXPECT_EQ(families[0].name, "ray_ok");
  EXPECT_EQ(families[0].series[0].value, 1);
  EXPECT_EQ(families[1].name, "tessera_taken");
  EXPECT_EQ(families[1].series[0].value, 0);  // the registry's own, not the relay's 5
}

TEST(MetricRegistryTest, CheckFamilySnapshotNamesTheProblem) {
  EXPECT_TRUE(CheckFamilySnapshot(
                  Relayed("ray_h_seconds", MetricType::kHistogram, {}, {Counts({0, 2}, 1)}, {1}))
                  .ok());
  EXPECT_THAT(CheckFamilySnapshot(Relayed("ray_g", MetricType::kGauge, {}, {}, {1})).message(),
              HasSubstr("only a histogram has bucket bounds"));
  EXPECT_THAT(CheckFamilySnapshot(
                  Relayed("ray_h_seconds", MetricType::kHistogram, {}, {Counts({2, 1}, 1)}, {1}))
                  .message(),
              HasSubstr("decrease"));
  EXPECT_THAT(
      CheckFamilySnapshot(Relayed("ray_g", MetricType::kGauge, {"a"}, {Value({}, 1)})).message(),
      HasSubstr("has 1 label(s), got 0"));
}

TEST(MetricRegistryTest, ARelayNeedsACallbackAndDetachedOnesAreDropped) {
  MetricRegistry registry;
  EXPECT_EQ(registry.AddRelay(nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  for (int i = 0; i < 3; ++i) {
    auto relay = registry.AddRelay([] {
      return std::vector<FamilySnapshot>{Relayed("ray_g", MetricType::kGauge, {}, {Value({}, 1)})};
    });
    ASSERT_TRUE(relay.ok());
    EXPECT_EQ(registry.Collect().size(), 1u);
  }
  EXPECT_TRUE(registry.Collect().empty());
}

}  // namespace
}  // namespace tessera::metrics
