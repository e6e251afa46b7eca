// libFuzzer target: the node agent's gRPC handlers (tessera.v1.NodeAgent) over any request bytes.
//
// Each input is a short script run on a fresh AgentState and NodeAgentService for a simulated
// 8-GPU NVSwitch host (the description is below; no head, so nothing spills back). It is a
// sequence of calls, each
//   [op byte] [length: 2 bytes, little-endian] [length bytes]
// (a length past the end takes the rest, so a one-call input is "op, length, request"). The op
// byte modulo kOpCount picks an RPC or a harness step; the bytes are parsed as its request
// (ParseFromArray; a call that does not parse is skipped) and the handler is called directly
// with no ServerContext (the handlers take none). The op byte's quotient, when not 0, points the
// request at what exists: a worker id of the agent's, or one of three placement group names, so
// calls meet each other's state.
//
// RPCs: RequestLease, KillWorker, ReturnLease, ListWorkers, PrepareBundles, CommitBundles,
// CancelBundles, OfferObject and PullObject (no object store: refused at once),
// PrepareWorkingDir (under a temporary folder emptied after every input), WriteWorkerStdin. Left
// out: WatchWorker and ReadLogs (streams: they need a live ServerWriter), FindFreePort (binds a
// socket and reads no input), Shutdown.
//
// No process is ever started: the ProcessSupervisor is shut down before the first input, so a
// granted lease runs the whole of StartWorker (visible devices, working folder, isolation
// environment, stdin FIFO) and then fails to start, which releases the lease. Live workers come
// from a harness step that takes a lease from the AgentState and records its worker as started
// (a fake pid that names no process; kills go through the supervisor by id and find nothing);
// other steps end such a worker, and release a bundle as the head's reconciliation does.
//
// Checked after every call: no crash or sanitizer report; a failed call carries a message; no
// lease is granted (its worker cannot start); a start is reached only with a working folder that
// this input prepared; and the agent's accounting: available never below 0 or above the total,
// total - available is exactly what the leases outside bundles and the bundles hold, no device
// instance is given out past one whole device, leases inside a bundle fit in it and name a
// committed bundle that is held, and every lease's worker is known and not exited. A broken
// invariant prints one line and aborts.
#include <google/protobuf/stubs/logging.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/fuzz_script.h"
#include "hardware/environment.h"
#include "node/agent_options.h"
#include "node/agent_proto.h"
#include "node/agent_state.h"
#include "node/node_agent_service.h"
#include "node/node_hardware_loader.h"
#include "node/worker_stdin.h"
#include "process/process_supervisor.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxCallsPerInput = 64;
// Never a process id (above any pid_max): the fake pid of a worker the harness "started".
constexpr int kFakePid = 1'000'000'000;
// How StartWorker's failure reads when it got as far as starting the process.
constexpr std::string_view kReachedStart = "cannot start worker: the process supervisor";

// examples/hardware/h100-sxm-8.yaml, kept here so the binary runs from anywhere.
constexpr char kHardware[] = R"(host:
  sockets: 2
  cores_per_socket: 56
  threads_per_core: 2
  numa_nodes: 2
  memory: 2TiB
  cpu_model: Intel(R) Xeon(R) Platinum 8480+
nics:
  - {name: ibp0, numa_node: 0, speed: 400Gbps}
  - {name: ibp1, numa_node: 0, speed: 400Gbps}
  - {name: ibp2, numa_node: 0, speed: 400Gbps}
  - {name: ibp3, numa_node: 0, speed: 400Gbps}
  - {name: ibp4, numa_node: 1, speed: 400Gbps}
  - {name: ibp5, numa_node: 1, speed: 400Gbps}
  - {name: ibp6, numa_node: 1, speed: 400Gbps}
  - {name: ibp7, numa_node: 1, speed: 400Gbps}
  - {name: eth0, numa_node: 0, speed: 100Gbps}
accelerators:
  - family: nvidia
    type: H100
    model: NVIDIA H100 80GB HBM3
    count: 8
    memory: 80GiB
    numa_nodes: [0, 0, 0, 0, 1, 1, 1, 1]
    nearest_nics: [ibp0, ibp1, ibp2, ibp3, ibp4, ibp5, ibp6, ibp7]
    interconnect: {kind: nvswitch, lanes: 18, bandwidth: 450GB/s}
labels:
  team: ml-infra
)";

// The temporary folder of this process, once made: a failed check removes it before aborting.
fs::path* temporary_folder = nullptr;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "node_agent_service_fuzzer: invariant broken: %s\n", what.c_str());
  if (temporary_folder != nullptr) {
    std::error_code ec;
    fs::remove_all(*temporary_folder, ec);
  }
  std::abort();
}

