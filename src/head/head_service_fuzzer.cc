// libFuzzer target: the head's gRPC handlers (tessera.v1.HeadNodes and its five sibling services)
// over any request bytes.
//
// Each input is a short script run on a fresh HeadService (fake clock, in-memory store, fake node
// agents) that already holds a CPU node, an 8-GPU NVSwitch node and the 4 hosts of a TPU v6e-16
// slice, all registered through its own RegisterNode. The script is a sequence of calls, each
//   [op byte] [length: 2 bytes, little-endian] [length bytes]
// (a length past the end takes the rest, so a one-call input is "op, length, request"). The op
// byte modulo kOpCount picks one of the head's request-taking RPCs (every one but Shutdown) or a
// harness step (a heartbeat sent as one of the registered nodes, fake-agent faults, silencing
// nodes, moving the clock); the bytes are parsed as that RPC's request (ParseFromArray; a call
// whose bytes do not parse is skipped) and the handler is called directly, with no ServerContext
// (the handlers take none). The op byte's quotient picks the registered node a harness step acts
// on. A fresh service per input keeps memory bounded and makes every crash reproducible from its
// input alone.
//
// Between calls the fake clock moves 100 ms and Tick() runs (health checks, retries, re-placing),
// and the registered nodes heartbeat once a fake second like agents do: reporting the bundles
// their fake agent holds, applying the releases the head answers, registering again (a new
// incarnation) when the head does not know them. WaitPlacementGroup's and WaitSliceGroup's waits
// end on the fake clock, which moves only between calls, so their timeouts are cut to 0: no call
// ever blocks or sleeps.
//
// Checked after every call: no crash or sanitizer report; a failed call carries a message;
// ListNodes succeeds and no live node has more of a resource available than it has in all; the
// cluster status never shows more used than total. At the end of each input: every listing
// (placement groups, slices, jobs, KV) succeeds, pages through to its end, and no page passes
// gRPC's 4 MB message limit. A broken invariant prints one line and aborts.
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/fuzz_script.h"
#include "hardware/node_label_keys.h"
#include "head/head_service.h"
#include "head/node_agent_client.h"
#include "head/state_store.h"
#include "wire/proto_convert.h"

namespace tessera {
namespace {

// gRPC's default limit on one message; a listing page must always fit.
constexpr size_t kMaxMessageBytes = 4 * 1024 * 1024;
// Calls in one input: bounds its run time whatever its length.
constexpr int kMaxCallsPerInput = 64;
constexpr absl::Duration kStep = absl::Milliseconds(100);
constexpr absl::Duration kHeartbeatEvery = absl::Seconds(1);

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "head_service_fuzzer: invariant broken: %s\n", what.c_str());
  std::abort();
}

void Require(bool holds, const std::string& what) {
  if (!holds) Fail(what);
}

// A node agent that keeps the bundles the head prepares, commits and cancels, like a real agent
// would, and fails each phase on demand. Thread-safe (the head calls it outside its lock).
class FuzzAgent : public NodeAgentClient {
 public:
  enum Fault : uint8_t { kFailPrepare = 1, kFailCommit = 2, kFailCancel = 4 };

  absl::Status Prepare(const v1::PrepareBundlesRequest& request) override {
    absl::MutexLock lock(&mu_);
    if ((faults_ & kFailPrepare) != 0) return absl::UnavailableError("fuzz agent: prepare fails");
    for (const v1::BundleReservation& bundle : request.bundles()) {
      v1::HeldBundle& held = held_[{request.placement_group(), bundle.bundle_index()}];
      held.set_placement_group(request.placement_group());
      held.set_bundle_index(bundle.bundle_index());
      *held.mutable_allocation() = bundle.allocation();
      held.set_committed(request.commit());
      held.set_generation(++generation_);
    }
    return absl::OkStatus();
  }
  absl::Status Commit(const v1::CommitBundlesRequest& request) override {
    absl::MutexLock lock(&mu_);
    if ((faults_ & kFailCommit) != 0) return absl::UnavailableError("fuzz agent: commit fails");
    for (int index : request.bundle_indices()) {
      auto it = held_.find({request.placement_group(), index});
      if (it != held_.end()) it->second.set_committed(true);
    }
    return absl::OkStatus();
  }
  absl::Status Cancel(const v1::CancelBundlesRequest& request) override {
    absl::MutexLock lock(&mu_);
    if ((faults_ & kFailCancel) != 0) return absl::UnavailableError("fuzz agent: cancel fails");
    if (request.bundle_indices().empty()) {
      for (auto it = held_.begin(); it != held_.end();) {
        it = it->first.first == request.placement_group() ? held_.erase(it) : std::next(it);
      }
    }
    for (int index : request.bundle_indices()) held_.erase({request.placement_group(), index});
    return absl::OkStatus();
  }

