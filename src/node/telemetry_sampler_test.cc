// The agent's telemetry sampler on simulated hardware: the devices leases hold (by physical
// index, through the node's masks) drive the simulated model, so a leased GPU shows work and the
// others do not; running workers' CPU time and memory are read from /proc; a reading becomes the
// head's DeviceSamples with absent figures left unset.
#include "node/telemetry_sampler.h"

#include <unistd.h>

#include "gtest/gtest.h"
#include "node/agent_proto.h"
#include "node/agent_test_util.h"

namespace tessera {
namespace {

using node_testing::Eventually;
using node_testing::Res;

LeaseRecord LeaseOf(std::vector<DeviceGrant> devices) {
  LeaseRecord lease;
  lease.id = LeaseId("l-1");
  lease.allocation.devices = std::move(devices);
  return lease;
}

DeviceGrant Grant(std::string resource, std::vector<int> instances, std::vector<Quantity> amounts) {
  return DeviceGrant{std::move(resource), std::move(instances), std::move(amounts)};
}

TEST(BusyDevicesOfLeasesTest, InstancesBecomePhysicalIndicesThroughTheNodesMask) {
  AgentOptions options;
  options.node_id = "n1";
  options.hardware_file = node_testing::ExampleHardware("h100-sxm-8.yaml");
  options.environment = Environment(
      std::map<std::string, std::string, std::less<>>{{"CUDA_VISIBLE_DEVICES", "6,2,4"}});
  auto loaded = LoadNodeHardware(options);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const BusyDevices busy = BusyDevicesOfLeases(
      loaded->hardware,
      {LeaseOf({Grant("GPU", {1}, {Quantity::FromInt(1)})}),
       // A fraction of a device makes it busy too.
       LeaseOf({Grant("GPU", {2}, {*Quantity::Parse("0.5")})}),
       // A resource no family advertises, and an instance out of range, are ignored.
       LeaseOf({Grant("widget", {0}, {Quantity::FromInt(1)}),
                Grant("GPU", {7}, {Quantity::FromInt(1)})})});
  ASSERT_EQ(busy.size(), 1u);
  EXPECT_EQ(busy.at("nvidia"), (std::set<int>{2, 4}));
}

TEST(BusyDevicesOfLeasesTest, NoLeasesNoBusyDevices) {
  LoadedNode loaded = node_testing::LoadExample("h100-sxm-8.yaml");
  EXPECT_TRUE(BusyDevicesOfLeases(loaded.hardware, {}).empty());
}

// The reading of device `instance` of `reading`, or null.
const DeviceReading* Device(const NodeReading& reading, int instance) {
  for (const DeviceReading& device : reading.devices) {
    if (device.instance == instance) return &device;
  }
  return nullptr;
}

TEST(TelemetrySamplerTest, ALeasedSimulatedGpuShowsWorkAndTheFreeOnesDoNot) {
  std::unique_ptr<AgentState> state = node_testing::MakeState("h100-sxm-8.yaml");
  auto sampler = TelemetrySampler::Start(state.get(), {.interval = absl::Milliseconds(10)});
  ASSERT_TRUE(Eventually([&] { return sampler->Latest().read_at != absl::InfinitePast(); }));
  NodeReading first = sampler->Latest();
  ASSERT_EQ(first.devices.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    const DeviceReading* device = Device(first, i);
    ASSERT_NE(device, nullptr) << i;
    EXPECT_EQ(device->resource, "GPU");
    EXPECT_EQ(device->type, "H100");
    EXPECT_EQ(device->telemetry.family, "nvidia");
    EXPECT_EQ(device->telemetry.source, "simulated");
    EXPECT_EQ(device->telemetry.utilization_ratio, 0.0) << "nothing holds GPU " << i;
    EXPECT_EQ(device->telemetry.memory_total_bytes, uint64_t{80} << 30);
  }

  auto decision = state->TryLease({.resources = Res("GPU=1")});
  ASSERT_TRUE(decision.ok() && decision->lease.has_value());
  const int held = decision->lease->allocation.devices.at(0).instances.at(0);
  ASSERT_TRUE(Eventually([&] {
    const DeviceReading* device = Device(sampler->Latest(), held);
    return device != nullptr && device->telemetry.utilization_ratio.value_or(0) > 0;
  }));
  const NodeReading busy = sampler->Latest();
  for (int i = 0; i < 8; ++i) {
    if (i == held) continue;
    EXPECT_EQ(Device(busy, i)->telemetry.utilization_ratio, 0.0) << i;
  }
  sampler->Stop();
  EXPECT_EQ(sampler->Latest().devices.size(), 8u) << "the last reading stays after Stop";
}

TEST(TelemetrySamplerTest, RunningWorkersCpuAndMemoryAreReadFromProc) {
  std::unique_ptr<AgentState> state = node_testing::MakeState("cpu-only.yaml");
  auto decision = state->TryLease({.job_id = "job-7", .resources = Res("CPU=1")});
  ASSERT_TRUE(decision.ok() && decision->lease.has_value());
  // This test process stands in for the worker: its /proc files are real.
  ASSERT_TRUE(state->WorkerStarted(decision->lease->worker, ::getpid(), {"test"}, {}, "", "").ok());
  auto sampler = TelemetrySampler::Start(state.get(), {.interval = absl::Milliseconds(10)});
  // A rate needs two readings of the worker.
  ASSERT_TRUE(Eventually([&] {
    const NodeReading reading = sampler->Latest();
    return reading.workers.workers.size() == 1 && reading.workers.workers[0].cpu_cores.has_value();
  }));
  const NodeReading reading = sampler->Latest();
  const WorkerUsage& worker = reading.workers.workers[0];
  EXPECT_EQ(worker.worker, decision->lease->worker);
  EXPECT_EQ(worker.job_id, "job-7");
  EXPECT_TRUE(worker.cpu_seconds.has_value());  // may still be 0 ticks in a fresh process
  EXPECT_GT(worker.memory_bytes.value_or(0), 0u);
  EXPECT_EQ(reading.workers.memory_bytes, *worker.memory_bytes);
  EXPECT_TRUE(reading.devices.empty()) << "a CPU-only node has no devices";

  // Once it has exited it is no longer read.
  ASSERT_TRUE(state->WorkerExited(decision->lease->worker, WorkerExitInfo{.exit_code = 0}).ok());
  ASSERT_TRUE(Eventually([&] { return sampler->Latest().workers.workers.empty(); }));
  EXPECT_EQ(sampler->Latest().workers.cpu_cores, 0);
}

TEST(DeviceSampleToProtoTest, AbsentFiguresStayUnsetAndPresentOnesAreCopied) {
  DeviceTelemetry telemetry;
  telemetry.family = "tpu";
  telemetry.index = 3;
  telemetry.duty_cycle_ratio = 0.25;
  telemetry.memory_used_bytes = 1024;
  telemetry.power_watts = 0.0;  // measured, and zero: set
  telemetry.energy_joules = 9;  // not part of a sample
  v1::DeviceSample sample;
  const absl::Time at = absl::FromUnixMillis(1'700'000'000'123);
  ASSERT_TRUE(DeviceSampleToProto(telemetry, "TPU", 1, at, &sample));
  EXPECT_EQ(sample.resource(), "TPU");
  EXPECT_EQ(sample.index(), 1);
  EXPECT_EQ(sample.time_ms(), 1'700'000'000'123);
  EXPECT_TRUE(sample.has_duty_cycle());
  EXPECT_EQ(sample.duty_cycle(), 0.25);
  EXPECT_TRUE(sample.has_memory_used_bytes());
  EXPECT_EQ(sample.memory_used_bytes(), 1024u);
  EXPECT_TRUE(sample.has_power_watts());
  EXPECT_EQ(sample.power_watts(), 0.0);
  EXPECT_FALSE(sample.has_utilization());
  EXPECT_FALSE(sample.has_sm_activity());
  EXPECT_FALSE(sample.has_tensor_activity());
  EXPECT_FALSE(sample.has_memory_bandwidth());
  EXPECT_FALSE(sample.has_memory_total_bytes());
  EXPECT_FALSE(sample.has_temperature_celsius());
}

TEST(DeviceSampleToProtoTest, ADeviceWithoutFiguresMakesNoSample) {
  DeviceTelemetry telemetry;
  telemetry.family = "gaudi";
  telemetry.energy_joules = 5;  // nothing a sample carries
  v1::DeviceSample sample;
  sample.set_resource("untouched");
  EXPECT_FALSE(DeviceSampleToProto(telemetry, "HPU", 0, absl::Now(), &sample));
  EXPECT_EQ(sample.resource(), "untouched");
}

}  // namespace
}  // namespace tessera
