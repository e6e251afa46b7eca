#include "hardware/tpu/tpu_identity.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

struct Result {
  LabelSet labels;
  ResourceSet resources;
  std::vector<std::string> warnings;
};

Result Label(const TpuIdentity& id, std::string_view type = "TPU-V6E") {
  Result r;
  AddTpuSliceLabels(id, type, r.labels, r.resources, r.warnings);
  return r;
}

TEST(TpuIdentityTest, FromEnv) {
  Environment env;
  env.Set("TPU_ACCELERATOR_TYPE", "tpu7x-16");
  env.Set("TPU_TOPOLOGY", "2X2X2");
  env.Set("TPU_WORKER_ID", "1");
  env.Set("TPU_NAME", " my-slice ");
  env.Set("TPU_WORKER_HOSTNAMES", "host-a, host-b,,");
  const TpuIdentity id = TpuIdentityFromEnv(env);
  EXPECT_EQ(id.accelerator_type, "v7x-16");
  EXPECT_EQ(id.topology, "2x2x2");
  EXPECT_EQ(id.worker_id, 1);
  EXPECT_EQ(id.slice_name, "my-slice");
  EXPECT_THAT(id.worker_hostnames, ElementsAre("host-a", "host-b"));

  Environment bad;
  bad.Set("TPU_WORKER_ID", "two");
  bad.Set("TPU_ACCELERATOR_TYPE", "weird");
  const TpuIdentity b = TpuIdentityFromEnv(bad);
  EXPECT_FALSE(b.worker_id.has_value());
  EXPECT_EQ(b.accelerator_type, "weird");
  EXPECT_FALSE(TpuIdentityFromEnv(Environment()).worker_id.has_value());
}

TEST(TpuIdentityTest, MultiHostWorker) {
  const Result r = Label({"v6e-16", "4x4", 2, "my-slice", {"h0", "h1", "h2", "h3"}});
  EXPECT_THAT(r.warnings, IsEmpty());
  EXPECT_EQ(r.labels.at("tessera.io/tpu-slice-name"), "my-slice");
  EXPECT_EQ(r.labels.at("tessera.io/tpu-worker-id"), "2");
  EXPECT_EQ(r.labels.at("tessera.io/tpu-topology"), "4x4");
  EXPECT_EQ(r.labels.at("tessera.io/tpu-pod-type"), "v6e-16");
  EXPECT_EQ(r.labels.at("tessera.io/fabric-domain"), "my-slice");
  EXPECT_EQ(r.labels.at("tessera.io/fabric-kind"), "ici");
  EXPECT_EQ(r.resources.Get("my-slice"), Quantity::FromInt(1));
  EXPECT_EQ(r.resources.size(), 1u);  // no head marker on worker 2
}

TEST(TpuIdentityTest, HeadMarkerOnWorkerZero) {
  const Result r = Label({"v6e-16", "4x4", 0, "my-slice", {}});
  EXPECT_EQ(r.resources.Get("TPU-v6e-16-head"), Quantity::FromInt(1));
  EXPECT_EQ(r.resources.Get("my-slice"), Quantity::FromInt(1));
}

TEST(TpuIdentityTest, SingleHostHasNoFabricDomain) {
  const Result r = Label({"v5litepod-8", "2x4", 0, "lite", {"localhost"}}, "TPU-V5LITEPOD");
  EXPECT_THAT(r.warnings, IsEmpty());
  EXPECT_FALSE(r.labels.contains("tessera.io/fabric-domain"));
  EXPECT_EQ(r.resources.Get("TPU-v5litepod-8-head"), Quantity::FromInt(1));
}

TEST(TpuIdentityTest, PodTypeFromTopologyAndChipType) {
  const Result r = Label({"", "2x2x2", 1, "s", {}}, "TPU-V4");
  EXPECT_THAT(r.warnings, IsEmpty());
  EXPECT_EQ(r.labels.at("tessera.io/tpu-pod-type"), "v4-16");
  EXPECT_EQ(r.resources.Get("s"), Quantity::FromInt(1));
}

TEST(TpuIdentityTest, IncompleteIdentity) {
  const Result r = Label({"v6e-16", "4x4", std::nullopt, "", {}});
  EXPECT_TRUE(r.resources.empty());
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0],
            "incomplete TPU identity: missing TPU_NAME, TPU_WORKER_ID; no slice markers");
  EXPECT_EQ(r.labels.at("tessera.io/tpu-pod-type"), "v6e-16");
  EXPECT_FALSE(r.labels.contains("tessera.io/tpu-slice-name"));
  EXPECT_FALSE(r.labels.contains("tessera.io/tpu-worker-id"));

  const Result none = Label({}, "");
  EXPECT_TRUE(none.resources.empty());
  EXPECT_TRUE(none.labels.empty());
  ASSERT_EQ(none.warnings.size(), 1u);
  EXPECT_THAT(none.warnings[0], HasSubstr("missing TPU_NAME, TPU_WORKER_ID, TPU_ACCELERATOR_TYPE"));
}

