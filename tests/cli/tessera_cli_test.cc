// The `tessera` command as users run it: exit codes, one-line errors, and the describe-slice
// and hardware outputs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "run_command.h"

namespace tessera::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kFixtures = std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/hardware/";
const std::string kExamples = std::string(TESSERA_SOURCE_DIR) + "/examples/hardware/";

// A failed command prints exactly one line, "tessera: error: ...", and nothing on stdout.
void ExpectOneLineError(const CommandResult& r, int exit_code, const std::string& needle) {
  EXPECT_EQ(r.exit_code, exit_code) << r.out << r.err;
  EXPECT_THAT(r.err, StartsWith("tessera: error: "));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(needle));
  EXPECT_EQ(r.out, "");
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path;
}

TEST(TesseraCliTest, DescribeSliceV6e4x4) {
  auto r = RunCommand({TesseraBinary(), "describe-slice", "--accelerator", "TPU-V6E", "--topology",
                       "4x4", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["chips"], 16);
  EXPECT_EQ(j["hosts"], 4);
  EXPECT_EQ(j["chips_per_host"], 4);
  EXPECT_EQ(j["pod_type"], "v6e-16");
  EXPECT_EQ(j["worker_grid"], nlohmann::json({2, 2}));
  EXPECT_EQ(j["host_bounds"], "2,2,1");
}

TEST(TesseraCliTest, DescribeSliceTextNamesEveryField) {
  auto r =
      RunCommand({TesseraBinary(), "describe-slice", "--accelerator", "v4", "--topology", "2x2x2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("v4-16"));
  EXPECT_THAT(r.out, HasSubstr("hosts"));
  EXPECT_THAT(r.out, HasSubstr("worker grid"));
}

TEST(TesseraCliTest, DescribeSliceRejectsShapesTheGenerationLacks) {
  ExpectOneLineError(RunCommand({TesseraBinary(), "describe-slice", "--accelerator", "TPU-V6E",
                                 "--topology", "3x3"}),
                     1, "3x3");
  ExpectOneLineError(RunCommand({TesseraBinary(), "describe-slice", "--accelerator", "TPU-V6E",
                                 "--topology", "4xx4"}),
                     1, "4xx4");
  ExpectOneLineError(RunCommand({TesseraBinary(), "describe-slice", "--accelerator", "TPU-V9Z",
                                 "--topology", "4x4"}),
                     1, "V9Z");
}

TEST(TesseraCliTest, MalformedCommandLinesExitTwoWithOneLine) {
  ExpectOneLineError(RunCommand({TesseraBinary(), "hardware", "--no-such-flag"}), 2,
                     "no-such-flag");
  ExpectOneLineError(RunCommand({TesseraBinary(), "describe-slice", "--topology", "4x4"}), 2,
                     "--accelerator");
  ExpectOneLineError(RunCommand({TesseraBinary()}), 2, "subcommand");
}

TEST(TesseraCliTest, MissingSysrootIsAOneLineError) {
  ExpectOneLineError(
      RunCommand({TesseraBinary(), "hardware", "--sysroot", "/no/such/tessera/root"}), 1,
      "/no/such/tessera/root");
}

TEST(TesseraCliTest, MalformedHardwareDescriptionsAreOneLineErrors) {
  ExpectOneLineError(
      RunCommand({TesseraBinary(), "hardware", "--simulate", "/no/such/description.yaml"}), 1,
      "/no/such/description.yaml");
  const std::string broken = WriteTemp("tessera_cli_broken.yaml", "host: {sockets: [\n");
  ExpectOneLineError(RunCommand({TesseraBinary(), "hardware", "--simulate", broken}), 1,
                     "tessera_cli_broken.yaml");
  const std::string typo =
      WriteTemp("tessera_cli_typo.yaml",
                "host: {sockets: 1, cores_per_socket: 4, threads_per_core: 1, numa_nodes: 1, "
                "memory: 16GiB}\n"
                "accelerators:\n  - family: nvidia\n    cuont: 8\n");
  ExpectOneLineError(RunCommand({TesseraBinary(), "hardware", "--simulate", typo}), 1, "cuont");
}

TEST(TesseraCliTest, MalformedIsolationVariablesAreOneLineErrors) {
  // On the live machine the agent's own environment holds the isolation policy.
  ExpectOneLineError(
      RunCommand({TesseraBinary(), "hardware"}, {{"TESSERA_ZERO_ASSIGNED_POLICY", "sometimes"}}), 1,
      "TESSERA_ZERO_ASSIGNED_POLICY");
  ExpectOneLineError(RunCommand({TesseraBinary(), "hardware"},
                                {{"TESSERA_NOSET_CUDA_VISIBLE_DEVICES", "perhaps"}}),
                     1, "TESSERA_NOSET_CUDA_VISIBLE_DEVICES");
}

TEST(TesseraCliTest, MalformedFlagsAreOneLineErrorsNamingTheFlag) {
  ExpectOneLineError(RunCommand({TesseraBinary(), "hardware", "--resources", "CPU=-1"}), 1,
                     "--resources: resource \"CPU\": \"-1\" is negative");
  ExpectOneLineError(RunCommand({TesseraBinary(), "hardware", "--resources", "memory=64"}), 1,
                     "--resources");
  ExpectOneLineError(RunCommand({TesseraBinary(), "hardware", "--labels", "tessera.io/x=y"}), 1,
                     "--labels");
  ExpectOneLineError(RunCommand({TesseraBinary(), "hardware", "--label-selector", "a=in(b"}), 1,
                     "--label-selector: label selector \"a=in(b\": column 5");
  ExpectOneLineError(RunCommand({TesseraBinary(), "hardware", "--label-selector", "a=(b,c)"}), 1,
                     "--label-selector");
  ExpectOneLineError(RunCommand({TesseraBinary(), "hardware", "--resources", "GPU=1"}), 1,
                     "no GPU devices");
  ExpectOneLineError(
      RunCommand({TesseraBinary(), "start", "--address", "127.0.0.1:1", "--state-dir",
                  "/nonexistent/tessera", "--prestarted-workers", "999"}),
      1, "prestarted workers 999 is outside [0, 64]");
  ExpectOneLineError(
      RunCommand({TesseraBinary(), "start", "--address", "127.0.0.1:1", "--state-dir",
                  "/nonexistent/tessera", "--launcher", "/nonexistent/launcher"}),
      1, "launcher /nonexistent/launcher is not an executable file");
  ExpectOneLineError(
      RunCommand({TesseraBinary(), "start", "--address", "127.0.0.1:1", "--state-dir",
                  "/nonexistent/tessera", "--object-store-memory", "lots"}),
      1, "--object-store-memory: ");
  ExpectOneLineError(
      RunCommand({TesseraBinary(), "start", "--address", "127.0.0.1:1", "--state-dir",
                  "/nonexistent/tessera", "--object-store-memory", "-1GiB"}),
      1, "--object-store-memory: ");
  ExpectOneLineError(RunCommand({TesseraBinary(), "start", "--head", "--state-dir",
                                 "/nonexistent/tessera", "--driver-timeout", "0s"}),
                     1, "--driver-timeout: must be positive");
  ExpectOneLineError(RunCommand({TesseraBinary(), "start", "--address", "127.0.0.1:1",
                                 "--state-dir", "/nonexistent/tessera", "--driver-timeout", "5s"}),
                     1, "--token-out and --cpu-work-on-accelerator-nodes are for the head");
  ExpectOneLineError(RunCommand({TesseraBinary(), "up", "/nonexistent/cluster.yaml", "--state-dir",
                                 "/nonexistent/tessera", "--driver-timeout", "0s"}),
                     1, "--driver-timeout: must be positive");
  // Checked before any cluster is looked for.
  ExpectOneLineError(RunCommand({TesseraBinary(), "run", "--state-dir", "/nonexistent/tessera",
                                 "--wait", "soon", "--", "true"}),
                     1, "--wait");
  ExpectOneLineError(RunCommand({TesseraBinary(), "pg", "create", "g", "--bundles", "CPU=1",
                                 "--same-label", "a b", "--state-dir", "/nonexistent/tessera"}),
                     1, "--same-label: label key \"a b\"");
  ExpectOneLineError(RunCommand({TesseraBinary(), "slice", "reserve", "s", "--accelerator",
                                 "TPU-V6E", "--topology", "4x4", "--selector", "zone=in(a",
                                 "--state-dir", "/nonexistent/tessera"}),
                     1, "--selector: label selector \"zone=in(a\"");
  ExpectOneLineError(
      RunCommand({TesseraBinary(), "slice", "reserve", "s", "--nvlink-hosts", "2", "--per-host",
                  "GPU=4", "--sub-slice", "--state-dir", "/nonexistent/tessera"}),
      1, "--sub-slice takes blocks of TPU slices, not NVLink hosts");
  // The shape is parsed once, here: a pod type whose chips are not the topology's never reaches
  // the head.
  ExpectOneLineError(RunCommand({TesseraBinary(), "slice", "reserve", "s", "--accelerator", "v6e-8",
                                 "--topology", "4x4", "--state-dir", "/nonexistent/tessera"}),
                     1,
                     "--accelerator/--topology: accelerator type v6e-8 has 8 chips, but topology "
                     "4x4 has 16");
  ExpectOneLineError(RunCommand({TesseraBinary(), "train", "--accelerator", "TPU-V9Z", "--topology",
                                 "4x4", "--state-dir", "/nonexistent/tessera", "--", "true"}),
                     1, "--accelerator/--topology: unknown TPU generation \"TPU-V9Z\"");
}

TEST(TesseraCliTest, LabelSelectorsWithFallbacksSayWhichOptionMatchesAndWhy) {
  auto r = RunCommand({TesseraBinary(), "hardware", "--json", "--sysroot",
                       kFixtures + "tpu-v6e-4x4-worker2", "--labels", "team=ml", "--label-selector",
                       "tessera.io/accelerator-type=in(H100,A100)", "--label-selector",
                       "tessera.io/tpu-topology=4x4,team=!infra"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto check = nlohmann::json::parse(r.out)["label_selector"];
  EXPECT_EQ(check["matched"], 1);
  ASSERT_EQ(check["failures"].size(), 1u);
  EXPECT_EQ(
      check["failures"][0],
      "needs tessera.io/accelerator-type in (A100,H100); tessera.io/accelerator-type=TPU-V6E");
  auto none = RunCommand({TesseraBinary(), "hardware", "--sysroot", kFixtures + "cpu-only-vm",
                          "--label-selector", "gpu=exists()"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_THAT(none.out, HasSubstr("needs gpu to exist; the node has no gpu"));
  EXPECT_THAT(none.out, HasSubstr("Selector: no option matches this node"));
}

TEST(TesseraCliTest, CpuOnlyMachineSaysSoPlainly) {
  auto r = RunCommand({TesseraBinary(), "hardware", "--sysroot", kFixtures + "cpu-only-vm"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("No accelerators found: this is a CPU-only machine."));
  auto j =
      RunCommand({TesseraBinary(), "hardware", "--json", "--sysroot", kFixtures + "cpu-only-vm"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  auto report = nlohmann::json::parse(j.out);
  EXPECT_EQ(report["accelerators"], 0);
  EXPECT_TRUE(report["families"].empty());
  EXPECT_FALSE(report["labels"].contains("tessera.io/accelerator-type"));
}

TEST(TesseraCliTest, ThisMachineReportsAtLeastItsCpus) {
  auto r = RunCommand({TesseraBinary(), "hardware", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto report = nlohmann::json::parse(r.out);
  EXPECT_GE(report["host"]["threads"].get<int>(), 1);
  EXPECT_TRUE(report["resources"].contains("CPU"));
  EXPECT_TRUE(report["resources"].contains("memory"));
}

TEST(TesseraCliTest, SimulatedV6eHostAdvertisesItsSlice) {
  auto r = RunCommand({TesseraBinary(), "hardware", "--json", "--simulate",
                       kExamples + "tpu-v6e-4x4-worker0.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto report = nlohmann::json::parse(r.out);
  EXPECT_EQ(report["resources"]["TPU"], "4");
  EXPECT_EQ(report["labels"]["tessera.io/accelerator-type"], "TPU-V6E");
  EXPECT_EQ(report["labels"]["tessera.io/tpu-worker-id"], "0");
  EXPECT_EQ(report["labels"]["tessera.io/tpu-topology"], "4x4");
  EXPECT_EQ(report["labels"]["tessera.io/tpu-pod-type"], "v6e-16");
  EXPECT_EQ(report["resources"]["TPU-v6e-16-head"], "1");
}

// `0` turns stores off (docs/objects.md): taken without a unit, so `tessera up` sizes nothing
// and goes on to its next flag (a bad --timeout here, so nothing starts); a negative size is one
// line naming the flag.
TEST(TesseraCliTest, ABareZeroObjectStoreIsTakenAsNoStore) {
  const std::string cluster = std::string(TESSERA_SOURCE_DIR) + "/examples/clusters/small.yaml";
  ExpectOneLineError(
      RunCommand({TesseraBinary(), "up", cluster, "--state-dir", "/nonexistent/tessera",
                  "--object-store-memory", "0", "--timeout", "soon"}),
      1, "--timeout");
  ExpectOneLineError(RunCommand({TesseraBinary(), "up", cluster, "--state-dir",
                                 "/nonexistent/tessera", "--object-store-memory", "-1GiB"}),
                     1, "--object-store-memory: ");
}

// A 3 GiB file that takes no disk (ftruncate): every file the CLI reads whole is sized before it
// is read, and refused at once with one line naming the path, its size and the limit.
TEST(TesseraCliTest, HugeFilesAreRefusedBeforeTheyAreRead) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tessera_cli_huge_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "work");
  const std::string huge = (dir / "work" / "data.bin").string();
  { std::ofstream create(huge); }
  ASSERT_EQ(::truncate(huge.c_str(), off_t{3} << 30), 0);
  const std::string size = " is 3 GiB (3221225472 bytes)";
  const auto start = std::chrono::steady_clock::now();
  ExpectOneLineError(
      RunCommand({TesseraBinary(), "job", "submit", "--working-dir", (dir / "work").string(),
                  "--state-dir", "/nonexistent/tessera", "--", "true"}),
      1, huge + size + "; a working directory holds at most 3 MiB of files");
  ExpectOneLineError(
      RunCommand({TesseraBinary(), "up", huge, "--state-dir", "/nonexistent/tessera"}), 1,
      "cluster file " + huge + size + "; the limit is 64 MiB");
  ExpectOneLineError(
      RunCommand({TesseraBinary(), "schedule", "--cluster", huge, "--requests", huge}), 1,
      "cluster file " + huge + size + "; the limit is 64 MiB");
  ExpectOneLineError(RunCommand({TesseraBinary(), "hardware", "--simulate", huge}), 1,
                     "hardware description " + huge + size + "; the limit is 64 MiB");
  // Reading the file would take seconds; sizing it takes none.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  std::filesystem::remove_all(dir);
}

// Nothing here allocates a store: the default share is refused before anything starts. (A size
// too big for the host is refused before allocation too: agent_options_test and
// object_store_sizing_test show it against a fake /proc/meminfo, so no test here ever asks this
// shared machine for more than it should give.)
TEST(TesseraCliTest, ObjectStoresThatDoNotFitThisHostAreRefusedBeforeAnythingStarts) {
  const std::string state =
      std::filesystem::temp_directory_path() / ("tessera_cli_up_" + std::to_string(::getpid()));
  // The default is shared among the agents: 2 GiB at most, split 1000 ways, is too little.
  const std::string many = WriteTemp("tessera_cli_many_nodes.yaml",
                                     "node_groups:\n  - name: cpu\n    count: 1000\n"
                                     "    hardware:\n      host: {sockets: 1, "
                                     "cores_per_socket: 1, memory: 1GiB}\n");
  ExpectOneLineError(RunCommand({TesseraBinary(), "up", many, "--state-dir", state}), 1,
                     "split among 1000 node agents: ");
  EXPECT_FALSE(std::filesystem::exists(state));
}

}  // namespace
}  // namespace tessera::testing