void Require(bool holds, const std::string& what) {
  if (!holds) Fail(what);
}

void CheckStatus(const grpc::Status& status, const char* rpc) {
  if (!status.ok()) {
    Require(!status.error_message().empty(), absl::StrCat(rpc, " failed without a message"));
  }
}

// What every input shares: the node's hardware, a supervisor that starts nothing, and the
// temporary folder (removed when the process exits normally).
struct World {
  World() {
    base = fs::temp_directory_path() / absl::StrCat("tessera-agent-fuzz-", ::getpid());
    std::error_code ec;
    fs::remove_all(base, ec);
    fs::create_directories(base / "workers");
    temporary_folder = &base;
    {
      std::ofstream out(base / "hardware.yaml");
      out << kHardware;
    }
    AgentOptions options;
    options.node_id = "fuzz-node";
    options.hardware_file = (base / "hardware.yaml").string();
    options.environment = Environment();
    auto loaded = LoadNodeHardware(options);
    Require(loaded.ok(),
            absl::StrCat("the harness's hardware loads: ", loaded.status().ToString()));
    node = *std::move(loaded);
    auto created = ProcessSupervisor::Create();
    Require(created.ok(), absl::StrCat("a process supervisor: ", created.status().ToString()));
    supervisor = *std::move(created);
    supervisor->Shutdown(absl::ZeroDuration());  // from now on every Start is refused
  }
  ~World() {
    temporary_folder = nullptr;
    supervisor.reset();
    std::error_code ec;
    fs::remove_all(base, ec);
  }

  fs::path base;
  LoadedNode node;
  std::unique_ptr<ProcessSupervisor> supervisor;
};

World& TheWorld() {
  static World* world = new World();  // destroyed by the atexit hook below
  return *world;
}

void RemoveWorld() { delete &TheWorld(); }

class Harness {
 public:
  explicit Harness(World& world) : world_(world), pipes_((world.base / "workers").string()) {
    auto state = AgentState::Create(world.node.id, world.node.hardware, AgentStateOptions{"fz"});
    Require(state.ok(), absl::StrCat("the agent state: ", state.status().ToString()));
    state_ = *std::move(state);
    AgentServiceOptions options;
    options.workers_dir = (world.base / "workers").string();
    options.slice_env = world.node.slice_env;
    options.kill_grace = absl::ZeroDuration();
    options.worker_bind = "127.0.0.1";
    options.working_dirs_root = (world.base / "jobs").string();
    options.stdin_pipes = &pipes_;
    service_ = std::make_unique<NodeAgentService>(std::move(options), state_.get(),
                                                  world.supervisor.get(), nullptr, nullptr);
  }
  ~Harness() {
    service_.reset();
    std::error_code ec;
    fs::remove_all(world_.base / "jobs", ec);
  }

  void Run(const uint8_t* data, size_t size) {
    ForEachScriptedCall(data, size, kMaxCallsPerInput,
                        [&](uint8_t op, const uint8_t* bytes, size_t length) {
                          Call(op, bytes, length);
                          CheckAccounting();
                        });
  }

 private:
  enum Op : uint8_t {
    kRequestLease,
    kKillWorker,
    kListWorkers,
    kPrepareBundles,
    kCommitBundles,
    kCancelBundles,
    kOfferObject,
    kPullObject,
    kPrepareWorkingDir,
    kWriteWorkerStdin,
    kReturnLease,
    // Harness steps.
    kStartLeaseWorker,    // a LeaseRequest taken from the state, its worker recorded as started
    kWorkerExits,         // the first byte picks a live worker; it exits
    kHeadReleasesBundle,  // a HeldBundle the head does not hold, as a heartbeat answer says
    kOpCount,
  };

  template <typename Request>
  static bool Parse(const uint8_t* data, size_t size, Request* request) {
    return request->ParseFromArray(data, static_cast<int>(size));
  }

  // hint 0: as sent; else one of the agent's workers (any state).
  void PointAtWorker(int hint, std::string* worker_id) const {
    if (hint == 0) return;
    std::vector<WorkerRecord> workers = state_->Workers();
    if (!workers.empty()) *worker_id = workers[(hint - 1) % workers.size()].id.value();
  }
  // Odd hints: one of three group names, so prepares, commits, cancels and leases meet.
  static void PointAtGroup(int hint, std::string* group) {
    if (hint % 2 == 1) *group = absl::StrCat("pg-", (hint / 2) % 3);
  }

