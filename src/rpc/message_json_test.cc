#include "rpc/message_json.h"

#include <gtest/gtest.h>

#include "tessera/v1/head.pb.h"
#include "tessera/v1/jobs.pb.h"
#include "tessera/v1/node_agent.pb.h"

namespace tessera::rpc {
namespace {

TEST(MessageJsonTest, UsesProtoFieldNamesWithEveryPrimitiveField) {
  tessera::v1::JobInfo job;
  job.set_job_id("job-1");
  job.set_exit_reason("exited with code 3");
  const auto json = MessageJson(job);
  EXPECT_EQ(json["job_id"], "job-1");
  EXPECT_EQ(json["exit_reason"], "exited with code 3");
  EXPECT_EQ(json["state"], "UNKNOWN");  // primitive fields are always present
}

// Scripts and the docs read the words people see, not the proto enum names ("NODE_STATE_ALIVE").
TEST(MessageJsonTest, WritesTheHeadsStatesAsTheirWords) {
  tessera::v1::ClusterStatus status;
  status.add_nodes()->set_state(tessera::v1::NODE_STATE_ALIVE);
  status.add_nodes()->set_state(tessera::v1::NODE_STATE_DEAD);
  status.add_placement_groups()->set_state(tessera::v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  status.mutable_slices()->add_groups()->set_state(tessera::v1::SLICE_GROUP_STATE_BROKEN);
  status.add_demand()->set_status(tessera::v1::DEMAND_STATUS_INFEASIBLE);
  const auto json = MessageJson(status);
  EXPECT_EQ(json["nodes"][0]["state"], "ALIVE");
  EXPECT_EQ(json["nodes"][1]["state"], "DEAD");
  EXPECT_EQ(json["placement_groups"][0]["state"], "RESCHEDULING");
  EXPECT_EQ(json["slices"]["groups"][0]["state"], "BROKEN");
  EXPECT_EQ(json["demand"][0]["status"], "infeasible");

  tessera::v1::ListJobsResponse jobs;
  jobs.add_jobs()->set_state(tessera::v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(MessageJson(jobs)["jobs"][0]["state"], "SUCCEEDED");
  tessera::v1::PickNodeResponse picked;
  picked.set_status(tessera::v1::PICK_STATUS_PLACED);
  EXPECT_EQ(MessageJson(picked)["status"], "placed");
}

// Gang jobs, their ranks and phases, workers, lease replies and strategies keep the words they
// had as strings on the wire.
TEST(MessageJsonTest, WritesJobsWorkersAndStrategiesAsTheirWords) {
  tessera::v1::JobStatus job;
  job.set_state(tessera::v1::GANG_JOB_STATE_RESTARTING);
  job.add_ranks()->set_state(tessera::v1::RANK_STATE_RUNNING);
  job.add_past_ranks()->set_state(tessera::v1::RANK_STATE_FAILED);
  job.add_phases()->set_state(tessera::v1::GANG_JOB_STATE_PENDING);
  const auto json = MessageJson(job);
  EXPECT_EQ(json["state"], "RESTARTING");
  EXPECT_EQ(json["ranks"][0]["state"], "RUNNING");
  EXPECT_EQ(json["past_ranks"][0]["state"], "FAILED");
  EXPECT_EQ(json["phases"][0]["state"], "PENDING");

  tessera::v1::ListWorkersResponse workers;
  workers.add_workers()->set_state(tessera::v1::WORKER_STATE_EXITED);
  EXPECT_EQ(MessageJson(workers)["workers"][0]["state"], "EXITED");
  tessera::v1::LeaseReply reply;
  reply.set_status(tessera::v1::PICK_STATUS_INFEASIBLE);
  EXPECT_EQ(MessageJson(reply)["status"], "infeasible");
  tessera::v1::ListPlacementGroupsResponse groups;
  groups.add_groups()->set_strategy(tessera::v1::PLACEMENT_STRATEGY_STRICT_PACK);
  EXPECT_EQ(MessageJson(groups)["groups"][0]["strategy"], "STRICT_PACK");
}

// `"CPU": "80000"` meant 8 CPUs: amounts are numbers in their units.
TEST(MessageJsonTest, WritesAmountsAsNumbersInTheirUnits) {
  tessera::v1::ClusterStatus status;
  tessera::v1::NodeInfo* node = status.add_nodes();
  auto& total = *node->mutable_node()->mutable_resources()->mutable_raw();
  total["CPU"] = 80000;
  total["GPU"] = 5000;                                      // half a GPU
  total["memory"] = int64_t{17179869184} * 10000;           // 16 GiB
  (*node->mutable_available()->mutable_raw())["CPU"] = -1;  // never valid: shown raw
  tessera::v1::ResourceUsage* usage = status.add_usage();
  usage->set_resource("CPU");
  usage->set_used_raw(25000);
  usage->set_total_raw(80000);
  const auto json = MessageJson(status);
  const auto& resources = json["nodes"][0]["node"]["resources"];
  EXPECT_EQ(resources["CPU"], 8);
  EXPECT_TRUE(resources["CPU"].is_number_integer());
  EXPECT_DOUBLE_EQ(resources["GPU"].get<double>(), 0.5);
  EXPECT_EQ(resources["memory"], int64_t{17179869184});
  EXPECT_EQ(json["nodes"][0]["available"]["CPU_raw"], -1);
  EXPECT_DOUBLE_EQ(json["usage"][0]["used"].get<double>(), 2.5);
  EXPECT_EQ(json["usage"][0]["total"], 8);
  EXPECT_EQ(json["usage"][0]["resource"], "CPU");
}

TEST(MessageJsonTest, WritesDeviceFractionsAndSixtyFourBitIntegersAsNumbers) {
  tessera::v1::LeaseInfo lease;
  tessera::v1::DeviceGrant* grant = lease.mutable_allocation()->add_devices();
  grant->set_resource("GPU");
  grant->add_instances(0);
  grant->add_instances(3);
  grant->add_amounts_raw(10000);
  grant->add_amounts_raw(2500);
  const auto json = MessageJson(lease);
  const auto& devices = json["allocation"]["devices"][0];
  EXPECT_EQ(devices["instances"], nlohmann::ordered_json::array({0, 3}));
  EXPECT_EQ(devices["amounts"][0], 1);
  EXPECT_DOUBLE_EQ(devices["amounts"][1].get<double>(), 0.25);

  tessera::v1::JobStatus job;
  job.set_submit_time_ms(1733100000123);
  EXPECT_EQ(MessageJson(job)["submit_time_ms"], int64_t{1733100000123});
}

}  // namespace
}  // namespace tessera::rpc
