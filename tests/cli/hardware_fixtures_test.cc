// `tessera hardware --json --sysroot tests/fixtures/hardware/<machine>` on every fake machine:
// the right families, counts, types, links, NUMA affinity, NICs, resources and labels.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "run_command.h"

namespace tessera::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

const std::string kFixtures = std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/hardware/";

struct Expected {
  std::string machine;
  std::string family;  // "" for a CPU-only machine
  std::string resource;
  int count = 0;
  std::string type;
  std::string probe;
  size_t links = 0;
  std::string link_kind;                // kind of every link, when there are links
  std::map<int, int> devices_per_numa;  // NUMA node -> devices
  size_t distinct_nearest_nics = 0;
  std::map<std::string, std::string> labels;     // must be present with these values
  std::map<std::string, std::string> resources;  // must be present with these values
  std::vector<std::string> absent_resources;
  std::vector<std::string> warnings_mentioning;  // each must appear in some warning
};

// gtest names each parameterized case by its machine rather than dumping the struct's bytes.
void PrintTo(const Expected& e, std::ostream* os) { *os << e.machine; }

json Report(const std::string& machine, const std::map<std::string, std::string>& env = {}) {
  auto r =
      RunCommand({TesseraBinary(), "hardware", "--json", "--sysroot", kFixtures + machine}, env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  return json::parse(r.out);
}

bool AnyWarningContains(const json& report, const std::string& needle) {
  for (const auto& w : report["warnings"]) {
    if (w.get<std::string>().find(needle) != std::string::npos) return true;
  }
  return false;
}

void Check(const Expected& e, const json& report) {
  SCOPED_TRACE(e.machine);
  EXPECT_TRUE(report["errors"].empty()) << report["errors"];
  if (e.family.empty()) {
    EXPECT_EQ(report["accelerators"], 0);
    EXPECT_TRUE(report["families"].empty());
  } else {
    ASSERT_EQ(report["families"].size(), 1u) << report["families"];
    const json& f = report["families"][0];
    EXPECT_EQ(f["family"], e.family);
    EXPECT_EQ(f["resource"], e.resource);
    EXPECT_EQ(f["probe"], e.probe);
    EXPECT_TRUE(f["advertised"].get<bool>());
    ASSERT_EQ(f["devices"].size(), static_cast<size_t>(e.count));
    std::map<int, int> per_numa;
    std::set<std::string> nics;
    for (const json& d : f["devices"]) {
      EXPECT_EQ(d["type"], e.type);
      ++per_numa[d["numa_node"].get<int>()];
      nics.insert(d["nearest_nic"].get<std::string>());
    }
    EXPECT_EQ(per_numa, e.devices_per_numa);
    EXPECT_EQ(nics.size(), e.distinct_nearest_nics);
    EXPECT_FALSE(nics.count("")) << "every device has a nearest NIC";
    EXPECT_EQ(f["links"].size(), e.links);
    for (const json& l : f["links"]) EXPECT_EQ(l["kind"], e.link_kind);
    EXPECT_EQ(report["resources"][e.resource], std::to_string(e.count));
    EXPECT_EQ(report["resources"]["accelerator_type:" + e.type], "1");
    EXPECT_EQ(report["labels"]["tessera.io/accelerator-type"], e.type);
  }
  EXPECT_TRUE(report["resources"].contains("CPU"));
  EXPECT_TRUE(report["resources"].contains("memory"));
  for (const auto& [key, value] : e.labels) EXPECT_EQ(report["labels"][key], value) << key;
  for (const auto& [key, value] : e.resources) EXPECT_EQ(report["resources"][key], value) << key;
  for (const auto& key : e.absent_resources) EXPECT_FALSE(report["resources"].contains(key)) << key;
  for (const auto& needle : e.warnings_mentioning) {
    EXPECT_TRUE(AnyWarningContains(report, needle)) << needle << " in " << report["warnings"];
  }
}

const std::vector<Expected>& AllMachines() {
  static const auto* machines = new std::vector<Expected>{
      {.machine = "cpu-only-vm",
       .resources = {{"CPU", "8"}, {"memory", "17179869184"}},
       .absent_resources = {"GPU", "TPU"}},
      {.machine = "h100-sxm-8",
       .family = "nvidia",
       .resource = "GPU",
       .count = 8,
       .type = "H100",
       .probe = "sysfs",
       .links = 28,
       .link_kind = "nvswitch",
       .devices_per_numa = {{0, 4}, {1, 4}},
       .distinct_nearest_nics = 8,
       .resources = {{"CPU", "224"}},
       .warnings_mentioning = {"NVML not available", "0000:05:00.0", "NVSwitch"}},
      {.machine = "workstation-rtx4090",
       .family = "nvidia",
       .resource = "GPU",
       .count = 1,
       .type = "RTX-4090",
       .probe = "sysfs",
       .devices_per_numa = {{0, 1}},
       .distinct_nearest_nics = 1,
       .warnings_mentioning = {"0000:00:02.0", "integrated", "0000:01:00.1"}},
      {.machine = "mi300x-8",
       .family = "amd",
       .resource = "GPU",
       .count = 8,
       .type = "AMD-Instinct-MI300X-OAM",
       .probe = "kfd",
       .links = 28,
       .link_kind = "xgmi",
       .devices_per_numa = {{0, 4}, {1, 4}},
       .distinct_nearest_nics = 8},
      {.machine = "intel-max-1550-4",
       .family = "intel-gpu",
       .resource = "GPU",
       .count = 4,
       .type = "Intel-GPU-Max-1550",
       .probe = "drm",
       .devices_per_numa = {{0, 2}, {1, 2}},
       .distinct_nearest_nics = 1,
       .warnings_mentioning = {"intel_vpu"}},
      {.machine = "tpu-v6e-4x4-worker2",
       .family = "tpu",
       .resource = "TPU",
       .count = 4,
       .type = "TPU-V6E",
       .probe = "vfio",
       .links = 4,
       .link_kind = "ici",
       .devices_per_numa = {{0, 2}, {1, 2}},
       .distinct_nearest_nics = 1,
       .labels = {{"tessera.io/tpu-slice-name", "train-v6e-16-a"},
                  {"tessera.io/tpu-worker-id", "2"},
                  {"tessera.io/tpu-topology", "4x4"},
                  {"tessera.io/tpu-pod-type", "v6e-16"},
                  {"tessera.io/fabric-domain", "train-v6e-16-a"},
                  {"tessera.io/fabric-kind", "ici"}},
       .resources = {{"train-v6e-16-a", "1"}},
       .absent_resources = {"TPU-v6e-16-head"}},  // worker 2 is not the slice head
      {.machine = "tpu-v5e-8",
       .family = "tpu",
       .resource = "TPU",
       .count = 8,
       .type = "TPU-V5LITEPOD",
       .probe = "accel",
       .links = 10,
       .link_kind = "ici",
       .devices_per_numa = {{0, 4}, {1, 4}},
       .distinct_nearest_nics = 1,
       .labels = {{"tessera.io/tpu-worker-id", "0"},
                  {"tessera.io/tpu-topology", "2x4"},
                  {"tessera.io/tpu-pod-type", "v5litepod-8"}},
       .resources = {{"TPU-v5litepod-8-head", "1"}, {"serve-v5e-8", "1"}}},
      {.machine = "trn1-32xlarge",
       .family = "neuron",
       .resource = "neuron_cores",
       .count = 32,
       .type = "aws-neuron-core",
       .probe = "neuron-sysfs",
       .links = 144,
       .link_kind = "neuronlink",
       .devices_per_numa = {{0, 16}, {1, 16}},
       .distinct_nearest_nics = 1},
      {.machine = "gaudi2-8",
       .family = "gaudi",
       .resource = "HPU",
       .count = 8,
       .type = "Intel-GAUDI2",
       .probe = "accel",
       .links = 28,
       .link_kind = "gaudi-roce",
       .devices_per_numa = {{0, 4}, {1, 4}},
       .distinct_nearest_nics = 1},
  };
  return *machines;
}

class HardwareFixtureTest : public ::testing::TestWithParam<Expected> {};

TEST_P(HardwareFixtureTest, ReportsTheMachine) { Check(GetParam(), Report(GetParam().machine)); }

INSTANTIATE_TEST_SUITE_P(EveryMachine, HardwareFixtureTest, ::testing::ValuesIn(AllMachines()),
                         [](const auto& info) {
                           std::string name = info.param.machine;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

TEST(HardwareFixtureTest, EveryFixtureDirectoryHasExpectations) {
  std::set<std::string> expected;
  for (const Expected& e : AllMachines()) expected.insert(e.machine);
  for (const auto& entry : std::filesystem::directory_iterator(kFixtures)) {
    if (entry.is_directory()) {
      EXPECT_TRUE(expected.count(entry.path().filename().string())) << entry.path();
    }
  }
}

TEST(HardwareFixtureTest, H100ThroughTheFakeNvmlHasNvlinkDetail) {
  const json report =
      Report("h100-sxm-8", {{"TESSERA_NVML_LIBRARY", FAKE_NVML_LIBRARY},
                            {"TESSERA_FAKE_NVML_TABLE", kFixtures + "h100-sxm-8.nvml"}});
  const json& f = report["families"][0];
  EXPECT_EQ(f["probe"], "nvml");
  ASSERT_EQ(f["devices"].size(), 8u);
  for (const json& d : f["devices"]) {
    EXPECT_THAT(d["uuid"].get<std::string>(), ::testing::StartsWith("GPU-"));
    EXPECT_GT(d["memory_bytes"].get<uint64_t>(), 79ull << 30);
  }
  ASSERT_EQ(f["links"].size(), 28u);
  for (const json& l : f["links"]) {
    EXPECT_EQ(l["kind"], "nvswitch");
    EXPECT_EQ(l["lanes"], 18);
    EXPECT_EQ(l["bandwidth_class"], "high");
  }
  EXPECT_FALSE(AnyWarningContains(report, "NVML not available"));
}

}  // namespace
}  // namespace tessera::testing