  std::vector<WorkerRecord> LiveWorkers() const {
    std::vector<WorkerRecord> live;
    for (WorkerRecord& worker : state_->Workers()) {
      if (worker.state != WorkerState::kExited) live.push_back(std::move(worker));
    }
    return live;
  }

  void Kill(const std::vector<WorkerId>& workers, const std::string& why) {
    for (const WorkerId& id : workers) state_->NoteKill(id, why);
    service_->KillNow(workers);
  }

  void RequestLease(int hint, const uint8_t* data, size_t size);
  void StartLeaseWorker(int hint, const uint8_t* data, size_t size);
  void Call(uint8_t op_byte, const uint8_t* data, size_t size);
  void CheckAccounting() const;

  World& world_;
  WorkerStdinPipes pipes_;
  std::unique_ptr<AgentState> state_;
  std::unique_ptr<NodeAgentService> service_;
  std::set<std::string> prepared_jobs_;  // working folders PrepareWorkingDir unpacked
  std::set<std::string> request_ids_;    // RequestLease ids seen (a repeat is answered from cache)
};

void Harness::RequestLease(int hint, const uint8_t* data, size_t size) {
  v1::LeaseRequest request;
  v1::LeaseReply reply;
  if (!Parse(data, size, &request)) return;
  if (!request.request().placement_group().empty()) {
    PointAtGroup(hint, request.mutable_request()->mutable_placement_group());
  }
  const bool first_answer =
      request.request_id().empty() || request_ids_.insert(request.request_id()).second;
  grpc::Status status = service_->RequestLease(nullptr, &request, &reply);
  CheckStatus(status, "RequestLease");
  Require(!reply.has_granted(), "RequestLease granted a lease whose worker cannot start");
  if (!first_answer || !status.error_message().starts_with(kReachedStart)) return;
  // It got as far as starting the process: every check of the worker's spec passed.
  const std::string& job = request.worker().working_dir_job();
  Require(job.empty() || prepared_jobs_.contains(job),
          absl::StrCat("a worker would start in working folder \"", job,
                       "\", which PrepareWorkingDir never made"));
}

void Harness::StartLeaseWorker(int hint, const uint8_t* data, size_t size) {
  v1::LeaseRequest request;
  if (!Parse(data, size, &request)) return;
  if (!request.request().placement_group().empty()) {
    PointAtGroup(hint, request.mutable_request()->mutable_placement_group());
  }
  auto ask = LeaseAskFromProto(request);
  if (!ask.ok()) return;
  auto decision = state_->TryLease(*ask);
  if (!decision.ok() || !decision->lease.has_value()) return;
  const LeaseRecord& lease = *decision->lease;
  if (request.worker().stdin_pipe()) {
    auto pipe = pipes_.Open(lease.worker);
    Require(pipe.ok(),
            absl::StrCat("a stdin FIFO in the workers folder: ", pipe.status().ToString()));
  }
  const std::string logs = (world_.base / "workers" / lease.worker.value()).string();
  absl::Status started = state_->WorkerStarted(
      lease.worker, kFakePid, {request.worker().argv().begin(), request.worker().argv().end()}, {},
      logs + ".out", logs + ".err");
  Require(started.ok(), absl::StrCat("WorkerStarted after TryLease: ", started.ToString()));
}

