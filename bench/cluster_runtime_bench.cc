// Cluster runtime figures on loopback (issue 4 item 8):
//
// - Placement groups through the head of a 4-node cluster (simulated H100 hosts with 8 NVSwitch
//   GPUs, from one generated cluster file). By default a real HeadServer and 4 real
//   NodeAgentServer instances run in this process, each on its own loopback gRPC server; with
//   --tessera=PATH the cluster is real processes instead, started by `PATH up` and stopped by
//   `PATH down`. One iteration is the client's CreatePlacementGroup then RemovePlacementGroup
//   over gRPC with the token; the head reserves the bundles by two-phase commit on the agents
//   (PrepareBundles, CommitBundles) and gives them back on removal (CancelBundles), all over gRPC.
// - Leases on that cluster's node n-0: the full RequestLease round trip that grants a lease and
//   starts its worker (/bin/true); the same RPC answered without a process (a lease the node can
//   never fit, at the spillback hop limit: decided, refused, explained); and the agent's decision
//   alone, in process (AgentState::TryLease then release), no RPC and no process. The agent
//   offers no RPC that grants a lease without starting its worker. Grant-and-start runs twice in
//   process: on n-0, whose workers start from prestarted launchers (tessera-launcher, found
//   beside this binary's build at ../bin, or --launcher=PATH), and on n-1, which forks every
//   worker from the agent (prestarted_workers = 0), so both ways compare in one run. With
//   --tessera=PATH the agents use their default (the launcher beside PATH).
// - Anchors measured in the same run, to read the figures against this machine: a unary gRPC
//   round trip on loopback to a handler that does nothing (a bare grpc::Server over plaintext,
//   and an rpc::RpcServer over the mutual TLS from the token that every Tessera connection
//   has, through rpc::MakeChannel); fork+exec+wait of
//   /bin/true from this process (as the agent forks workers), posix_spawn+wait of the same, and
//   ProcessSupervisor::Start of it until its exit is reported.
//
// Every server and process is stopped before main returns (`tessera down` in --tessera mode);
// workers are /bin/true, which exits at once.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "benchmark/benchmark.h"
#include "grpcpp/grpcpp.h"
#include "head/head_server.h"
#include "node/agent_server.h"
#include "node/agent_state.h"
#include "node/node_hardware_loader.h"
#include "process/process_supervisor.h"
#include "rpc/auth.h"
#include "rpc/channel.h"
#include "rpc/server.h"
#include "rpc/state_names.h"
#include "rpc/token.h"
#include "tessera/v1/head.grpc.pb.h"
#include "tessera/v1/node_agent.grpc.pb.h"
#include "wire/proto_convert.h"

namespace tessera {
namespace {

constexpr absl::Duration kCallTimeout = absl::Seconds(30);
constexpr int kAgents = 4;

std::string HardwareFile() {
  return std::string(TESSERA_SOURCE_DIR) + "/examples/hardware/h100-sxm-8.yaml";
}

std::string MakeTempDir(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) return "";
  return pattern;
}

void RemoveDir(const std::string& dir) {
  std::error_code ec;
  if (!dir.empty()) std::filesystem::remove_all(dir, ec);
}

// The fixtures live for the whole run (benchmarks with several threads share them) and are torn
// down by TearDownAll() before main returns. Thread-safe: created under one mutex.
absl::Mutex fixtures_mu;

// --- anchors ---

// A HeadKv service whose KvGet does nothing: the cheapest possible unary call.
class EmptyKvService final : public v1::HeadKv::Service {
 public:
  grpc::Status KvGet(grpc::ServerContext*, const v1::KvGetRequest*, v1::KvGetResponse*) override {
    return grpc::Status::OK;
  }
};

struct AnchorServers {
  std::string token = "bench-token";
  EmptyKvService bare_service;
  EmptyKvService tls_service;
  std::unique_ptr<grpc::Server> bare;
  std::unique_ptr<rpc::RpcServer> with_tls;
  std::unique_ptr<v1::HeadKv::Stub> bare_stub;
  std::unique_ptr<v1::HeadKv::Stub> tls_stub;
};
AnchorServers* anchors = nullptr;

AnchorServers* Anchors() {
  absl::MutexLock lock(&fixtures_mu);
  if (anchors != nullptr) return anchors;
  auto a = std::make_unique<AnchorServers>();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&a->bare_service);
  a->bare = builder.BuildAndStart();
  if (a->bare == nullptr || port == 0) return nullptr;
  a->bare_stub = v1::HeadKv::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  rpc::ServerOptions options;
  options.token = a->token;
  auto server = rpc::RpcServer::Start(options, {&a->tls_service});
  if (!server.ok()) return nullptr;
  a->with_tls = std::move(*server);
  a->tls_stub = v1::HeadKv::NewStub(rpc::MakeChannel(a->with_tls->address(), a->token));
  anchors = a.release();
  return anchors;
}

