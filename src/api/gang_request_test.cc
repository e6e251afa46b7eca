#include "api/gang_request.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <utility>

#include "train/job_spec.h"
#include "wire/proto_convert.h"

namespace tessera::api {
namespace {

ResourceSet Amounts(const std::map<std::string, double>& amounts) {
  return ResourceSet::FromAmounts(amounts).value();
}

GangOptions Named(std::string name) {
  GangOptions options;
  options.name = std::move(name);
  options.command = {"true"};
  return options;
}

TEST(GangRequestTest, WorkersCarryTheirTypedBundleStrategyAndSelectorsToTheJob) {
  GangOptions options = Named("workers");
  options.workers = 4;
  options.resources_per_worker = Amounts({{"CPU", 2}, {"GPU", 0.5}});
  options.strategy = PlacementStrategy::kStrictSpread;
  options.label_selectors = {
      LabelSelector::Of({{"zone", SelectorOperator::kIn, {"a", "b"}}}).value(),
      LabelSelector::Of({{"zone", SelectorOperator::kNotIn, {"c"}}}).value()};
  auto request = GangRequest(options);
  ASSERT_TRUE(request.ok()) << request.status();
  const v1::GangPlacement& placement = request->spec().placement();
  EXPECT_EQ(placement.max_workers(), 4);
  EXPECT_EQ(wire::ResourcesFromProto(placement.resources_per_worker()).value(),
            options.resources_per_worker);
  EXPECT_EQ(placement.strategy(), v1::PLACEMENT_STRATEGY_STRICT_SPREAD);
  ASSERT_EQ(placement.label_selectors_size(), 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(wire::LabelSelectorFromProto(placement.label_selectors(i)).value(),
              options.label_selectors[i]);
  }
  EXPECT_TRUE(train::ValidateJobSpec(request->spec()).ok());
}

TEST(GangRequestTest, AWorkerHoldsOneCpuPackedUnlessTold) {
  GangOptions options = Named("defaults");
  options.workers = 2;
  auto request = GangRequest(options);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(wire::ResourcesFromProto(request->spec().placement().resources_per_worker())
                .value()
                .ToString(),
            "CPU=1");
  EXPECT_EQ(request->spec().placement().strategy(), v1::PLACEMENT_STRATEGY_PACK);
}

TEST(GangRequestTest, ANodeHoldsACpuPerProcessUnlessItsResourcesAreGiven) {
  GangOptions options = Named("nodes");
  options.nodes = 2;
  options.procs_per_node = 4;
  auto request = GangRequest(options);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(
      wire::ResourcesFromProto(request->spec().placement().resources_per_node()).value().ToString(),
      "CPU=4");
  EXPECT_TRUE(train::ValidateJobSpec(request->spec()).ok());

  options.resources_per_node = Amounts({{"CPU", 8}, {"GPU", 4}});
  request = GangRequest(options);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(
      wire::ResourcesFromProto(request->spec().placement().resources_per_node()).value().ToString(),
      "CPU=8,GPU=4");
}

TEST(GangRequestTest, BadTypedOptionsAreRefusedInOneLineAndNothingAborts) {
  GangOptions neither = Named("neither");
  EXPECT_EQ(GangRequest(neither).status().message(),
            "gang: give exactly one of slice, workers or nodes");
  // A worker asking for nothing, and nodes of no process: the job's own check names the field.
  GangOptions empty = Named("empty");
  empty.workers = 1;
  empty.resources_per_worker = ResourceSet();
  auto request = GangRequest(empty);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(train::ValidateJobSpec(request->spec()).message(),
            "spec.placement.resources_per_worker: a worker must ask for something");
  GangOptions no_procs = Named("no-procs");
  no_procs.nodes = 1;
  no_procs.procs_per_node = -1;
  request = GangRequest(no_procs);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(train::ValidateJobSpec(request->spec()).message(),
            "spec.placement.nproc_per_node: must be 1 or more");
}

// A gang's state is an enum: ended() compares it, and it prints as the word `tessera job` shows.
TEST(GangStatusTest, OnlySucceededFailedAndStoppedHaveEndedAndEachStatePrintsAsItsWord) {
  GangStatus status;
  EXPECT_EQ(status.state, GangState::kPending);
  for (GangState state :
       {GangState::kPending, GangState::kStarting, GangState::kRunning, GangState::kRestarting}) {
    status.state = state;
    EXPECT_FALSE(status.ended()) << state;
  }
  for (GangState state : {GangState::kSucceeded, GangState::kFailed, GangState::kStopped}) {
    status.state = state;
    EXPECT_TRUE(status.ended()) << state;
  }
  std::ostringstream printed;
  printed << GangState::kRestarting << " " << GangRankState::kFailed << " "
          << JobId("job-1a2b3c4d");
  EXPECT_EQ(printed.str(), "RESTARTING FAILED job-1a2b3c4d");
}

}  // namespace
}  // namespace tessera::api