void Harness::Call(uint8_t op_byte, const uint8_t* data, size_t size) {
  const Op op = static_cast<Op>(op_byte % kOpCount);
  const int hint = op_byte / kOpCount;
  switch (op) {
    case kRequestLease: RequestLease(hint, data, size); return;
    case kKillWorker: {
      v1::KillWorkerRequest request;
      v1::KillWorkerResponse response;
      if (!Parse(data, size, &request)) return;
      PointAtWorker(hint, request.mutable_worker_id());
      CheckStatus(service_->KillWorker(nullptr, &request, &response), "KillWorker");
      return;
    }
    case kReturnLease: {
      v1::ReturnLeaseRequest request;
      v1::ReturnLeaseResponse response;
      if (!Parse(data, size, &request)) return;
      PointAtWorker(hint, request.mutable_worker_id());
      CheckStatus(service_->ReturnLease(nullptr, &request, &response), "ReturnLease");
      auto worker = state_->FindWorker(WorkerId(request.worker_id()));
      if (worker.has_value() && worker->lease_returned) {
        Require(!state_->HoldsLease(worker->lease), "a returned lease is still held");
      }
      return;
    }
    case kListWorkers: {
      v1::ListWorkersRequest request;
      v1::ListWorkersResponse response;
      if (!Parse(data, size, &request)) return;
      CheckStatus(service_->ListWorkers(nullptr, &request, &response), "ListWorkers");
      return;
    }
    case kPrepareBundles: {
      v1::PrepareBundlesRequest request;
      v1::PrepareBundlesResponse response;
      if (!Parse(data, size, &request)) return;
      PointAtGroup(hint, request.mutable_placement_group());
      CheckStatus(service_->PrepareBundles(nullptr, &request, &response), "PrepareBundles");
      return;
    }
    case kCommitBundles: {
      v1::CommitBundlesRequest request;
      v1::CommitBundlesResponse response;
      if (!Parse(data, size, &request)) return;
      PointAtGroup(hint, request.mutable_placement_group());
      CheckStatus(service_->CommitBundles(nullptr, &request, &response), "CommitBundles");
      return;
    }
    case kCancelBundles: {
      v1::CancelBundlesRequest request;
      v1::CancelBundlesResponse response;
      if (!Parse(data, size, &request)) return;
      PointAtGroup(hint, request.mutable_placement_group());
      CheckStatus(service_->CancelBundles(nullptr, &request, &response), "CancelBundles");
      return;
    }
    case kOfferObject: {
      v1::OfferObjectRequest request;
      v1::OfferObjectResponse response;
      if (!Parse(data, size, &request)) return;
      grpc::Status status = service_->OfferObject(nullptr, &request, &response);
      Require(status.error_code() == grpc::StatusCode::UNAVAILABLE,
              "OfferObject without an object store is not refused as UNAVAILABLE");
      return;
    }
    case kPullObject: {
      v1::PullObjectRequest request;
      v1::PullObjectResponse response;
      if (!Parse(data, size, &request)) return;
      grpc::Status status = service_->PullObject(nullptr, &request, &response);
      Require(status.error_code() == grpc::StatusCode::UNAVAILABLE,
              "PullObject without an object store is not refused as UNAVAILABLE");
      return;
    }
    case kPrepareWorkingDir: {
      v1::PrepareWorkingDirRequest request;
      v1::PrepareWorkingDirResponse response;
      if (!Parse(data, size, &request)) return;
      grpc::Status status = service_->PrepareWorkingDir(nullptr, &request, &response);
      CheckStatus(status, "PrepareWorkingDir");
      if (status.ok()) {
        const fs::path root = world_.base / "jobs";
        Require(
            fs::path(response.path()).parent_path() == root,
            absl::StrCat("PrepareWorkingDir made ", response.path(), ", outside ", root.string()));
        prepared_jobs_.insert(request.job_id());
      }
      return;
    }
    case kWriteWorkerStdin: {
      v1::WriteWorkerStdinRequest request;
      v1::WriteWorkerStdinResponse response;
      if (!Parse(data, size, &request)) return;
      PointAtWorker(hint, request.mutable_worker_id());
      grpc::Status status = service_->WriteWorkerStdin(nullptr, &request, &response);
      CheckStatus(status, "WriteWorkerStdin");
      Require(!status.ok() || response.written() <= request.data().size(),
              "WriteWorkerStdin wrote more than it was given");
      return;
    }
    case kStartLeaseWorker: StartLeaseWorker(hint, data, size); return;
    case kWorkerExits: {
      std::vector<WorkerRecord> live = LiveWorkers();
      if (live.empty()) return;
      const WorkerRecord& worker = live[(size > 0 ? data[0] : 0) % live.size()];
      pipes_.Forget(worker.id);
      WorkerExitInfo exit;
      exit.exit_code = size > 1 ? data[1] : 0;
      exit.reason = absl::StrCat("exited with code ", exit.exit_code);
      Require(state_->WorkerExited(worker.id, exit).ok(), "a live worker's exit is refused");
      return;
    }
    case kHeadReleasesBundle: {
      v1::HeldBundle bundle;
      if (!Parse(data, size, &bundle)) return;
      PointAtGroup(hint, bundle.mutable_placement_group());
      auto killed = state_->ReleaseBundleIfGeneration(
          BundleKey{bundle.placement_group(), bundle.bundle_index()}, bundle.generation());
      if (killed.ok()) Kill(*killed, "after the head released its bundle");
      return;
    }
    case kOpCount: break;
  }
}

