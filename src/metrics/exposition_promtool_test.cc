// Prometheus's own linter judges our output: a registry holding every metric type (labelled and
// not, callbacks, escaping, special values) rendered and piped into `promtool check metrics`,
// which must exit 0 (1: it could not parse the text; 3: lint problems, printed). Skipped, with
// the reason, where promtool is not installed (Debian's `prometheus` package; scripts/setup).
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "metrics/exposition.h"

namespace tessera::metrics {
namespace {

std::optional<std::string> FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return std::nullopt;
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = std::string(dir) + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

// `callbacks` keeps the callback families registered.
void FillEveryType(MetricRegistry& registry, std::vector<CallbackRegistration>& callbacks) {
  CounterFamily* tasks = *registry.AddCounter({.name = "tessera_tasks_finished_total",
                                               .help = "Tasks that ran to the end.",
                                               .label_names = {"outcome", "node"}});
  (*tasks->WithLabels({"succeeded", "n1"}))->Increment(41);
  (*tasks->WithLabels({"failed", "n\"2\"\\\nx"}))->Increment();
  Counter* cpu = *(*registry.AddCounter({.name = "tessera_worker_cpu_seconds_total",
                                         .help = "CPU time of workers \\ all of them\n."}))
                      ->WithLabels({});
  cpu->Add(12.25);
  GaugeFamily* used = *registry.AddGauge({.name = "tessera_object_store_used_bytes",
                                          .help = "Bytes held in the object store.",
                                          .label_names = {"node"}});
  (*used->WithLabels({"n1"}))->Set(1.5e9);
  (*used->WithLabels({""}))->Set(NAN);
  HistogramFamily* durations = *registry.AddHistogram({.name = "tessera_task_duration_seconds",
                                                       .help = "Task execution time.",
                                                       .label_names = {"node"}},
                                                      *ExponentialBuckets(0.001, 10, 5));
  for (double v : {0.0005, 0.05, 3.0, 1e6}) (*durations->WithLabels({"n1"}))->Observe(v);
  ASSERT_TRUE(registry
                  .AddHistogram({.name = "tessera_object_size_bytes", .help = "Object sizes."},
                                {1024, 1048576})
                  .ok());
  callbacks.push_back(*registry.AddCallbackGauge(
      {.name = "tessera_node_devices", .help = "Devices by family.", .label_names = {"family"}},
      [](SampleSink& sink) {
        (void)sink.Emit({"nvidia"}, 8);
        (void)sink.Emit({"amd"}, INFINITY);
      }));
  callbacks.push_back(*registry.AddCallbackCounter(
      {.name = "tessera_object_store_evictions_total", .help = "Objects evicted."},
      [](SampleSink& sink) { (void)sink.Emit({}, 3); }));
}

TEST(ExpositionPromtoolTest, PromtoolChecksEveryTypeClean) {
  const std::optional<std::string> promtool = FindOnPath("promtool");
  if (!promtool.has_value()) {
    std::printf("promtool is not on PATH; install Debian's prometheus package (scripts/setup)\n");
    GTEST_SKIP() << "promtool is not on PATH (Debian package prometheus, see scripts/setup)";
  }
  MetricRegistry registry;
  std::vector<CallbackRegistration> callbacks;
  FillEveryType(registry, callbacks);
  const std::string text = RenderPrometheusText(registry);
  ASSERT_NE(text.find("tessera_node_devices"), std::string::npos);

  const std::string report = ::testing::TempDir() + "/promtool_report.txt";
  const std::string command = *promtool + " check metrics > '" + report + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "w");
  ASSERT_NE(pipe, nullptr);
  ASSERT_EQ(std::fwrite(text.data(), 1, text.size(), pipe), text.size());
  const int status = pclose(pipe);
  std::ifstream report_file(report);
  std::stringstream output;
  output << report_file.rdbuf();
  std::remove(report.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << "promtool did not exit normally";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "promtool says:\n" << output.str() << "\nabout:\n" << text;
}

// The check has teeth: a counter without "_total", which the registry refuses to make, fails it.
TEST(ExpositionPromtoolTest, PromtoolRejectsWhatTheRegistryRefuses) {
  const std::optional<std::string> promtool = FindOnPath("promtool");
  if (!promtool.has_value()) {
    std::printf("promtool is not on PATH; install Debian's prometheus package (scripts/setup)\n");
    GTEST_SKIP() << "promtool is not on PATH (Debian package prometheus, see scripts/setup)";
  }
  const std::string command = *promtool + " check metrics > /dev/null 2>&1";
  FILE* pipe = popen(command.c_str(), "w");
  ASSERT_NE(pipe, nullptr);
  const std::string text =
      "# HELP tessera_tasks Tasks.\n# TYPE tessera_tasks counter\ntessera_tasks 1\n";
  std::fwrite(text.data(), 1, text.size(), pipe);
  const int status = pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace tessera::metrics
