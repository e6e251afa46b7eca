#include "train/job_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "resources/quantity.h"

namespace tessera::train {
namespace {

using ::testing::HasSubstr;

// Resources in the proto are raw fixed point: one unit is Quantity::kScale.
constexpr int64_t kOne = Quantity::kScale;

v1::JobSpec WithCommand() {
  v1::JobSpec spec;
  spec.set_name("train");
  spec.add_argv("python");
  spec.add_argv("train.py");
  return spec;
}

v1::JobSpec SlicesSpec() {
  v1::JobSpec spec = WithCommand();
  v1::SliceAlternative* slice = spec.mutable_placement()->add_slices();
  slice->mutable_shape()->set_generation(v1::TPU_GENERATION_V6E);
  slice->mutable_shape()->add_dims(4);
  slice->mutable_shape()->add_dims(4);
  slice->set_num_slices(2);
  (*slice->mutable_per_host()->mutable_raw())["CPU"] = 8 * kOne;
  return spec;
}

v1::JobSpec WorkersSpec() {
  v1::JobSpec spec = WithCommand();
  v1::GangPlacement* p = spec.mutable_placement();
  p->set_min_workers(4);
  p->set_max_workers(4);
  (*p->mutable_resources_per_worker()->mutable_raw())["CPU"] = kOne;
  (*p->mutable_resources_per_worker()->mutable_raw())["GPU"] = kOne;
  p->set_strategy(v1::PLACEMENT_STRATEGY_SPREAD);
  (*spec.mutable_env())["NCCL_DEBUG"] = "INFO";
  spec.set_max_restarts(3);
  return spec;
}

v1::JobSpec NodesSpec() {
  v1::JobSpec spec = WithCommand();
  v1::GangPlacement* p = spec.mutable_placement();
  p->set_min_nodes(2);
  p->set_max_nodes(2);
  p->set_nproc_per_node(4);
  (*p->mutable_resources_per_node()->mutable_raw())["CPU"] = 16 * kOne;
  (*p->mutable_resources_per_node()->mutable_raw())["GPU"] = 4 * kOne;
  v1::LabelSelectorConstraint* accelerator = p->add_label_selectors()->add_label_constraints();
  accelerator->set_label_key("tessera.io/accelerator-type");
  accelerator->set_operator_(v1::LABEL_OPERATOR_IN);
  accelerator->add_label_values("H100");
  accelerator->add_label_values("H200");
  spec.set_torch_env(true);
  return spec;
}

// Expects InvalidArgument whose message names `field`.
void ExpectRefused(const v1::JobSpec& spec, const std::string& field) {
  absl::Status status = ValidateJobSpec(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr(field));
}

TEST(ValidateJobSpecTest, AcceptsASlicesSpec) {
  EXPECT_TRUE(ValidateJobSpec(SlicesSpec()).ok()) << ValidateJobSpec(SlicesSpec());
}

TEST(ValidateJobSpecTest, AcceptsAnNvlinkHostsSpecWithoutATopology) {
  v1::JobSpec spec = WithCommand();
  v1::SliceAlternative* slice = spec.mutable_placement()->add_slices();
  slice->set_nvlink_hosts(4);
  (*slice->mutable_per_host()->mutable_raw())["GPU"] = 8 * kOne;
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
}

TEST(ValidateJobSpecTest, AcceptsAWorkersSpec) {
  EXPECT_TRUE(ValidateJobSpec(WorkersSpec()).ok()) << ValidateJobSpec(WorkersSpec());
}

TEST(ValidateJobSpecTest, AcceptsANodesSpec) {
  EXPECT_TRUE(ValidateJobSpec(NodesSpec()).ok()) << ValidateJobSpec(NodesSpec());
}

TEST(ValidateJobSpecTest, AcceptsAFractionalShareThatDividesInRawUnits) {
  v1::JobSpec spec = NodesSpec();
  // 3 CPUs among 4 ranks: 0.75 each, exact in fixed point.
  (*spec.mutable_placement()->mutable_resources_per_node()->mutable_raw())["CPU"] = 3 * kOne;
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
}

TEST(ValidateJobSpecTest, RefusesAnEmptyArgv) {
  v1::JobSpec spec = WorkersSpec();
  spec.clear_argv();
  ExpectRefused(spec, "spec.argv");
}

TEST(ValidateJobSpecTest, RefusesAnEmptyProgramName) {
  v1::JobSpec spec = WorkersSpec();
  spec.set_argv(0, "");
  ExpectRefused(spec, "spec.argv");
}

TEST(ValidateJobSpecTest, RefusesTwoPlacementKindsAtOnce) {
  v1::JobSpec spec = WorkersSpec();
  spec.mutable_placement()->set_max_nodes(2);
  spec.mutable_placement()->set_nproc_per_node(1);
  ExpectRefused(spec, "spec.placement");

  v1::JobSpec slices_and_workers = SlicesSpec();
  slices_and_workers.mutable_placement()->set_max_workers(2);
  ExpectRefused(slices_and_workers, "spec.placement");
}

TEST(ValidateJobSpecTest, RefusesNoPlacementKind) {
  ExpectRefused(WithCommand(), "spec.placement");
}

TEST(ValidateJobSpecTest, RefusesAnUnknownStrategy) {
  v1::JobSpec spec = WorkersSpec();
  spec.mutable_placement()->set_strategy(static_cast<v1::PlacementStrategy>(42));
  ExpectRefused(spec, "spec.placement.strategy");
}

TEST(ValidateJobSpecTest, RefusesAnEnvNameThatIsNotAVariableName) {
  for (const std::string name : {"1ABC", "A-B", "", "A=B", "PATH X"}) {
    SCOPED_TRACE(name);
    v1::JobSpec spec = WorkersSpec();
    (*spec.mutable_env())[name] = "x";
    ExpectRefused(spec, "spec.env");
  }
}

TEST(ValidateJobSpecTest, RefusesAnEnvValueHoldingANul) {
  v1::JobSpec spec = WorkersSpec();
  (*spec.mutable_env())["TOKEN"] = std::string("a\0b", 3);
  ExpectRefused(spec, "spec.env");
}

TEST(ValidateJobSpecTest, RefusesNegativeMaxRestarts) {
  v1::JobSpec spec = WorkersSpec();
  spec.set_max_restarts(-1);
  ExpectRefused(spec, "spec.max_restarts");
}

TEST(ValidateJobSpecTest, RefusesNegativeTimeouts) {
  v1::JobSpec hang = WorkersSpec();
  hang.set_hang_timeout_ms(-1);
  ExpectRefused(hang, "spec.hang_timeout_ms");
  v1::JobSpec grace = WorkersSpec();
  grace.set_stop_grace_ms(-1);
  ExpectRefused(grace, "spec.stop_grace_ms");
  v1::JobSpec start = WorkersSpec();
  start.set_start_timeout_ms(-1);
  ExpectRefused(start, "spec.start_timeout_ms");
}

TEST(ValidateJobSpecTest, RefusesResourcesPerNodeThatDoNotDivideAmongItsRanks) {
  v1::JobSpec spec = NodesSpec();
  spec.mutable_placement()->set_nproc_per_node(3);
  // 16 CPUs divide among 3 only as a repeating fraction; the raw amount 160000 is not a multiple.
  ExpectRefused(spec, "spec.placement.resources_per_node");
}

TEST(ValidateJobSpecTest, RefusesANodesSpecWithoutRanksPerNode) {
  v1::JobSpec spec = NodesSpec();
  spec.mutable_placement()->set_nproc_per_node(0);
  ExpectRefused(spec, "spec.placement.nproc_per_node");
}

TEST(ValidateJobSpecTest, RefusesAWorkerThatAsksForNothing) {
  v1::JobSpec spec = WorkersSpec();
  spec.mutable_placement()->clear_resources_per_worker();
  ExpectRefused(spec, "spec.placement.resources_per_worker");
}

TEST(ValidateJobSpecTest, RefusesNegativeResources) {
  v1::JobSpec spec = WorkersSpec();
  (*spec.mutable_placement()->mutable_resources_per_worker()->mutable_raw())["CPU"] = -kOne;
  ExpectRefused(spec, "spec.placement.resources_per_worker");
}

TEST(ValidateJobSpecTest, AcceptsElasticRangesAndRefusesAMinimumAboveTheMaximum) {
  v1::JobSpec workers = WorkersSpec();
  workers.mutable_placement()->set_max_workers(4);
  workers.mutable_placement()->set_min_workers(2);
  EXPECT_TRUE(ValidateJobSpec(workers).ok());
  workers.mutable_placement()->set_min_workers(5);
  ExpectRefused(workers, "spec.placement.min_workers");

  v1::JobSpec nodes = NodesSpec();
  nodes.mutable_placement()->set_max_nodes(3);
  nodes.mutable_placement()->set_min_nodes(1);
  EXPECT_TRUE(ValidateJobSpec(nodes).ok());
  nodes.mutable_placement()->set_min_nodes(4);
  ExpectRefused(nodes, "spec.placement.min_nodes");

  v1::JobSpec slices = SlicesSpec();
  slices.mutable_placement()->mutable_slices(0)->set_num_slices(2);
  slices.mutable_placement()->set_min_slices(1);
  EXPECT_TRUE(ValidateJobSpec(slices).ok());
  slices.mutable_placement()->set_min_slices(3);
  ExpectRefused(slices, "spec.placement.min_slices");
}

TEST(ValidateJobSpecTest, RefusesANegativeElasticCheck) {
  v1::JobSpec spec = WorkersSpec();
  spec.set_elastic_check_ms(-1);
  ExpectRefused(spec, "spec.elastic_check_ms");
}

TEST(ValidateJobSpecTest, RefusesASliceWithoutAShape) {
  v1::JobSpec spec = SlicesSpec();
  spec.mutable_placement()->mutable_slices(0)->clear_shape();
  ExpectRefused(spec, "spec.placement.slices[0]: a TPU slice shape is needed");
}

TEST(ValidateJobSpecTest, RefusesASliceShapeThatIsNoSliceOfItsGeneration) {
  v1::JobSpec spec = SlicesSpec();
  spec.mutable_placement()->mutable_slices(0)->mutable_shape()->set_dims(1, 3);
  ExpectRefused(spec, "spec.placement.slices[0].shape: topology \"4x3\" is not a valid v6e slice");
  spec.mutable_placement()->mutable_slices(0)->mutable_shape()->clear_generation();
  ExpectRefused(spec, "spec.placement.slices[0].shape.generation: unspecified");
}

TEST(ValidateJobSpecTest, RefusesABadLabelSelector) {
  v1::JobSpec spec = NodesSpec();
  v1::LabelSelectorConstraint* gpu =
      spec.mutable_placement()->add_label_selectors()->add_label_constraints();
  gpu->set_label_key("gpu");
  gpu->set_operator_(v1::LABEL_OPERATOR_IN);  // and no values
  ExpectRefused(spec,
                "spec.placement.label_selectors[1].label_constraints[0].label_values: "
                "LABEL_OPERATOR_IN needs at least one value");
}

TEST(ValidateJobSpecTest, RefusesALongName) {
  v1::JobSpec spec = WorkersSpec();
  spec.set_name(std::string(129, 'n'));
  ExpectRefused(spec, "spec.name");
}

TEST(ValidateJobSpecTest, AWorkingDirArchiveIsCheckedAtSubmissionNamingTheLimit) {
  v1::JobSpec spec = WorkersSpec();
  v1::DirectoryArchive archive;
  archive.add_entries()->set_path("train.py");
  spec.set_working_dir(archive.SerializeAsString());
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  spec.set_working_dir(std::string("\xff\xff\xff", 3));
  ExpectRefused(spec, "spec.working_dir: working dir archive: not a DirectoryArchive");
  spec.set_working_dir(std::string(4 << 20, 'x'));
  ExpectRefused(spec, "more than the limit of 3.5 MiB");
}

}  // namespace
}  // namespace tessera::train