  void SetFaults(uint8_t faults) {
    absl::MutexLock lock(&mu_);
    faults_ = faults;
  }
  std::vector<v1::HeldBundle> Held() const {
    absl::MutexLock lock(&mu_);
    std::vector<v1::HeldBundle> out;
    for (const auto& [key, bundle] : held_) out.push_back(bundle);
    return out;
  }
  // The head's release of a bundle it does not hold: dropped unless prepared again since.
  void Release(const v1::HeldBundle& bundle) {
    absl::MutexLock lock(&mu_);
    auto it = held_.find({bundle.placement_group(), bundle.bundle_index()});
    if (it == held_.end()) return;
    if (bundle.generation() != 0 && bundle.generation() != it->second.generation()) return;
    held_.erase(it);
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::pair<std::string, int>, v1::HeldBundle> held_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  uint8_t faults_ ABSL_GUARDED_BY(mu_) = 0;
};

// A node the harness registered and keeps alive like its agent would.
struct BaseNode {
  NodeSpec spec;
  int incarnation = 1;
  int64_t epoch_seen = 0;  // the head's bundles_epoch in its latest answer
  bool silent = false;     // stops heartbeating (a step of the script)
};

std::vector<BaseNode> BaseNodes() {
  std::vector<BaseNode> nodes;
  auto add = [&](std::string id, const std::string& resources, LabelSet labels,
                 DeviceTopologyPtr gpus) {
    BaseNode node;
    node.spec.id = NodeId(std::move(id));
    auto parsed = ParseResourceSet(resources);
    Require(parsed.ok(), "the harness's node resources parse");
    node.spec.resources = *parsed;
    node.spec.labels = std::move(labels);
    if (gpus != nullptr) node.spec.devices.emplace("GPU", std::move(gpus));
    nodes.push_back(std::move(node));
  };
  add("cpu-0", "CPU=8", {}, nullptr);
  auto fabric = std::make_shared<DeviceTopology>();
  fabric->count = 8;
  for (int i = 0; i < 8; ++i) {
    fabric->numa_node.push_back(i / 4);
    fabric->nearest_nic.push_back(absl::StrCat("nic", i / 4));
    for (int j = i + 1; j < 8; ++j) {
      fabric->links.push_back(
          DeviceLink{i, j, LinkKind::kNvSwitch, 18, 450, BandwidthClass::kHigh});
    }
  }
  add("gpu-0", "CPU=32,GPU=8", {{std::string(labels::kAcceleratorType), "H100"}}, fabric);
  for (int w = 0; w < 4; ++w) {
    add(absl::StrCat("tpu-s1-w", w), "CPU=8,TPU=4",
        {{std::string(labels::kTpuSliceName), "s1"},
         {std::string(labels::kTpuWorkerId), std::to_string(w)},
         {std::string(labels::kTpuTopology), "4x4"},
         {std::string(labels::kTpuPodType), "v6e-16"},
         {std::string(labels::kAcceleratorType), "TPU-V6E"}},
        nullptr);
  }
  return nodes;
}

// What every non-OK answer must have: a message saying why.
void CheckStatus(const grpc::Status& status, const char* rpc) {
  if (!status.ok()) {
    Require(!status.error_message().empty(), absl::StrCat(rpc, " failed without a message"));
  }
}

// One input's world: the service and everything it talks to. Members are destroyed in reverse
// order, so the service goes before the agents, the store and the clock it uses.
class Harness {
 public:
  Harness() : nodes_(BaseNodes()) {
    HeadServiceOptions options;
    options.heartbeat_interval = absl::Milliseconds(500);
    options.node_timeout = absl::Seconds(5);
    options.clock = &clock_;
    options.store = &store_;
    // Small enough that an input can reach the limits, large enough for real use.
    options.max_events = 64;
    options.max_ended_jobs = 16;
    options.max_page_size = 8;
    options.driver_timeout = absl::Seconds(3);
    options.agent_clients = [this](const std::string& node, const std::string&) {
      std::shared_ptr<FuzzAgent>& agent = agents_[node];
      if (agent == nullptr) agent = std::make_shared<FuzzAgent>();
      return agent;
    };
    head_ = std::make_unique<HeadService>(std::move(options));
    for (BaseNode& node : nodes_) Register(node);
    last_beat_ = clock_.Now();
  }