TEST(TpuIdentityTest, WorkerIdBeyondHosts) {
  const Result r = Label({"v6e-16", "4x4", 4, "s", {}});
  EXPECT_TRUE(r.resources.empty());
  EXPECT_FALSE(r.labels.contains("tessera.io/fabric-domain"));
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0],
            "inconsistent TPU identity: TPU_WORKER_ID=4 but v6e-16 has 4 hosts; no slice markers");
}

TEST(TpuIdentityTest, AmbiguousTwoByFourAcceptsSecondHost) {
  const Result r = Label({"v6e-8", "2x4", 1, "s", {"a", "b"}});
  EXPECT_THAT(r.warnings, IsEmpty());
  EXPECT_EQ(r.labels.at("tessera.io/fabric-domain"), "s");
  EXPECT_EQ(r.resources.Get("s"), Quantity::FromInt(1));
  EXPECT_FALSE(Label({"v6e-8", "2x4", 2, "s", {}}).warnings.empty());
}

TEST(TpuIdentityTest, TopologyInvalidForGeneration) {
  const Result r = Label({"v6e-16", "2x2x4", 0, "s", {}});
  EXPECT_TRUE(r.resources.empty());
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0], HasSubstr("inconsistent TPU identity: TPU_TOPOLOGY: topology "
                                       "\"2x2x4\" is 3D, but v6e slices are 2D"));
  EXPECT_FALSE(r.labels.contains("tessera.io/tpu-topology"));
}

TEST(TpuIdentityTest, ChipCountDisagrees) {
  const Result r = Label({"v6e-8", "4x4", 0, "s", {}});
  EXPECT_TRUE(r.resources.empty());
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0],
              HasSubstr("TPU_ACCELERATOR_TYPE=v6e-8 has 8 chips, but TPU_TOPOLOGY=4x4 has 16"));
}

TEST(TpuIdentityTest, GenerationDisagreesWithChips) {
  const Result r = Label({"v6e-16", "4x4", 0, "s", {}}, "TPU-V5LITEPOD");
  EXPECT_TRUE(r.resources.empty());
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0], HasSubstr("is a TPU-V6E slice, but the chips are TPU-V5LITEPOD"));
}

TEST(TpuIdentityTest, MalformedAcceleratorType) {
  const Result r = Label({"banana", "4x4", 0, "s", {}});
  EXPECT_TRUE(r.resources.empty());
  ASSERT_FALSE(r.warnings.empty());
  EXPECT_THAT(r.warnings[0], HasSubstr("TPU_ACCELERATOR_TYPE: TPU accelerator type \"banana\""));
}

TEST(TpuIdentityTest, SliceNamesMustBeValidNames) {
  const Result ok = Label({"v6e-16", "4x4", 1, "my-slice.v2_x", {}});
  EXPECT_EQ(ok.resources.Get("my-slice.v2_x"), Quantity::FromInt(1));
  // A label value, but not a resource name (must start with a letter): labels yes, markers no.
  const Result digit = Label({"v6e-16", "4x4", 1, "7slice", {}});
  EXPECT_EQ(digit.labels.at("tessera.io/tpu-slice-name"), "7slice");
  EXPECT_TRUE(digit.resources.empty());
  ASSERT_EQ(digit.warnings.size(), 1u);
  EXPECT_THAT(digit.warnings[0], HasSubstr("not usable as a resource name"));
  const Result spaces = Label({"v6e-16", "4x4", 1, "bad name!", {}});
  EXPECT_FALSE(spaces.labels.contains("tessera.io/tpu-slice-name"));
  EXPECT_FALSE(spaces.warnings.empty());
}

TEST(TpuIdentityTest, HostnameCountMismatchWarns) {
  const Result r = Label({"v6e-16", "4x4", 1, "s", {"a", "b", "c"}});
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0], HasSubstr("TPU_WORKER_HOSTNAMES lists 3 hosts, but v6e-16 has 4"));
  EXPECT_EQ(r.resources.Get("s"), Quantity::FromInt(1));
}

}  // namespace
}  // namespace tessera
