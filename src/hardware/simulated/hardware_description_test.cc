#include "hardware/simulated/hardware_description.h"

#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hardware/node_label_keys.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

constexpr uint64_t kGiB = uint64_t{1} << 30;

const std::vector<std::string>& Families() {
  static const std::vector<std::string> kFamilies = {"nvidia", "amd",    "intel-gpu",
                                                     "tpu",    "neuron", "gaudi"};
  return kFamilies;
}

std::string ReadExample(const std::string& name) {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/examples/hardware/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<SimulatedHardware> Parse(const std::string& yaml) {
  return ParseHardwareDescription(yaml, "test.yaml", Families());
}

// The error message of a description that must fail.
std::string ErrorOf(const std::string& yaml) {
  auto hw = Parse(yaml);
  if (hw.ok()) return "(parsed without error)";
  EXPECT_EQ(hw.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(hw.status().message());
}

constexpr char kHost[] = "host: {sockets: 1, cores_per_socket: 4, memory: 16GiB}\n";

// ---- examples -------------------------------------------------------------------------------

TEST(HardwareDescriptionTest, H100Example) {
  auto hw = ParseHardwareDescription(ReadExample("h100-sxm-8.yaml"), "h100-sxm-8.yaml", Families());
  ASSERT_TRUE(hw.ok()) << hw.status();
  const HostTopology& h = hw->host;
  EXPECT_EQ(h.source, "simulated");
  EXPECT_EQ(h.sockets, 2);
  EXPECT_EQ(h.cores, 112);
  EXPECT_EQ(h.pus, 224);
  EXPECT_EQ(h.memory_bytes, 2048 * kGiB);
  EXPECT_EQ(h.cpu_model, "Intel(R) Xeon(R) Platinum 8480+");
  ASSERT_EQ(h.numa_nodes.size(), 2u);
  EXPECT_EQ(h.numa_nodes[0].cpulist, "0-55,112-167");
  EXPECT_EQ(h.numa_nodes[1].cpulist, "56-111,168-223");
  EXPECT_EQ(h.numa_nodes[1].memory_bytes, 1024 * kGiB);
  EXPECT_THAT(h.numa_nodes[0].distances, ElementsAre(10, 21));
  ASSERT_EQ(h.nics.size(), 9u);
  EXPECT_EQ(h.nics[0].name, "eth0");  // sorted by name
  EXPECT_EQ(h.nics[0].speed_mbps, 100000);
  EXPECT_EQ(h.nics[5].name, "ibp4");
  EXPECT_EQ(h.nics[5].numa_node, 1);
  EXPECT_EQ(h.nics[5].speed_mbps, 400000);

  ASSERT_EQ(hw->families.size(), 1u);
  const Detection& d = hw->families.at("nvidia");
  EXPECT_EQ(d.probe, "simulated");
  ASSERT_EQ(d.devices.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    const Device& dev = d.devices[i];
    EXPECT_EQ(dev.family, "nvidia");
    EXPECT_EQ(dev.index, i);
    EXPECT_EQ(dev.type, "H100");
    EXPECT_EQ(dev.model, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(dev.memory_bytes, 80 * kGiB);
    EXPECT_EQ(dev.numa_node, i < 4 ? 0 : 1);
    EXPECT_EQ(dev.nearest_nic, "ibp" + std::to_string(i));
    EXPECT_EQ(dev.pci_bus_id, "");
  }
  ASSERT_EQ(d.links.size(), 28u);  // every pair of 8
  for (const DeviceLink& l : d.links) {
    EXPECT_EQ(l.kind, LinkKind::kNvSwitch);
    EXPECT_EQ(l.lanes, 18);
    EXPECT_EQ(l.gigabytes_per_second, 450);
    EXPECT_EQ(l.bandwidth_class, BandwidthClass::kHigh);
  }
  EXPECT_THAT(d.labels, IsEmpty());
  EXPECT_THAT(hw->labels, ElementsAre(Pair("team", "ml-infra")));
}

TEST(HardwareDescriptionTest, TpuV6eExample) {
  auto hw = ParseHardwareDescription(ReadExample("tpu-v6e-4x4-worker0.yaml"),
                                     "tpu-v6e-4x4-worker0.yaml", Families());
  ASSERT_TRUE(hw.ok()) << hw.status();
  EXPECT_EQ(hw->host.pus, 180);
  const Detection& d = hw->families.at("tpu");
  EXPECT_THAT(d.warnings, IsEmpty());
  ASSERT_EQ(d.devices.size(), 4u);
  EXPECT_EQ(d.devices[0].type, "TPU-V6E");
  EXPECT_EQ(d.devices[0].model, "Google TPU v6e");
  EXPECT_EQ(d.devices[0].memory_bytes, 32 * kGiB);
  EXPECT_EQ(d.devices[3].numa_node, 1);
  EXPECT_EQ(d.devices[3].attributes.at("host_coords"), "1,1,0");
  EXPECT_EQ(d.devices[2].nearest_nic, "eth0");  // the only NIC, though on NUMA node 0
  // A 2x2 block: 0-1, 0-2, 1-3, 2-3.
  std::vector<std::pair<int, int>> pairs;
  for (const DeviceLink& l : d.links) {
    EXPECT_EQ(l.kind, LinkKind::kIci);
    pairs.emplace_back(l.a, l.b);
  }
  EXPECT_THAT(pairs, UnorderedElementsAre(Pair(0, 1), Pair(0, 2), Pair(1, 3), Pair(2, 3)));
  EXPECT_EQ(d.labels.at(std::string(labels::kTpuSliceName)), "my-v6e-slice");
  EXPECT_EQ(d.labels.at(std::string(labels::kTpuWorkerId)), "0");
  EXPECT_EQ(d.labels.at(std::string(labels::kTpuTopology)), "4x4");
  EXPECT_EQ(d.labels.at(std::string(labels::kTpuPodType)), "v6e-16");
  EXPECT_EQ(d.labels.at(std::string(labels::kFabricDomain)), "my-v6e-slice");
  EXPECT_EQ(d.labels.at(std::string(labels::kFabricKind)), "ici");
  EXPECT_EQ(d.resources.ToString(), "TPU-v6e-16-head=1,my-v6e-slice=1");
}

TEST(HardwareDescriptionTest, CpuOnlyExample) {
  auto hw = ParseHardwareDescription(ReadExample("cpu-only.yaml"), "cpu-only.yaml", Families());
  ASSERT_TRUE(hw.ok()) << hw.status();
  EXPECT_THAT(hw->families, IsEmpty());
  EXPECT_EQ(hw->host.sockets, 1);
  EXPECT_EQ(hw->host.cores, 4);
  EXPECT_EQ(hw->host.pus, 8);
  EXPECT_EQ(hw->host.memory_bytes, 16 * kGiB);
  ASSERT_EQ(hw->host.numa_nodes.size(), 1u);
  EXPECT_EQ(hw->host.numa_nodes[0].cpulist, "0-7");
  EXPECT_THAT(hw->host.numa_nodes[0].distances, IsEmpty());
  ASSERT_EQ(hw->host.nics.size(), 1u);
  EXPECT_EQ(hw->host.nics[0].name, "eth0");
  EXPECT_EQ(hw->host.nics[0].speed_mbps, 0);
  EXPECT_THAT(hw->labels, ElementsAre(Pair("pool", "cpu")));
}

TEST(HardwareDescriptionTest, CpuOnlyExampleMatchesTheProbedCpuOnlyVm) {
  // The description and the fixture tree model the same VM: a simulated host must look like
  // the probed one to everything downstream.
  auto simulated =
      ParseHardwareDescription(ReadExample("cpu-only.yaml"), "cpu-only.yaml", Families());
  ASSERT_TRUE(simulated.ok()) << simulated.status();
  auto probed = DiscoverHostTopology(
      Sysroot(std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/hardware/cpu-only-vm"));
  ASSERT_TRUE(probed.ok()) << probed.status();
  const HostTopology& s = simulated->host;
  const HostTopology& p = *probed;
  EXPECT_EQ(s.sockets, p.sockets);
  EXPECT_EQ(s.cores, p.cores);
  EXPECT_EQ(s.pus, p.pus);
  EXPECT_EQ(s.memory_bytes, p.memory_bytes);
  EXPECT_EQ(s.cpu_model, p.cpu_model);
  ASSERT_EQ(s.numa_nodes.size(), p.numa_nodes.size());
  EXPECT_EQ(s.numa_nodes[0].cpulist, p.numa_nodes[0].cpulist);
  EXPECT_EQ(s.numa_nodes[0].memory_bytes, p.numa_nodes[0].memory_bytes);
  EXPECT_EQ(s.numa_nodes[0].distances, p.numa_nodes[0].distances);
  ASSERT_EQ(s.nics.size(), p.nics.size());
  EXPECT_EQ(s.nics[0].name, p.nics[0].name);
  EXPECT_EQ(s.nics[0].numa_node, p.nics[0].numa_node);
  EXPECT_EQ(s.nics[0].speed_mbps, p.nics[0].speed_mbps);
}

// ---- shapes and defaults --------------------------------------------------------------------

TEST(HardwareDescriptionTest, EntriesOfOneFamilyContinueTheIndices) {
  auto hw = Parse(std::string(kHost) +
                  "accelerators:\n"
                  "  - {family: nvidia, type: H100, count: 2, interconnect: nvlink-pairs}\n"
                  "  - {family: nvidia, type: L4, count: 2, interconnect: nvlink-pairs}\n");
  ASSERT_TRUE(hw.ok()) << hw.status();
  const Detection& d = hw->families.at("nvidia");
  ASSERT_EQ(d.devices.size(), 4u);
  EXPECT_EQ(d.devices[2].index, 2);
  EXPECT_EQ(d.devices[2].type, "L4");
  EXPECT_EQ(d.devices[2].model, "L4");  // the type when no model is given
  ASSERT_EQ(d.links.size(), 2u);
  EXPECT_EQ(d.links[1].a, 2);
  EXPECT_EQ(d.links[1].b, 3);
  EXPECT_EQ(d.links[1].kind, LinkKind::kNvLink);
  EXPECT_EQ(d.links[1].lanes, 12);
  EXPECT_EQ(d.links[1].gigabytes_per_second, 300);
}

TEST(HardwareDescriptionTest, SingleNumaNumberAndSingleNicApplyToEveryDevice) {
  auto hw = Parse(
      "host: {sockets: 2, cores_per_socket: 8, numa_nodes: 2, memory: 64GiB}\n"
      "nics: [{name: a0, numa_node: 0}, {name: b1, numa_node: 1}]\n"
      "accelerators:\n"
      "  - {family: amd, type: AMD-Instinct-MI300X-OAM, count: 2, numa_nodes: 1}\n"
      "  - {family: gaudi, type: Intel-GAUDI2, count: 2, nearest_nics: a0}\n");
  ASSERT_TRUE(hw.ok()) << hw.status();
  const Detection& amd = hw->families.at("amd");
  EXPECT_EQ(amd.devices[1].numa_node, 1);
  EXPECT_EQ(amd.devices[1].nearest_nic, "b1");  // the NIC on the device's NUMA node
  EXPECT_THAT(amd.links, IsEmpty());            // no interconnect given: none
  const Detection& gaudi = hw->families.at("gaudi");
  EXPECT_EQ(gaudi.devices[1].numa_node, 0);
  EXPECT_EQ(gaudi.devices[1].nearest_nic, "a0");
}

TEST(HardwareDescriptionTest, FabricDomainLabelsAnNvLinkDomain) {
  auto hw = Parse(std::string(kHost) +
                  "accelerators:\n"
                  "  - {family: nvidia, type: GB200, count: 4, interconnect: nvswitch,\n"
                  "     fabric_domain: nvl72-rack-3}\n");
  ASSERT_TRUE(hw.ok()) << hw.status();
  const Detection& d = hw->families.at("nvidia");
  EXPECT_EQ(d.labels.at(std::string(labels::kFabricDomain)), "nvl72-rack-3");
  EXPECT_EQ(d.labels.at(std::string(labels::kFabricKind)), "nvlink");
}

TEST(HardwareDescriptionTest, TpuWithoutIdentityWarnsLikeDetection) {
  auto hw =
      Parse(std::string(kHost) + "accelerators: [{family: tpu, type: TPU-V5LITEPOD, count: 8}]\n");
  ASSERT_TRUE(hw.ok()) << hw.status();
  const Detection& d = hw->families.at("tpu");
  EXPECT_EQ(d.devices.size(), 8u);
  EXPECT_EQ(d.devices[7].attributes.at("host_coords"), "1,3,0");
  EXPECT_THAT(d.warnings, ElementsAre(::testing::HasSubstr("incomplete TPU identity")));
  EXPECT_TRUE(d.resources.empty());
}

TEST(HardwareDescriptionTest, InterconnectMapSetsLanesAndBandwidth) {
  auto hw = Parse(std::string(kHost) +
                  "accelerators:\n"
                  "  - family: amd\n"
                  "    type: AMD-Instinct-MI300X-OAM\n"
                  "    count: 3\n"
                  "    interconnect: {kind: xgmi-mesh, lanes: 2, bandwidth: 128GB/s}\n");
  ASSERT_TRUE(hw.ok()) << hw.status();
  const Detection& d = hw->families.at("amd");
  ASSERT_EQ(d.links.size(), 3u);
  EXPECT_EQ(d.links[0].kind, LinkKind::kXgmi);
  EXPECT_EQ(d.links[0].lanes, 2);
  EXPECT_EQ(d.links[0].gigabytes_per_second, 128);
  EXPECT_EQ(d.links[0].bandwidth_class, BandwidthClass::kMedium);
}

TEST(HardwareDescriptionTest, EmbeddedNodeKeepsDocumentPositions) {
  const YAML::Node cluster = YAML::Load(
      "name: demo\n"
      "nodes:\n"
      "  - name: a\n"
      "    hardware:\n"
      "      host: {sockets: 1, cores_per_socket: 2, memory: 8GiB}\n"
      "  - name: b\n"
      "    hardware:\n"
      "      host: {sockets: 1, cores_per_socket: 2, memory: 8GiB}\n"
      "      accelerators: [{family: nvidia, type: H100, count: 0}]\n");
  auto a =
      ParseHardwareDescriptionFromNode(cluster["nodes"][0]["hardware"], "cluster.yaml", Families());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->host.pus, 2);
  auto b =
      ParseHardwareDescriptionFromNode(cluster["nodes"][1]["hardware"], "cluster.yaml", Families());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            "cluster.yaml:9:58: accelerators[0].count: must be an integer from 1 to 256, got 0");
}

// ---- one test per error class, with the exact one-line message -------------------------------

TEST(HardwareDescriptionErrorTest, InvalidYaml) {
  EXPECT_EQ(ErrorOf("host: {sockets: 1\n"),
            "test.yaml:2:1: invalid YAML: end of map flow not found");
}

TEST(HardwareDescriptionErrorTest, ErrorsStayOnOneLine) {
  // A NUL byte makes yaml-cpp report the character after it, a line break, inside its message.
  constexpr char kText[] = "host:\n  sockets: 2\x1a\0\n  memory: 1GiB\n";
  const std::string yaml(kText, sizeof(kText) - 1);
  EXPECT_EQ(ErrorOf(yaml), "test.yaml:3:1: invalid YAML: unknown escape character: \\n");
}

TEST(HardwareDescriptionErrorTest, EmptyDocument) {
  EXPECT_EQ(ErrorOf(""), "test.yaml: the description is empty; it needs at least a host: section");
}

TEST(HardwareDescriptionErrorTest, TopLevelMustBeAMap) {
  EXPECT_EQ(ErrorOf("- host\n"), "test.yaml:1:1: expected a map, got a list");
}

TEST(HardwareDescriptionErrorTest, UnknownTopLevelKey) {
  EXPECT_EQ(ErrorOf(std::string(kHost) + "accelerator: []\n"),
            "test.yaml:2:1: unknown key \"accelerator\" (did you mean accelerators?); expected "
            "one of: host, nics, accelerators, labels");
}

TEST(HardwareDescriptionErrorTest, TypoInHostKey) {
  EXPECT_EQ(ErrorOf("host: {sokets: 1, cores_per_socket: 4, memory: 16GiB}\n"),
            "test.yaml:1:8: host: unknown key \"sokets\" (did you mean sockets?); expected one "
            "of: sockets, cores_per_socket, threads_per_core, numa_nodes, memory, cpu_model");
}

TEST(HardwareDescriptionErrorTest, TypoInAcceleratorKey) {
  EXPECT_EQ(ErrorOf(std::string(kHost) + "accelerators:\n"
                                         "  - family: nvidia\n"
                                         "    type: H100\n"
                                         "    cuont: 8\n"),
            "test.yaml:5:5: accelerators[0]: unknown key \"cuont\" (did you mean count?); "
            "expected one of: family, type, model, count, memory, numa_nodes, nearest_nics, "
            "interconnect, fabric_domain, tpu");
}

TEST(HardwareDescriptionErrorTest, DuplicateKey) {
  EXPECT_EQ(ErrorOf("host: {sockets: 1, sockets: 2, cores_per_socket: 4, memory: 16GiB}\n"),
            "test.yaml:1:20: host: key \"sockets\" is given twice");
}

TEST(HardwareDescriptionErrorTest, MissingRequiredKey) {
  EXPECT_EQ(ErrorOf("host: {sockets: 1, cores_per_socket: 4}\n"),
            "test.yaml:1:7: host: missing required key \"memory\"");
  EXPECT_EQ(ErrorOf("nics: []\n"), "test.yaml:1:1: missing required key \"host\"");
}

TEST(HardwareDescriptionErrorTest, WrongTypes) {
  EXPECT_EQ(ErrorOf("host: 4\n"), "test.yaml:1:7: host: expected a map, got the string \"4\"");
  EXPECT_EQ(ErrorOf(std::string(kHost) + "nics: {name: eth0}\n"),
            "test.yaml:2:7: nics: expected a list, got a map");
  EXPECT_EQ(
      ErrorOf(std::string(kHost) + "accelerators: [{family: nvidia, type: H100, count: [8]}]\n"),
      "test.yaml:2:52: accelerators[0].count: expected an integer, got a list");
  EXPECT_EQ(
      ErrorOf(std::string(kHost) + "accelerators: [{family: nvidia, type: H100, count: eight}]\n"),
      "test.yaml:2:52: accelerators[0].count: expected an integer, got \"eight\"");
  EXPECT_EQ(
      ErrorOf(std::string(kHost) + "accelerators: [{family: nvidia, type: H100, count: 2.5}]\n"),
      "test.yaml:2:52: accelerators[0].count: expected an integer, got \"2.5\"");
  EXPECT_EQ(
      ErrorOf(std::string(kHost) + "accelerators: [{family: nvidia, type: {a: b}, count: 1}]\n"),
      "test.yaml:2:39: accelerators[0].type: expected a string, got a map");
  EXPECT_EQ(ErrorOf(std::string(kHost) + "labels: [a]\n"),
            "test.yaml:2:9: labels: expected a map of label keys to values, got a list");
}

TEST(HardwareDescriptionErrorTest, EmptyValueIsPositionedAtItsKey) {
  EXPECT_EQ(ErrorOf("host:\n  sockets:\n  cores_per_socket: 4\n  memory: 16GiB\n"),
            "test.yaml:2:3: host.sockets: expected an integer, got nothing (null)");
}

TEST(HardwareDescriptionErrorTest, ZeroAndNegativeCounts) {
  EXPECT_EQ(
      ErrorOf(std::string(kHost) + "accelerators: [{family: nvidia, type: H100, count: 0}]\n"),
      "test.yaml:2:52: accelerators[0].count: must be an integer from 1 to 256, got 0");
  EXPECT_EQ(
      ErrorOf(std::string(kHost) + "accelerators: [{family: nvidia, type: H100, count: -2}]\n"),
      "test.yaml:2:52: accelerators[0].count: must be an integer from 1 to 256, got -2");
  EXPECT_EQ(ErrorOf("host: {sockets: 0, cores_per_socket: 4, memory: 16GiB}\n"),
            "test.yaml:1:17: host.sockets: must be an integer from 1 to 64, got 0");
  EXPECT_EQ(ErrorOf("host: {sockets: 1, cores_per_socket: 4, memory: 0GiB}\n"),
            "test.yaml:1:49: host.memory: must be more than 0 bytes");
}

TEST(HardwareDescriptionErrorTest, NumaListLengthMustMatchCount) {
  EXPECT_EQ(ErrorOf("host: {sockets: 2, cores_per_socket: 4, memory: 16GiB}\n"
                    "accelerators:\n"
                    "  - {family: nvidia, type: H100, count: 4, numa_nodes: [0, 0, 1]}\n"),
            "test.yaml:3:56: accelerators[0].numa_nodes: has 3 entries for 4 devices; give one "
            "per device or a single number");
}

TEST(HardwareDescriptionErrorTest, NumaNodeOutOfRange) {
  EXPECT_EQ(ErrorOf("host: {sockets: 2, cores_per_socket: 4, memory: 16GiB}\n"
                    "accelerators:\n"
                    "  - {family: nvidia, type: H100, count: 2, numa_nodes: [0, 2]}\n"),
            "test.yaml:3:60: accelerators[0].numa_nodes[1]: NUMA node 2 is out of range: the "
            "host has 2 NUMA nodes (0-1)");
  EXPECT_EQ(ErrorOf(std::string(kHost) + "nics: [{name: eth0, numa_node: -1}]\n"),
            "test.yaml:2:32: nics[0].numa_node: NUMA node -1 is out of range: the host has 1 "
            "NUMA node (0)");
  EXPECT_EQ(ErrorOf("host: {sockets: 2, cores_per_socket: 4, numa_nodes: 3, memory: 16GiB}\n"),
            "test.yaml:1:53: host.numa_nodes: 3 NUMA nodes do not split 2 socket(s) of 4 cores "
            "evenly");
}

TEST(HardwareDescriptionErrorTest, BadMemoryUnits) {
  EXPECT_EQ(ErrorOf("host: {sockets: 1, cores_per_socket: 4, memory: 16G}\n"),
            "test.yaml:1:49: host.memory: \"16G\": unknown byte unit \"G\" (units: B, KB, MB, GB, "
            "TB, PB, KiB, MiB, GiB, TiB, PiB); did you mean GiB or GB?");
}

TEST(HardwareDescriptionErrorTest, BadSpeedAndBandwidthUnits) {
  EXPECT_EQ(ErrorOf(std::string(kHost) + "nics: [{name: eth0, speed: 400G}]\n"),
            "test.yaml:2:28: nics[0].speed: \"400G\" has no unit; write it as e.g. 400Gbps "
            "(units: Mbps, Gbps, Tbps)");
  EXPECT_EQ(
      ErrorOf(std::string(kHost) + "accelerators: [{family: amd, type: MI300X, count: 2,\n"
                                   "  interconnect: {kind: xgmi-mesh, bandwidth: 64GBps}}]\n"),
      "test.yaml:3:46: accelerators[0].interconnect.bandwidth: \"64GBps\" has no unit; "
      "write it as e.g. 450GB/s (units: GB/s)");
}

TEST(HardwareDescriptionErrorTest, UnknownFamily) {
  EXPECT_EQ(ErrorOf(std::string(kHost) + "accelerators: [{family: nvdia, type: H100, count: 1}]\n"),
            "test.yaml:2:25: accelerators[0].family: unknown family \"nvdia\" (did you mean "
            "nvidia?); known families: nvidia, amd, intel-gpu, tpu, neuron, gaudi");
}

TEST(HardwareDescriptionErrorTest, UnknownInterconnect) {
  EXPECT_EQ(
      ErrorOf(std::string(kHost) +
              "accelerators: [{family: nvidia, type: H100, count: 8, interconnect: nvswich}]\n"),
      "test.yaml:2:69: accelerators[0].interconnect: unknown interconnect \"nvswich\" (did "
      "you mean nvswitch?); expected one of: none, nvswitch, nvlink-pairs, xgmi-mesh, "
      "ici-grid, neuron-ring, gaudi-all-to-all");
}

TEST(HardwareDescriptionErrorTest, IciGridNeedsAKnownHostBlock) {
  EXPECT_EQ(
      ErrorOf(std::string(kHost) +
              "accelerators: [{family: tpu, type: TPU-V6E, count: 2, interconnect: ici-grid}]\n"),
      "test.yaml:2:69: accelerators[0].interconnect: ici-grid needs 1, 4 or 8 chips on "
      "the host (a 1x1, 2x2 or 2x4 block), got 2");
}

TEST(HardwareDescriptionErrorTest, DuplicateNicNames) {
  EXPECT_EQ(ErrorOf(std::string(kHost) + "nics:\n  - name: ibp0\n  - name: ibp0\n"),
            "test.yaml:4:11: nics[1].name: duplicate NIC name \"ibp0\" (also nics[0])");
}

TEST(HardwareDescriptionErrorTest, BadNicName) {
  EXPECT_EQ(ErrorOf(std::string(kHost) + "nics: [{name: \"eth 0\"}]\n"),
            "test.yaml:2:15: nics[0].name: \"eth 0\" is not an interface name (1-15 letters, "
            "digits, '-', '_' or '.')");
}

TEST(HardwareDescriptionErrorTest, UnknownNearestNic) {
  EXPECT_EQ(
      ErrorOf(std::string(kHost) +
              "nics: [{name: eth0}]\n"
              "accelerators: [{family: nvidia, type: H100, count: 1, nearest_nics: [ibp0]}]\n"),
      "test.yaml:3:70: accelerators[0].nearest_nics[0]: unknown NIC \"ibp0\"; it must be "
      "listed under nics");
}

TEST(HardwareDescriptionErrorTest, TpuTypeHasOneSpelling) {
  EXPECT_EQ(ErrorOf(std::string(kHost) + "accelerators: [{family: tpu, type: v6e, count: 4}]\n"),
            "test.yaml:2:36: accelerators[0].type: TPU types are written TPU-V6E, not \"v6e\"");
}

TEST(HardwareDescriptionErrorTest, TpuBlockOnlyForTpuFamily) {
  EXPECT_EQ(
      ErrorOf(std::string(kHost) +
              "accelerators: [{family: nvidia, type: H100, count: 1, tpu: {worker_id: 0}}]\n"),
      "test.yaml:2:60: accelerators[0].tpu: only accelerators of family tpu take a tpu "
      "block");
}

TEST(HardwareDescriptionErrorTest, InconsistentTpuIdentity) {
  EXPECT_EQ(
      ErrorOf(std::string(kHost) +
              "accelerators:\n"
              "  - family: tpu\n"
              "    type: TPU-V6E\n"
              "    count: 4\n"
              "    tpu: {slice_name: s, worker_id: 4, topology: 4x4, accelerator_type: v6e-16}\n"),
      "test.yaml:6:10: accelerators[0].tpu: inconsistent TPU identity: TPU_WORKER_ID=4 but "
      "v6e-16 has 4 hosts; no slice markers");
}

TEST(HardwareDescriptionErrorTest, FabricDomainNeedsNvLink) {
  EXPECT_EQ(ErrorOf(std::string(kHost) +
                    "accelerators: [{family: amd, type: MI300X, count: 2, fabric_domain: d1}]\n"),
            "test.yaml:2:69: accelerators[0].fabric_domain: fabric_domain needs interconnect "
            "nvswitch or nvlink-pairs (a TPU slice's domain comes from tpu.slice_name)");
}

TEST(HardwareDescriptionErrorTest, UserLabelsMayNotUseTheReservedPrefix) {
  EXPECT_EQ(ErrorOf(std::string(kHost) + "labels: {tessera.io/accelerator-type: H100}\n"),
            "test.yaml:2:10: labels: label key \"tessera.io/accelerator-type\" uses the reserved "
            "prefix \"tessera.io/\", which only Tessera itself may set");
}

}  // namespace
}  // namespace tessera