  void Run(const uint8_t* data, size_t size);

 private:
  enum Op : uint8_t {
    kRegisterNode,
    kHeartbeat,
    kPickNode,
    kCreatePlacementGroup,
    kRemovePlacementGroup,
    kWaitPlacementGroup,
    kListPlacementGroups,
    kReserveSlices,
    kReleaseSlices,
    kListSlices,
    kWaitSliceGroup,
    kKeepDriverAlive,
    kDriverExited,
    kListNodes,
    kGetClusterStatus,
    kRecordJob,
    kListJobs,
    kKvPut,
    kKvGet,
    kKvDelete,
    kKvList,
    kRegisterActor,
    kActorDied,
    kGetActor,
    kListActors,
    kActorWorkerExited,
    kListEvents,
    kReportTaskEvents,
    kGetTaskEvents,
    // Harness steps.
    kHeartbeatAsBaseNode,  // a fuzzed heartbeat with a registered node's id and incarnation
    kSetAgentFaults,       // the first byte: FuzzAgent::Fault bits for that node's agent
    kSetSilentNodes,       // the first byte: bit i silences base node i (0 wakes them all)
    kAdvanceClock,         // the first byte: times 250 ms
    kOpCount,
  };

  static std::string Incarnation(const BaseNode& node) {
    return absl::StrCat("i", node.incarnation);
  }
  std::shared_ptr<FuzzAgent> AgentOf(const BaseNode& node) {
    std::shared_ptr<FuzzAgent>& agent = agents_[node.spec.id.value()];
    if (agent == nullptr) agent = std::make_shared<FuzzAgent>();
    return agent;
  }

  // Registers a base node as its agent would, reporting the bundles it holds.
  void Register(BaseNode& node) {
    v1::RegisterNodeRequest request;
    wire::NodeToProto(node.spec, absl::StrCat(node.spec.id.value(), ":7000"), Incarnation(node),
                      request.mutable_node());
    std::shared_ptr<FuzzAgent> agent = AgentOf(node);
    for (const v1::HeldBundle& bundle : agent->Held()) *request.add_bundles() = bundle;
    v1::RegisterNodeResponse response;
    grpc::Status status = head_->nodes().RegisterNode(nullptr, &request, &response);
    CheckStatus(status, "RegisterNode (harness)");
    if (!status.ok()) return;  // another live agent holds the id (a fuzzed registration)
    node.epoch_seen = response.bundles_epoch();
    for (const v1::HeldBundle& bundle : response.release()) agent->Release(bundle);
  }

  // The periodic heartbeat of a base node's agent.
  void Beat(BaseNode& node) {
    v1::HeartbeatRequest request;
    request.set_node_id(node.spec.id.value());
    request.set_incarnation(Incarnation(node));
    std::shared_ptr<FuzzAgent> agent = AgentOf(node);
    for (const v1::HeldBundle& bundle : agent->Held()) *request.add_bundles() = bundle;
    request.set_bundles_epoch_seen(node.epoch_seen);
    v1::HeartbeatResponse response;
    grpc::Status status = head_->nodes().Heartbeat(nullptr, &request, &response);
    CheckStatus(status, "Heartbeat (harness)");
    if (!status.ok()) return;
    if (!response.known()) {
      // Restarted by a fuzzed registration, or declared dead: an agent registers again.
      ++node.incarnation;
      Register(node);
      return;
    }
    node.epoch_seen = response.bundles_epoch();
    for (const v1::HeldBundle& bundle : response.release()) agent->Release(bundle);
  }

  void Call(uint8_t op_byte, const uint8_t* data, size_t size);
  void CheckAfterCall();
  void CheckListings();

  template <typename Request>
  static bool Parse(const uint8_t* data, size_t size, Request* request) {
    return request->ParseFromArray(data, static_cast<int>(size));
  }

