#include "hardware/isolation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hardware/plugin_registry.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A family with the default mask behaviour, so these tests exercise only the generic rules.
class PlainPlugin final : public AcceleratorPlugin {
 public:
  std::string_view family() const override { return "plain"; }
  std::string_view resource_name() const override { return "PLAIN"; }
  std::string_view visible_devices_env() const override { return "PLAIN_VISIBLE"; }
  Detection Detect(const DetectionContext&) const override { return {}; }
  absl::Status ValidateQuantity(const Quantity&) const override { return absl::OkStatus(); }
};

std::vector<Device> DevicesWithPhysicalIndices(std::vector<int> indices) {
  std::vector<Device> devices;
  for (int i : indices) devices.push_back(Device{.family = "plain", .index = i});
  return devices;
}

TEST(WorkerIsolationEnvTest, TranslatesInstancesThroughTheAgentsMask) {
  // The agent runs under PLAIN_VISIBLE=2,5,7,9: instance 1 is physical device 5.
  PlainPlugin plugin;
  std::vector<VisibleFamily> families = {{&plugin, DevicesWithPhysicalIndices({2, 5, 7, 9})}};
  auto env = WorkerIsolationEnv(families, {{"plain", {1, 3}}}, IsolationPolicy());
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_THAT(*env, ElementsAre(EnvChange{"PLAIN_VISIBLE", "5,9"}));
}

TEST(WorkerIsolationEnvTest, ZeroAssignedInheritsByDefaultAndHidesOnRequest) {
  PlainPlugin plugin;
  std::vector<VisibleFamily> families = {{&plugin, DevicesWithPhysicalIndices({0, 1})}};
  auto inherit = WorkerIsolationEnv(families, {}, IsolationPolicy());
  ASSERT_TRUE(inherit.ok());
  EXPECT_THAT(*inherit, IsEmpty());

  IsolationPolicy hide;
  hide.Set("plain", {.opt_out = false, .zero_assigned = ZeroAssignedPolicy::kHide});
  auto hidden = WorkerIsolationEnv(families, {{"plain", {}}}, hide);
  ASSERT_TRUE(hidden.ok());
  EXPECT_THAT(*hidden, ElementsAre(EnvChange{"PLAIN_VISIBLE", ""}));
}

TEST(WorkerIsolationEnvTest, OptOutWritesNothingButStillValidates) {
  PlainPlugin plugin;
  std::vector<VisibleFamily> families = {{&plugin, DevicesWithPhysicalIndices({0, 1})}};
  IsolationPolicy policy;
  policy.Set("plain", {.opt_out = true, .zero_assigned = ZeroAssignedPolicy::kHide});
  auto env = WorkerIsolationEnv(families, {{"plain", {1}}}, policy);
  ASSERT_TRUE(env.ok());
  EXPECT_THAT(*env, IsEmpty());
  EXPECT_FALSE(WorkerIsolationEnv(families, {{"plain", {2}}}, policy).ok());
}

TEST(WorkerIsolationEnvTest, RejectsBadAssignments) {
  PlainPlugin plugin;
  std::vector<VisibleFamily> families = {{&plugin, DevicesWithPhysicalIndices({0, 1})}};
  auto out_of_range = WorkerIsolationEnv(families, {{"plain", {2}}}, IsolationPolicy());
  EXPECT_EQ(out_of_range.status().message(),
            "plain instance 2 is out of range: this node advertises 2 PLAIN");
  auto twice = WorkerIsolationEnv(families, {{"plain", {0, 0}}}, IsolationPolicy());
  EXPECT_EQ(twice.status().message(), "plain instance 0 is assigned twice");
  auto unknown = WorkerIsolationEnv(families, {{"tpu", {0}}}, IsolationPolicy());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(IsolationPolicyTest, ReadsPerFamilyVariables) {
  Environment env;
  env.Set("TESSERA_NOSET_CUDA_VISIBLE_DEVICES", "yes");
  env.Set("TESSERA_ZERO_ASSIGNED_POLICY", "hide");
  env.Set("TESSERA_ZERO_ASSIGNED_POLICY_TPU_VISIBLE_CHIPS", "inherit");
  auto policy = IsolationPolicy::FromEnvironment(env);
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_TRUE(policy->For("nvidia").opt_out);
  EXPECT_EQ(policy->For("nvidia").zero_assigned, ZeroAssignedPolicy::kHide);
  EXPECT_FALSE(policy->For("tpu").opt_out);
  EXPECT_EQ(policy->For("tpu").zero_assigned, ZeroAssignedPolicy::kInherit);
  EXPECT_EQ(policy->For("amd").zero_assigned, ZeroAssignedPolicy::kHide);
}

TEST(IsolationPolicyTest, DefaultsLeaveMasksAlone) {
  auto policy = IsolationPolicy::FromEnvironment(Environment());
  ASSERT_TRUE(policy.ok());
  for (const AcceleratorPlugin* p : AcceleratorPlugins()) {
    EXPECT_EQ(policy->For(p->family()), FamilyIsolationPolicy{}) << p->family();
  }
}

TEST(IsolationPolicyTest, MalformedValuesNameTheVariable) {
  Environment zero_policy;
  zero_policy.Set("TESSERA_ZERO_ASSIGNED_POLICY", "sometimes");
  EXPECT_EQ(IsolationPolicy::FromEnvironment(zero_policy).status().message(),
            "TESSERA_ZERO_ASSIGNED_POLICY=\"sometimes\": expected \"inherit\" or \"hide\"");
  Environment noset;
  noset.Set("TESSERA_NOSET_HIP_VISIBLE_DEVICES", "maybe");
  auto status = IsolationPolicy::FromEnvironment(noset).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("TESSERA_NOSET_HIP_VISIBLE_DEVICES"), absl::string_view::npos);
}

TEST(ApplyEnvChangesTest, SetsAndUnsets) {
  Environment env;
  env.Set("TPU_HOST_BOUNDS", "1,1,1");
  ApplyEnvChanges({{"TPU_VISIBLE_CHIPS", "0,1"}, {"TPU_HOST_BOUNDS", std::nullopt}}, env);
  EXPECT_EQ(env.Get("TPU_VISIBLE_CHIPS"), "0,1");
  EXPECT_FALSE(env.Has("TPU_HOST_BOUNDS"));
}

}  // namespace
}  // namespace tessera