void Harness::CheckAccounting() const {
  const int64_t kWhole = Quantity::FromInt(1).raw();
  const ResourceSet& total = state_->spec().resources;
  const ResourceSet available = state_->Available();
  for (const auto& [resource, amount] : available) {
    Require(total.Get(resource).raw() > 0 || amount.raw() == 0,
            absl::StrCat(resource, " is available but the node has none"));
  }
  // What the node's view gave out: leases outside bundles, and bundles.
  std::map<std::string, int64_t> held;
  std::map<std::pair<std::string, int>, int64_t> node_instances;  // (resource, instance) -> raw
  auto add = [&](const Allocation& allocation, std::map<std::string, int64_t>& sums,
                 std::map<std::pair<std::string, int>, int64_t>& instances) {
    for (const auto& [resource, amount] : allocation.resources) sums[resource] += amount.raw();
    for (const DeviceGrant& grant : allocation.devices) {
      for (size_t i = 0; i < grant.instances.size(); ++i) {
        const int64_t amount = i < grant.amounts.size() ? grant.amounts[i].raw() : kWhole;
        instances[{grant.resource, grant.instances[i]}] += amount;
      }
    }
  };
  std::map<BundleKey, const BundleRecord*> bundles;
  const std::vector<BundleRecord> bundle_records = state_->Bundles();
  for (const BundleRecord& bundle : bundle_records) {
    bundles[bundle.key] = &bundle;
    add(bundle.allocation, held, node_instances);
  }
  std::map<BundleKey, std::map<std::string, int64_t>> in_bundle;
  std::map<BundleKey, std::map<std::pair<std::string, int>, int64_t>> in_bundle_instances;
  for (const LeaseRecord& lease : state_->Leases()) {
    auto worker = state_->FindWorker(lease.worker);
    Require(worker.has_value() && worker->state != WorkerState::kExited,
            absl::StrCat("lease ", lease.id.value(), " is held but its worker ",
                         lease.worker.value(), worker.has_value() ? " exited" : " is unknown"));
    if (!lease.bundle.has_value()) {
      add(lease.allocation, held, node_instances);
      continue;
    }
    auto bundle = bundles.find(*lease.bundle);
    Require(bundle != bundles.end() && bundle->second->committed,
            absl::StrCat("lease ", lease.id.value(), " is served from bundle ",
                         BundleKeyName(*lease.bundle), ", which is not held and committed"));
    add(lease.allocation, in_bundle[*lease.bundle], in_bundle_instances[*lease.bundle]);
  }
  for (const auto& [resource, amount] : total) {
    const int64_t free = available.Get(resource).raw();
    Require(free >= 0 && free <= amount.raw(),
            absl::StrCat(resource, ": available ", available.Get(resource).ToString(),
                         " is outside 0..", amount.ToString()));
    Require(amount.raw() - free == held[resource],
            absl::StrCat(resource, ": ", Quantity::FromRaw(amount.raw() - free).ToString(),
                         " is in use but leases and bundles hold ",
                         Quantity::FromRaw(held[resource]).ToString()));
  }
  for (const auto& [resource, sum] : held) {
    Require(sum <= total.Get(resource).raw(),
            absl::StrCat(resource, ": leases and bundles hold more than the node has"));
  }
  for (const auto& [instance, amount] : node_instances) {
    Require(amount <= kWhole,
            absl::StrCat(instance.first, " instance ", instance.second, " is given out ",
                         Quantity::FromRaw(amount).ToString(), " times"));
  }
  for (const auto& [key, sums] : in_bundle) {
    const BundleRecord& bundle = *bundles.at(key);
    for (const auto& [resource, sum] : sums) {
      Require(sum <= bundle.allocation.resources.Get(resource).raw(),
              absl::StrCat("leases in bundle ", BundleKeyName(key), " hold more ", resource,
                           " than the bundle"));
    }
    std::map<std::pair<std::string, int>, int64_t> reserved;
    std::map<std::string, int64_t> unused;
    add(bundle.allocation, unused, reserved);
    for (const auto& [instance, amount] : in_bundle_instances[key]) {
      Require(amount <= reserved[instance],
              absl::StrCat("leases in bundle ", BundleKeyName(key), " use ", instance.first,
                           " instance ", instance.second, " beyond what the bundle reserved"));
    }
  }
  v1::ListWorkersRequest request;
  v1::ListWorkersResponse workers;
  Require(service_->ListWorkers(nullptr, &request, &workers).ok(), "ListWorkers fails");
  Require(workers.node_id() == state_->node_id().value(), "ListWorkers names another node");
}

}  // namespace
}  // namespace tessera

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Fuzzed strings are often not UTF-8; protobuf's log line for each would drown the output.
  google::protobuf::SetLogHandler(nullptr);
  tessera::TheWorld();
  std::atexit(tessera::RemoveWorld);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessera::Harness harness(tessera::TheWorld());
  harness.Run(data, size);
  return 0;
}