  FakeClock clock_;
  InMemoryStateStore store_;
  std::map<std::string, std::shared_ptr<FuzzAgent>> agents_;
  std::vector<BaseNode> nodes_;
  absl::Time last_beat_;
  std::unique_ptr<HeadService> head_;
};

void Harness::Run(const uint8_t* data, size_t size) {
  ForEachScriptedCall(data, size, kMaxCallsPerInput,
                      [&](uint8_t op, const uint8_t* bytes, size_t length) {
                        Call(op, bytes, length);
                        CheckAfterCall();

                        clock_.Advance(kStep);
                        if (clock_.Now() - last_beat_ >= kHeartbeatEvery) {
                          last_beat_ = clock_.Now();
                          for (BaseNode& node : nodes_) {
                            if (!node.silent) Beat(node);
                          }
                        }
                        head_->Tick();
                      });
  CheckAfterCall();
  CheckListings();
}

void Harness::Call(uint8_t op_byte, const uint8_t* data, size_t size) {
  const Op op = static_cast<Op>(op_byte % kOpCount);
  BaseNode& base = nodes_[(op_byte / kOpCount) % nodes_.size()];
  switch (op) {
    case kRegisterNode: {
      v1::RegisterNodeRequest request;
      v1::RegisterNodeResponse response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->nodes().RegisterNode(nullptr, &request, &response), "RegisterNode");
      }
      return;
    }
    case kHeartbeat:
    case kHeartbeatAsBaseNode: {
      v1::HeartbeatRequest request;
      v1::HeartbeatResponse response;
      if (!Parse(data, size, &request)) return;
      if (op == kHeartbeatAsBaseNode) {
        request.set_node_id(base.spec.id.value());
        request.set_incarnation(Incarnation(base));
      }
      CheckStatus(head_->nodes().Heartbeat(nullptr, &request, &response), "Heartbeat");
      return;
    }
    case kPickNode: {
      v1::PickNodeRequest request;
      v1::PickNodeResponse response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->nodes().PickNode(nullptr, &request, &response), "PickNode");
      }
      return;
    }
    case kCreatePlacementGroup: {
      v1::CreatePlacementGroupRequest request;
      v1::PlacementGroupInfo response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->reservations().CreatePlacementGroup(nullptr, &request, &response),
                    "CreatePlacementGroup");
      }
      return;
    }
    case kRemovePlacementGroup: {
      v1::RemovePlacementGroupRequest request;
      v1::RemovePlacementGroupResponse response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->reservations().RemovePlacementGroup(nullptr, &request, &response),
                    "RemovePlacementGroup");
      }
      return;
    }
    case kWaitPlacementGroup: {
      v1::WaitPlacementGroupRequest request;
      v1::PlacementGroupInfo response;
      if (!Parse(data, size, &request)) return;
      // The fake clock would never reach a later deadline: never wait (a negative timeout
      // stays, to be refused).
      if (request.timeout_ms() > 0) request.set_timeout_ms(0);
      CheckStatus(head_->reservations().WaitPlacementGroup(nullptr, &request, &response),
                  "WaitPlacementGroup");
      return;
    }
    case kListPlacementGroups: {
      v1::ListRequest request;
      v1::ListPlacementGroupsResponse response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->reservations().ListPlacementGroups(nullptr, &request, &response),
                    "ListPlacementGroups");
      }
      return;
    }
    case kReserveSlices: {
      v1::ReserveSlicesRequest request;
      v1::SliceGroupInfo response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->reservations().ReserveSlices(nullptr, &request, &response),
                    "ReserveSlices");
      }
      return;
    }
    case kReleaseSlices: {
      v1::ReleaseSlicesRequest request;
      v1::ReleaseSlicesResponse response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->reservations().ReleaseSlices(nullptr, &request, &response),
                    "ReleaseSlices");
      }
      return;
    }
    case kListSlices: {
      v1::ListRequest request;
      v1::ListSlicesResponse response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->reservations().ListSlices(nullptr, &request, &response), "ListSlices");
      }
      return;
    }
    case kWaitSliceGroup: {
      v1::WaitSliceGroupRequest request;
      v1::SliceGroupInfo response;
      if (!Parse(data, size, &request)) return;
      // As WaitPlacementGroup's.
      if (request.timeout_ms() > 0) request.set_timeout_ms(0);
      CheckStatus(head_->reservations().WaitSliceGroup(nullptr, &request, &response),
                  "WaitSliceGroup");
      return;
    }
    case kKeepDriverAlive: {
      v1::KeepDriverAliveRequest request;
      v1::KeepDriverAliveResponse response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->reservations().KeepDriverAlive(nullptr, &request, &response),
                    "KeepDriverAlive");
      }
      return;
    }
    case kDriverExited: {
      v1::DriverExitedRequest request;
      v1::DriverExitedResponse response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->reservations().DriverExited(nullptr, &request, &response),
                    "DriverExited");
      }
      return;
    }
    case kListNodes: {
      v1::ListRequest request;
      v1::ListNodesResponse response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->nodes().ListNodes(nullptr, &request, &response), "ListNodes");
      }
      return;
    }
    case kGetClusterStatus: {
      v1::ListRequest request;
      v1::ClusterStatus response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->admin().GetClusterStatus(nullptr, &request, &response),
                    "GetClusterStatus");
      }
      return;
    }
    case kRecordJob: {
      v1::RecordJobRequest request;
      v1::JobInfo response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->jobs().RecordJob(nullptr, &request, &response), "RecordJob");
      }
      return;
    }
    case kListJobs: {
      v1::ListRequest request;
      v1::ListJobsResponse response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->jobs().ListJobs(nullptr, &request, &response), "ListJobs");
      }
      return;
    }
    case kKvPut: {
      v1::KvPutRequest request;
      v1::KvPutResponse response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->kv().KvPut(nullptr, &request, &response), "KvPut");
      }
      return;
    }
    case kKvGet: {
      v1::KvGetRequest request;
      v1::KvGetResponse response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->kv().KvGet(nullptr, &request, &response), "KvGet");
      }
      return;
    }
    case kKvDelete: {
      v1::KvDeleteRequest request;
      v1::KvDeleteResponse response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->kv().KvDelete(nullptr, &request, &response), "KvDelete");
      }
      return;
    }
    case kKvList: {
      v1::KvListRequest request;
      v1::KvListResponse response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->kv().KvList(nullptr, &request, &response), "KvList");
      }
      return;
    }
    case kRegisterActor: {
      v1::RegisterActorRequest request;
      v1::ActorInfo response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->actors().RegisterActor(nullptr, &request, &response), "RegisterActor");
      }
      return;
    }
    case kActorDied: {
      v1::ActorDiedRequest request;
      v1::ActorInfo response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->actors().ActorDied(nullptr, &request, &response), "ActorDied");
      }
      return;
    }
    case kActorWorkerExited: {
      v1::ActorWorkerExitedRequest request;
      v1::ActorInfo response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->actors().ActorWorkerExited(nullptr, &request, &response),
                    "ActorWorkerExited");
      }
      return;
    }
    case kListEvents: {
      v1::ListEventsRequest request;
      v1::ListEventsResponse response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->jobs().ListEvents(nullptr, &request, &response), "ListEvents");
        Require(response.events_size() <= 1000, "ListEvents answers at most 1000 events");
      }
      return;
    }
    case kReportTaskEvents: {
      v1::ReportTaskEventsRequest request;
      v1::ReportTaskEventsResponse response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->jobs().ReportTaskEvents(nullptr, &request, &response),
                    "ReportTaskEvents");
      }
      return;
    }
    case kGetTaskEvents: {
      v1::GetTaskEventsRequest request;
      v1::GetTaskEventsResponse response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->jobs().GetTaskEvents(nullptr, &request, &response), "GetTaskEvents");
        Require(response.events_size() <= 10000, "GetTaskEvents answers at most 10000 runs");
      }
      return;
    }
    case kGetActor: {
      v1::GetActorRequest request;
      v1::ActorInfo response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->actors().GetActor(nullptr, &request, &response), "GetActor");
      }
      return;
    }
    case kListActors: {
      v1::ListRequest request;
      v1::ListActorsResponse response;
      if (Parse(data, size, &request)) {
        CheckStatus(head_->actors().ListActors(nullptr, &request, &response), "ListActors");
      }
      return;
    }
    case kSetAgentFaults: AgentOf(base)->SetFaults(size > 0 ? data[0] : 0); return;
    case kSetSilentNodes: {
      const uint8_t mask = size > 0 ? data[0] : 0;
      for (size_t i = 0; i < nodes_.size(); ++i) nodes_[i].silent = (mask >> i) & 1;
      return;
    }
    case kAdvanceClock: clock_.Advance(absl::Milliseconds(250) * (size > 0 ? data[0] : 0)); return;
    case kOpCount: break;
  }
}