void BM_AnchorGrpcUnaryBare(benchmark::State& state) {
  AnchorServers* a = Anchors();
  if (a == nullptr) return state.SkipWithError("anchor servers did not start");
  v1::KvGetRequest request;
  v1::KvGetResponse response;
  int64_t errors = 0;
  for (auto _ : state) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (!a->bare_stub->KvGet(&context, request, &response).ok()) ++errors;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["errors"] = static_cast<double>(errors);
}
BENCHMARK(BM_AnchorGrpcUnaryBare)->Threads(1)->Threads(4)->UseRealTime();

void BM_AnchorGrpcUnaryMutualTls(benchmark::State& state) {
  AnchorServers* a = Anchors();
  if (a == nullptr) return state.SkipWithError("anchor servers did not start");
  v1::KvGetRequest request;
  v1::KvGetResponse response;
  int64_t errors = 0;
  for (auto _ : state) {
    auto context = rpc::MakeClientContext(kCallTimeout);
    if (!a->tls_stub->KvGet(context.get(), request, &response).ok()) ++errors;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["errors"] = static_cast<double>(errors);
}
BENCHMARK(BM_AnchorGrpcUnaryMutualTls)->Threads(1)->Threads(4)->UseRealTime();

// fork + execv("/bin/true") + waitpid, from this (multi-threaded, gRPC-linked) process, as the
// agent forks its workers.
void BM_AnchorForkExecTrue(benchmark::State& state) {
  char arg0[] = "/bin/true";
  char* argv[] = {arg0, nullptr};
  int64_t errors = 0;
  for (auto _ : state) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::execv(arg0, argv);
      ::_exit(127);
    }
    int status = 0;
    if (pid < 0 || ::waitpid(pid, &status, 0) != pid || status != 0) ++errors;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["errors"] = static_cast<double>(errors);
}
BENCHMARK(BM_AnchorForkExecTrue)->UseRealTime();

// posix_spawn (glibc: clone with CLONE_VM|CLONE_VFORK, no copy of this process's page tables) of
// /bin/true + waitpid.
void BM_AnchorPosixSpawnTrue(benchmark::State& state) {
  char arg0[] = "/bin/true";
  char* argv[] = {arg0, nullptr};
  int64_t errors = 0;
  for (auto _ : state) {
    pid_t pid = 0;
    int status = 0;
    if (::posix_spawn(&pid, arg0, nullptr, nullptr, argv, environ) != 0 ||
        ::waitpid(pid, &status, 0) != pid || status != 0) {
      ++errors;
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["errors"] = static_cast<double>(errors);
}
BENCHMARK(BM_AnchorPosixSpawnTrue)->UseRealTime();

// ProcessSupervisor::Start of /bin/true (log files, own session, CLOEXEC exec check, pidfd) and
// its exit reported by the reaper thread: the agent's process cost without the RPC or the lease.
void BM_AnchorSupervisorStartTrue(benchmark::State& state) {
  auto supervisor = ProcessSupervisor::Create();
  const std::string dir = MakeTempDir("tessera-bench-supervisor");
  if (!supervisor.ok() || dir.empty()) return state.SkipWithError("no supervisor");
  ChildSpec spec;
  spec.argv = {"/bin/true"};
  spec.stdout_path = dir + "/out";
  spec.stderr_path = dir + "/err";
  int64_t n = 0, errors = 0;
  for (auto _ : state) {
    auto done = std::make_shared<absl::Notification>();
    auto pid = (*supervisor)
                   ->Start(ChildId(absl::StrCat("c", n++)), spec,
                           [done](const ChildId&, const ExitStatus&) { done->Notify(); });
    if (!pid.ok()) {
      ++errors;
      continue;
    }
    done->WaitForNotification();
  }
  (*supervisor)->Shutdown(absl::Seconds(2));
  RemoveDir(dir);
  state.SetItemsProcessed(state.iterations());
  state.counters["errors"] = static_cast<double>(errors);
}
BENCHMARK(BM_AnchorSupervisorStartTrue)->UseRealTime();

// --- the 4-node cluster: in this process, or real `tessera` processes ---

// Set by --tessera=PATH: the cluster is brought up with `PATH up` (a head process and 4 node agent
// processes) instead of in this process, and brought down with `PATH down`.
std::string tessera_binary;
// --launcher=PATH: the launcher in-process agents start workers from; "": ../bin beside this
// binary's folder.
std::string launcher_binary;

// Runs argv to completion with its output in `log`; the exit status as an error, with the log.
absl::Status RunCommand(const std::vector<std::string>& args, const std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> argv;
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int error = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) return absl::InternalError(absl::StrCat("cannot run ", args[0]));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  return absl::InternalError(absl::StrCat(absl::StrJoin(args, " "), " failed: ", text.str()));
}

std::string ReadFileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(text.str()));
}

