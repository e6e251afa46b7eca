#include "node/agent_proto.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "wire/proto_convert.h"

namespace tessera {

absl::StatusOr<LeaseAsk> LeaseAskFromProto(const v1::LeaseRequest& proto) {
  if (proto.worker().argv().empty() || proto.worker().argv(0).empty()) {
    return absl::InvalidArgumentError("worker.argv: no command to run");
  }
  if (proto.hops() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("hops: ", proto.hops(), " is negative"));
  }
  TESSERA_ASSIGN_OR_RETURN(wire::ResourceRequestValue value,
                           wire::ResourceRequestFromProto(proto.request()));
  LeaseAsk ask;
  ask.job_id = proto.job_id();
  ask.resources = std::move(value.request.resources);
  ask.selectors = std::move(value.request.selectors);
  ask.strategy = value.request.strategy;
  ask.affinity = std::move(value.request.affinity);
  if (value.target.has_value()) {
    ask.bundle = BundleTarget{value.target->placement_group, value.target->bundle_index};
  }
  return ask;
}

WorkerExitInfo WorkerExitFromStatus(const ExitStatus& status) {
  WorkerExitInfo exit;
  exit.exit_code = status.exit_code;
  exit.signal = status.signal;
  exit.out_of_memory = status.out_of_memory;
  exit.reason = status.reason.empty() ? DescribeExit(status) : status.reason;
  return exit;
}

void WorkerExitToProto(const WorkerExitInfo& exit, v1::WorkerExit* proto) {
  proto->set_exit_code(exit.exit_code);
  proto->set_signal(exit.signal);
  proto->set_out_of_memory(exit.out_of_memory);
  proto->set_reason(exit.reason);
  proto->set_bundle_removed(exit.bundle_removed);
}

v1::WorkerState WorkerStateToProto(WorkerState state) {
  switch (state) {
    case WorkerState::kStarting: return v1::WORKER_STATE_STARTING;
    case WorkerState::kRunning: return v1::WORKER_STATE_RUNNING;
    case WorkerState::kExited: return v1::WORKER_STATE_EXITED;
  }
  return v1::WORKER_STATE_UNSPECIFIED;
}

void WorkerToProto(const WorkerRecord& worker, v1::WorkerInfo* proto) {
  proto->set_worker_id(worker.id.value());
  proto->set_lease_id(worker.lease.value());
  proto->set_job_id(worker.job_id);
  proto->set_pid(worker.pid);
  for (const std::string& arg : worker.argv) proto->add_argv(arg);
  proto->set_state(WorkerStateToProto(worker.state));
  if (worker.exit.has_value()) WorkerExitToProto(*worker.exit, proto->mutable_exit());
  wire::AllocationToProto(worker.allocation, proto->mutable_allocation());
  for (const auto& [name, value] : worker.isolation_env) {
    (*proto->mutable_isolation_env())[name] = value;
  }
  proto->set_stdout_path(worker.stdout_path);
  proto->set_stderr_path(worker.stderr_path);
  proto->set_lease_returned(worker.lease_returned);
  if (worker.bundle.has_value()) {
    proto->set_placement_group(worker.bundle->group);
    proto->set_bundle_index(worker.bundle->index);
  } else {
    proto->set_bundle_index(-1);
  }
}

void LeaseToProto(const LeaseRecord& lease, v1::LeaseInfo* proto) {
  proto->set_lease_id(lease.id.value());
  wire::AllocationToProto(lease.allocation, proto->mutable_allocation());
  if (lease.bundle.has_value()) {
    proto->set_placement_group(lease.bundle->group);
    proto->set_bundle_index(lease.bundle->index);
  } else {
    proto->set_bundle_index(-1);
  }
}

void BundleToProto(const BundleRecord& bundle, v1::HeldBundle* proto) {
  proto->set_placement_group(bundle.key.group);
  proto->set_bundle_index(bundle.key.index);
  wire::AllocationToProto(bundle.allocation, proto->mutable_allocation());
  proto->set_committed(bundle.committed);
}

absl::StatusOr<std::vector<BundleAsk>> BundleAsksFromProto(const v1::PrepareBundlesRequest& proto) {
  std::vector<BundleAsk> asks;
  for (int i = 0; i < proto.bundles_size(); ++i) {
    const v1::BundleReservation& b = proto.bundles(i);
    TESSERA_ASSIGN_OR_RETURN(
        wire::ExactAllocation allocation,
        wire::AllocationFromProto(b.allocation(), absl::StrCat("bundles[", i, "].allocation")));
    asks.push_back(BundleAsk{b.bundle_index(), std::move(allocation.resources),
                             std::move(allocation.devices)});
  }
  return asks;
}

bool DeviceSampleToProto(const DeviceTelemetry& telemetry, std::string_view resource, int instance,
                         absl::Time read_at, v1::DeviceSample* proto) {
  v1::DeviceSample sample;
  bool any = false;
  auto put = [&any](const auto& figure, auto set) {
    if (!figure.has_value()) return;
    set(*figure);
    any = true;
  };
  put(telemetry.utilization_ratio, [&](double v) { sample.set_utilization(v); });
  put(telemetry.duty_cycle_ratio, [&](double v) { sample.set_duty_cycle(v); });
  put(telemetry.sm_activity_ratio, [&](double v) { sample.set_sm_activity(v); });
  put(telemetry.tensor_activity_ratio, [&](double v) { sample.set_tensor_activity(v); });
  put(telemetry.memory_bandwidth_ratio, [&](double v) { sample.set_memory_bandwidth(v); });
  put(telemetry.memory_used_bytes, [&](uint64_t v) { sample.set_memory_used_bytes(v); });
  put(telemetry.memory_total_bytes, [&](uint64_t v) { sample.set_memory_total_bytes(v); });
  put(telemetry.power_watts, [&](double v) { sample.set_power_watts(v); });
  put(telemetry.temperature_celsius, [&](double v) { sample.set_temperature_celsius(v); });
  if (!any) return false;
  sample.set_resource(std::string(resource));
  sample.set_index(instance);
  sample.set_time_ms(absl::ToUnixMillis(read_at));
  *proto = std::move(sample);
  return true;
}

}  // namespace tessera