// Cheap enough for every call: the nodes' accounting.
void Harness::CheckAfterCall() {
  v1::ListRequest all;
  v1::ListNodesResponse nodes;
  Require(head_->nodes().ListNodes(nullptr, &all, &nodes).ok(), "ListNodes fails");
  for (const v1::NodeInfo& node : nodes.nodes()) {
    if (node.state() != v1::NODE_STATE_ALIVE) continue;
    const std::string& id = node.node().node_id();
    auto total = wire::ResourcesFromProto(node.node().resources());
    auto available = wire::ResourcesFromProto(node.available());
    Require(total.ok(), absl::StrCat("node ", id, ": its registered resources no longer parse"));
    Require(available.ok(), absl::StrCat("node ", id, ": its available resources do not parse: ",
                                         available.status().ToString()));
    for (const auto& [resource, amount] : *available) {
      Require(amount <= total->Get(resource),
              absl::StrCat("node ", id, ": ", resource, " available ", amount.ToString(),
                           " is more than its total ", total->Get(resource).ToString()));
    }
  }
  v1::ClusterStatus status;
  Require(head_->admin().GetClusterStatus(nullptr, &all, &status).ok(), "GetClusterStatus fails");
  for (const v1::ResourceUsage& usage : status.usage()) {
    Require(usage.used_raw() >= 0 && usage.used_raw() <= usage.total_raw(),
            absl::StrCat("cluster status: ", usage.resource(), " used ", usage.used_raw(), " of ",
                         usage.total_raw(), " (raw)"));
  }
}