// 4 simulated H100 hosts with 8 NVSwitch GPUs each: node ids n-0 .. n-3.
constexpr char kClusterFile[] = R"(node_groups:
  - name: n
    count: 4
    hardware:
      host: {sockets: 2, cores_per_socket: 56, threads_per_core: 2, numa_nodes: 2, memory: 2TiB}
      accelerators:
        - {family: nvidia, type: H100, count: 8, memory: 80GiB, interconnect: nvswitch,
           numa_nodes: [0, 0, 0, 0, 1, 1, 1, 1]}
)";

// Resident memory of a process in MiB (0 when it cannot be read).
double RssMiB(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/statm");
  int64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) return 0;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) /
         (1024.0 * 1024.0);
}

// The cluster's temp folder, for the interrupt thread (--tessera mode): it brings the cluster
// down when the run is interrupted.
absl::Mutex interrupt_mu;
std::string interrupt_work_dir ABSL_GUARDED_BY(interrupt_mu);

// --tessera mode: SIGINT, SIGTERM and SIGHUP are blocked in every thread and waited for here, so
// an interrupted run still runs `tessera down` (the cluster's processes are not our children and
// would outlive us). Runs for the life of the process.
void InterruptThread(sigset_t signals) {
  int signal = 0;
  while (sigwait(&signals, &signal) != 0) {
  }
  std::string work_dir;
  {
    absl::MutexLock lock(&interrupt_mu);
    work_dir = interrupt_work_dir;
  }
  if (!work_dir.empty()) {
    (void)RunCommand({tessera_binary, "down", "--state-dir", work_dir + "/state"},
                     work_dir + "/down.log");
    RemoveDir(work_dir);
  }
  ::_exit(128 + signal);
}

struct LocalCluster {
  std::string work_dir;  // temp folder: the cluster file, logs, the state folder
  std::string state_dir;
  std::string cluster_file;
  std::string token;
  // In-process mode only.
  std::unique_ptr<HeadServer> head;
  std::vector<std::unique_ptr<NodeAgentServer>> agents;
  // Both modes.
  // The head's services the benchmarks call, on one channel.
  std::unique_ptr<v1::HeadNodes::Stub> head_nodes;
  std::unique_ptr<v1::HeadReservations::Stub> head_reservations;
  std::unique_ptr<v1::NodeAgent::Stub> agent_stub;  // the agent of n-0
  std::atomic<int64_t> next_id{0};

  // The process that runs the head, and the one that runs n-0's agent.
  std::string HeadPid() const {
    return tessera_binary.empty() ? "self" : ReadFileText(state_dir + "/head.pid");
  }
  std::string AgentPid() const {
    return tessera_binary.empty() ? "self" : ReadFileText(state_dir + "/nodes/n-0/agent.pid");
  }