// Every paged listing pages through to its end, each page within gRPC's message limit.
void Harness::CheckListings() {
  auto walk = [](const char* name, auto list, auto response_type) {
    v1::ListRequest request;
    std::set<std::string> tokens;
    for (int pages = 0;; ++pages) {
      Require(pages < 100000, absl::StrCat(name, ": pages never end"));
      decltype(response_type) response;
      grpc::Status status = list(&request, &response);
      Require(status.ok(), absl::StrCat(name, " fails: ", status.error_message()));
      Require(response.ByteSizeLong() <= kMaxMessageBytes,
              absl::StrCat(name, ": a page of ", response.ByteSizeLong(), " bytes"));
      if (response.next_page_token().empty()) return;
      Require(tokens.insert(response.next_page_token()).second,
              absl::StrCat(name, ": page token ", response.next_page_token(), " repeats"));
      request.set_page_token(response.next_page_token());
    }
  };
  walk(
      "ListPlacementGroups",
      [&](const v1::ListRequest* r, v1::ListPlacementGroupsResponse* out) {
        return head_->reservations().ListPlacementGroups(nullptr, r, out);
      },
      v1::ListPlacementGroupsResponse());
  walk(
      "ListSlices",
      [&](const v1::ListRequest* r, v1::ListSlicesResponse* out) {
        return head_->reservations().ListSlices(nullptr, r, out);
      },
      v1::ListSlicesResponse());
  walk(
      "ListJobs",
      [&](const v1::ListRequest* r, v1::ListJobsResponse* out) {
        return head_->jobs().ListJobs(nullptr, r, out);
      },
      v1::ListJobsResponse());
  v1::KvListRequest kv;
  v1::KvListResponse keys;
  Require(head_->kv().KvList(nullptr, &kv, &keys).ok(), "KvList fails");
  walk(
      "ListActors",
      [&](const v1::ListRequest* r, v1::ListActorsResponse* out) {
        return head_->actors().ListActors(nullptr, r, out);
      },
      v1::ListActorsResponse());
  // A name is held by one live actor per namespace, and GetActor finds that one.
  v1::ListRequest request;
  std::set<std::pair<std::string, std::string>> names;
  for (int pages = 0; pages < 100000; ++pages) {
    v1::ListActorsResponse response;
    Require(head_->actors().ListActors(nullptr, &request, &response).ok(), "ListActors fails");
    for (const v1::ActorInfo& actor : response.actors()) {
      if (actor.state() == v1::ACTOR_STATE_DEAD) continue;
      Require(names.emplace(actor.namespace_(), actor.name()).second,
              absl::StrCat("two live actors are named ", actor.name()));
      v1::GetActorRequest get;
      get.set_name(actor.name());
      get.set_namespace_(actor.namespace_());
      v1::ActorInfo found;
      Require(head_->actors().GetActor(nullptr, &get, &found).ok() &&
                  found.actor_id() == actor.actor_id(),
              absl::StrCat("GetActor does not find live actor ", actor.actor_id()));
    }
    if (response.next_page_token().empty()) break;
    request.set_page_token(response.next_page_token());
  }
}

}  // namespace
}  // namespace tessera

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Fuzzed strings are often not UTF-8; protobuf's log line for each would drown the output.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessera::Harness harness;
  harness.Run(data, size);
  return 0;
}