  // Stops every server and process, removes the folders. Idempotent.
  void Stop() {
    {
      absl::MutexLock lock(&interrupt_mu);
      interrupt_work_dir.clear();
    }
    agents.clear();
    head.reset();
    if (!tessera_binary.empty() && !state_dir.empty() && std::filesystem::exists(state_dir)) {
      absl::Status down =
          RunCommand({tessera_binary, "down", "--state-dir", state_dir}, work_dir + "/down.log");
      if (!down.ok()) std::cerr << down << "\n";
    }
    RemoveDir(work_dir);
    work_dir.clear();
  }
};
LocalCluster* cluster = nullptr;

// Starts the head and 4 agents in this process, each agent with its node of the cluster file.
absl::Status StartInProcess(LocalCluster& c) {
  HeadOptions head;
  head.state_dir = c.state_dir;
  TESSERA_ASSIGN_OR_RETURN(c.head, HeadServer::Create(head));
  c.token = c.head->token();
  for (int i = 0; i < kAgents; ++i) {
    AgentOptions options;
    options.state_dir = c.state_dir;  // token and head address from the state folder
    options.node_id = absl::StrCat("n-", i);
    options.cluster_file = c.cluster_file;
    options.environment = Environment();
    // n-0 starts workers from prestarted launchers, n-1 forks them (the lease comparison).
    options.launcher = launcher_binary;
    if (i == 1) options.prestarted_workers = 0;
    TESSERA_ASSIGN_OR_RETURN(auto agent, NodeAgentServer::Create(options));
    c.agents.push_back(std::move(agent));
  }
  return absl::OkStatus();
}

// `tessera up` of the same cluster file: a head process and 4 node agent processes.
absl::Status StartWithUp(LocalCluster& c) {
  TESSERA_RETURN_IF_ERROR(RunCommand(
      {tessera_binary, "up", c.cluster_file, "--state-dir", c.state_dir}, c.work_dir + "/up.log"));
  TESSERA_ASSIGN_OR_RETURN(c.token, rpc::ReadTokenFile(c.state_dir + "/token"));
  return absl::OkStatus();
}

LocalCluster* Cluster() {
  absl::MutexLock lock(&fixtures_mu);
  if (cluster != nullptr) return cluster;
  auto c = std::make_unique<LocalCluster>();
  c->work_dir = MakeTempDir("tessera-bench-cluster");
  if (c->work_dir.empty()) return nullptr;
  c->state_dir = c->work_dir + "/state";
  c->cluster_file = c->work_dir + "/cluster.yaml";
  std::ofstream(c->cluster_file) << kClusterFile;
  {
    absl::MutexLock work_lock(&interrupt_mu);
    interrupt_work_dir = c->work_dir;
  }
  absl::Status started = tessera_binary.empty() ? StartInProcess(*c) : StartWithUp(*c);
  if (!started.ok()) {
    std::cerr << "the local cluster did not start: " << started << "\n";
    c->Stop();
    return nullptr;
  }
  const std::shared_ptr<grpc::Channel> head_channel =
      rpc::MakeChannel(ReadFileText(c->state_dir + "/head.address"), c->token);
  c->head_nodes = v1::HeadNodes::NewStub(head_channel);
  c->head_reservations = v1::HeadReservations::NewStub(head_channel);
  // Ready when the head lists every agent alive.
  const absl::Time end = absl::Now() + absl::Seconds(60);
  while (absl::Now() < end) {
    v1::ListNodesResponse nodes;
    auto context = rpc::MakeClientContext(kCallTimeout);
    if (c->head_nodes->ListNodes(context.get(), v1::ListRequest(), &nodes).ok()) {
      int alive = 0;
      for (const auto& node : nodes.nodes()) {
        if (node.state() != v1::NODE_STATE_ALIVE) continue;
        ++alive;
        if (node.node().node_id() == "n-0") {
          c->agent_stub = v1::NodeAgent::NewStub(rpc::MakeChannel(node.node().address(), c->token));
        }
      }
      if (alive == kAgents && c->agent_stub != nullptr) {
        cluster = c.release();
        return cluster;
      }
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  std::cerr << "the local cluster did not become ready in 60 s\n";
  c->Stop();
  return nullptr;
}

enum Strategy { kStrictPack = 0, kSpread = 1 };

// Args: bundles, strategy. Each bundle is CPU=1,GPU=1 (a device instance chosen by the head and
// prepared on the agent).
void BM_HeadPlacementGroupCreateRemove(benchmark::State& state) {
  LocalCluster* c = Cluster();
  if (c == nullptr) return state.SkipWithError("the local cluster did not start");
  const int bundles = static_cast<int>(state.range(0));
  const v1::PlacementStrategy strategy = state.range(1) == kSpread
                                             ? v1::PLACEMENT_STRATEGY_SPREAD
                                             : v1::PLACEMENT_STRATEGY_STRICT_PACK;
  state.SetLabel(absl::StrCat(bundles, " bundle", bundles == 1 ? "" : "s", " ",
                              std::string(rpc::PlacementStrategyName(strategy))));
  v1::CreatePlacementGroupRequest create;
  create.set_strategy(strategy);
  const v1::Resources resources = wire::ResourcesToProto(*ParseResourceSet("CPU=1,GPU=1"));
  for (int i = 0; i < bundles; ++i) {
    *create.mutable_primary()->add_bundles()->mutable_resources() = resources;
  }
  v1::RemovePlacementGroupRequest remove;
  int64_t not_created = 0, errors = 0;
  for (auto _ : state) {
    const std::string name = absl::StrCat("bench-pg-", c->next_id.fetch_add(1));
    create.set_name(name);
    create.set_request_id(absl::StrCat("create-", name));
    v1::PlacementGroupInfo info;
    auto create_context = rpc::MakeClientContext(kCallTimeout);
    if (!c->head_reservations->CreatePlacementGroup(create_context.get(), create, &info).ok()) {
      ++errors;
      continue;
    }
    if (info.state() != v1::PLACEMENT_GROUP_STATE_CREATED && not_created++ == 0) {
      std::cerr << name << " is " << rpc::PlacementGroupStateName(info.state()) << ": "
                << info.explanation() << "\n";
    }
    remove.set_name(name);
    remove.set_request_id(absl::StrCat("remove-", name));
    v1::RemovePlacementGroupResponse removed;
    auto remove_context = rpc::MakeClientContext(kCallTimeout);
    if (!c->head_reservations->RemovePlacementGroup(remove_context.get(), remove, &removed).ok()) {
      ++errors;
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["not_created"] = static_cast<double>(not_created);
  // Resident memory of the head's process after the run (this process when in process); every
  // thread reads it, so the average, not the sum.
  state.counters["head_rss_MiB"] =
      benchmark::Counter(RssMiB(c->HeadPid()), benchmark::Counter::kAvgThreads);
  state.counters["errors"] = static_cast<double>(errors);
}
// --- leases on one node agent (n-0 of the cluster) ---

// The untimed pause before each settled lease call.
constexpr absl::Duration kSettle = absl::Milliseconds(2);

v1::LeaseRequest LeaseRequestFor(const std::string& resources) {
  v1::LeaseRequest request;
  wire::ResourcesToProto(*ParseResourceSet(resources),
                         request.mutable_request()->mutable_resources());
  request.mutable_worker()->add_argv("/bin/true");
  return request;
}

// The full lease: RequestLease decides, records the lease, starts the worker (the reply comes
// once exec has happened) and answers the grant. Time per iteration is that round trip; the
// worker's exit (which releases the lease) happens on the agent's reaper thread, outside the
// measured call. pooled:1 on n-0, from prestarted launchers; pooled:0 on n-1, forked from the
// agent (in process only). settled:0 runs leases back to back, so each one shares the 2 cores with
// the previous workers' runs and exits and the launchers being started behind them (a closed
// loop: the time is 1/throughput); settled:1 waits (untimed) after each lease until its worker
// has exited and the pool holds its launchers again, each with its log files made, so the time is
// one lease on an idle node. In process, the loop waits (untimed) when more than 64 workers still
// run; the node has 224 CPUs, so with real processes a lease the node cannot take shows as
// not_granted.
void BM_AgentLeaseGrantAndStart(benchmark::State& state) {
  LocalCluster* c = Cluster();
  if (c == nullptr) return state.SkipWithError("the local cluster did not start");
  const bool pooled = state.range(0) == 1;
  const bool settled = state.range(1) == 1;
  if (!pooled && c->agents.empty()) {
    return state.SkipWithError(
        "a forking agent runs in process only (agents of tessera up use their default)");
  }
  NodeAgentServer* in_process = c->agents.empty() ? nullptr : c->agents[pooled ? 0 : 1].get();
  if (pooled && in_process != nullptr && in_process->launcher_pool() == nullptr) {
    return state.SkipWithError(
        "n-0 has no launcher pool (build tessera-launcher or pass --launcher=PATH)");
  }
  v1::NodeAgent::Stub* stub = c->agent_stub.get();
  std::unique_ptr<v1::NodeAgent::Stub> direct_stub;
  if (!pooled) {
    direct_stub = v1::NodeAgent::NewStub(rpc::MakeChannel(in_process->address(), c->token));
    stub = direct_stub.get();
  }
  state.SetLabel(absl::StrCat(pooled
                                  ? (c->agents.empty() ? "agent's default" : "prestarted launchers")
                                  : "fork from the agent",
                              settled ? ", one at a time on an idle node" : ""));
  // Settled: the last worker has exited and every launcher the pool should hold is ready (its
  // two log files made: fd 5 open).
  auto node_is_idle = [&] {
    if (in_process == nullptr) return true;
    if (in_process->state().running_workers() > 0) return false;
    LauncherPool* pool = in_process->launcher_pool();
    if (pool == nullptr) return true;
    const std::vector<pid_t> idle = pool->IdlePids();
    if (static_cast<int>(idle.size()) < AgentOptions().prestarted_workers) return false;
    for (pid_t pid : idle) {
      if (::access(absl::StrCat("/proc/", pid, "/fd/5").c_str(), F_OK) != 0) return false;
    }
    return true;
  };
  v1::LeaseRequest request = LeaseRequestFor("CPU=1");
  int64_t not_granted = 0, errors = 0;
  const int64_t cold_before =
      pooled && in_process != nullptr ? in_process->launcher_pool()->stats().taken_cold : 0;
  for (auto _ : state) {
    request.set_request_id(absl::StrCat("lease-", c->next_id.fetch_add(1)));
    v1::LeaseReply reply;
    auto context = rpc::MakeClientContext(kCallTimeout);
    if (!stub->RequestLease(context.get(), request, &reply).ok()) {
      ++errors;
    } else if (!reply.has_granted()) {
      ++not_granted;
    }
    if (settled) {
      state.PauseTiming();
      const absl::Time end = absl::Now() + absl::Seconds(5);
      while (!node_is_idle() && absl::Now() < end) absl::SleepFor(absl::Microseconds(100));
      absl::SleepFor(kSettle);  // as the settled refused RPC does
      state.ResumeTiming();
    } else if (in_process != nullptr && in_process->state().running_workers() > 64) {
      state.PauseTiming();
      while (in_process->state().running_workers() > 8) absl::SleepFor(absl::Milliseconds(1));
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["not_granted"] = static_cast<double>(not_granted);
  // Resident memory of the agent's process after the run: fork copies its page tables.
  state.counters["agent_rss_MiB"] =
      benchmark::Counter(RssMiB(c->AgentPid()), benchmark::Counter::kAvgThreads);
  state.counters["errors"] = static_cast<double>(errors);
  if (pooled && in_process != nullptr) {
    // Leases of this run that found no launcher ready and waited for one to start.
    state.counters["cold_launches"] = benchmark::Counter(
        static_cast<double>(in_process->launcher_pool()->stats().taken_cold - cold_before),
        benchmark::Counter::kAvgThreads);
  }
}
BENCHMARK(BM_AgentLeaseGrantAndStart)
    ->ArgNames({"pooled", "settled"})
    ->Args({1, 0})
    ->Args({0, 0})
    ->Threads(1)
    ->Threads(2)
    ->Threads(4)
    ->UseRealTime();
BENCHMARK(BM_AgentLeaseGrantAndStart)
    ->ArgNames({"pooled", "settled"})
    ->Args({1, 1})
    ->Args({0, 1})
    ->UseRealTime();

// The same RPC for a lease this node can never fit (GPU=16 on an 8-GPU node), at the spillback
// hop limit so the agent answers itself: decoded, decided by the agent's scheduler, refused with
// its explanation. No process, no call to the head. settled:1 pauses (untimed) kSettle before
// each call, as settled grants do: the same RPC with its threads woken from idle.
void BM_AgentLeaseRefusedRpc(benchmark::State& state) {
  LocalCluster* c = Cluster();
  if (c == nullptr) return state.SkipWithError("the local cluster did not start");
  const bool settled = state.range(0) == 1;
  v1::LeaseRequest request = LeaseRequestFor("GPU=16");
  request.set_hops(AgentOptions().max_spillback_hops);
  int64_t unexpected = 0;
  for (auto _ : state) {
    if (settled) {
      state.PauseTiming();
      absl::SleepFor(kSettle);
      state.ResumeTiming();
    }
    request.set_request_id(absl::StrCat("refused-", c->next_id.fetch_add(1)));
    v1::LeaseReply reply;
    auto context = rpc::MakeClientContext(kCallTimeout);
    if (!c->agent_stub->RequestLease(context.get(), request, &reply).ok() || reply.has_granted() ||
        reply.has_spillback()) {
      ++unexpected;
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["unexpected"] = static_cast<double>(unexpected);
}
BENCHMARK(BM_AgentLeaseRefusedRpc)
    ->ArgName("settled")
    ->Arg(0)
    ->Threads(1)
    ->Threads(4)
    ->UseRealTime();
BENCHMARK(BM_AgentLeaseRefusedRpc)->ArgName("settled")->Arg(1)->UseRealTime();

// The agent's decision alone, in this thread: AgentState::TryLease of CPU=1,GPU=1 (placed, device
// instance chosen, lease and worker recorded), then the worker recorded as failed to start,
// which releases the lease. No RPC, no process.
void BM_AgentStateLeaseDecision(benchmark::State& state) {
  AgentOptions options;
  options.node_id = "decide";
  options.hardware_file = HardwareFile();
  options.environment = Environment();
  auto loaded = LoadNodeHardware(options);
  if (!loaded.ok()) return state.SkipWithError("hardware did not load");
  auto agent_state = AgentState::Create(loaded->id, std::move(loaded->hardware));
  if (!agent_state.ok()) return state.SkipWithError("agent state refused the hardware");
  LeaseAsk ask;
  ask.resources = *ParseResourceSet("CPU=1,GPU=1");
  int64_t not_placed = 0;
  for (auto _ : state) {
    auto decision = (*agent_state)->TryLease(ask);
    if (!decision.ok() || !decision->lease.has_value()) {
      ++not_placed;
      continue;
    }
    (*agent_state)->WorkerFailedToStart(decision->lease->worker, "benchmark");
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["not_placed"] = static_cast<double>(not_placed);
}
BENCHMARK(BM_AgentStateLeaseDecision);

// Registered after the lease benchmarks: in process, the placement-group runs with 8 client
// threads grow the gRPC servers' thread pools (more mappings for every later fork to copy).
BENCHMARK(BM_HeadPlacementGroupCreateRemove)
    ->ArgNames({"bundles", "spread"})
    ->Args({1, kStrictPack})
    ->Args({8, kStrictPack})
    ->Args({8, kSpread})
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_HeadPlacementGroupCreateRemove)
    ->ArgNames({"bundles", "spread"})
    ->Args({1, kStrictPack})
    ->Threads(4)
    ->Threads(8)
    ->UseRealTime();

void TearDownAll() {
  absl::MutexLock lock(&fixtures_mu);
  if (cluster != nullptr) {
    cluster->Stop();
    delete cluster;
    cluster = nullptr;
  }
  if (anchors != nullptr) {
    anchors->bare->Shutdown();
    anchors->with_tls->Shutdown();
    delete anchors;
    anchors = nullptr;
  }
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // Our own flags: --tessera=PATH runs the cluster as real processes (`PATH up`);
  // --launcher=PATH is the worker launcher of in-process agents.
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--tessera=", 0) == 0) {
      tessera::tessera_binary = std::filesystem::absolute(arg.substr(10)).string();
    } else if (arg.rfind("--launcher=", 0) == 0) {
      tessera::launcher_binary = std::filesystem::absolute(arg.substr(11)).string();
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (tessera::launcher_binary.empty()) {
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    tessera::launcher_binary =
        (self.parent_path().parent_path() / "bin" / "tessera-launcher").string();
  }
  if (!tessera::tessera_binary.empty()) {
    // Before any other thread starts, so that every thread inherits the mask.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    std::thread(tessera::InterruptThread, signals).detach();
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  tessera::TearDownAll();
  return 0;
}
