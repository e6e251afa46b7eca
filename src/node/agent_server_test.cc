// A real NodeAgentServer on loopback (port 0) with a small fake head (HeadNodes): real worker
// commands (/bin/sh -c ...) whose environment, logs and exits are checked through the NodeAgent
// service, spillback through the head's PickNode, registration, heartbeats and re-registration.
#include "node/agent_server.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "node/agent_test_util.h"
#include "node/fake_head.h"
#include "node/working_dir.h"
#include "rpc/auth.h"
#include "rpc/channel.h"
#include "rpc/server.h"
#include "rpc/status_conversion.h"
#include "tessera/v1/head.grpc.pb.h"
#include "tessera/v1/node_agent.grpc.pb.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

using node_testing::Eventually;
using node_testing::kLauncher;
using node_testing::kPatience;
using node_testing::kToken;

class AgentServerTest : public node_testing::AgentWithHeadTest {
 protected:
  void StartAgent(std::string hardware, std::string node_id = "n1", uint64_t store_bytes = 0,
                  Clock* clock = Clock::Real()) {
    AgentOptions options = AgentOptionsFor(std::move(hardware), std::move(node_id));
    options.object_store_bytes = store_bytes;
    options.clock = clock;
    options.environment = Environment({{"PATH", "/usr/bin:/bin"}, {"AGENT_VAR", "inherited"}});
    options.kill_grace_ms = 5000;
    auto agent = NodeAgentServer::Create(options);
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = std::move(*agent);
    stub_ = v1::NodeAgent::NewStub(rpc::MakeChannel(agent_->address(), kToken));
  }

  // A lease asked by a client proving `token` (the cluster's by default).
  grpc::Status Lease(const v1::LeaseRequest& request, v1::LeaseReply* reply,
                     std::string_view token = kToken) {
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, kPatience);
    if (token == kToken) return stub_->RequestLease(&context, request, reply);
    return v1::NodeAgent::NewStub(rpc::MakeChannel(agent_->address(), token))
        ->RequestLease(&context, request, reply);
  }

  static v1::LeaseRequest Request(std::map<std::string, int64_t> raw,
                                  std::vector<std::string> argv) {
    v1::LeaseRequest request;
    for (const auto& [name, amount] : raw) {
      (*request.mutable_request()->mutable_resources()->mutable_raw())[name] = amount;
    }
    for (std::string& arg : argv) request.mutable_worker()->add_argv(std::move(arg));
    return request;
  }

  // Everything the worker printed, and its exit.
  struct Watched {
    std::string out;
    std::string err;
    v1::WorkerExit exit;
    bool exited = false;
  };
  Watched Watch(const std::string& worker_id) {
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, kPatience);
    v1::WatchWorkerRequest request;
    request.set_worker_id(worker_id);
    auto reader = stub_->WatchWorker(&context, request);
    Watched watched;
    v1::WorkerEvent event;
    while (reader->Read(&event)) {
      if (event.has_exit()) {
        watched.exit = event.exit();
        watched.exited = true;
      }
      watched.out += event.stdout();
      watched.err += event.stderr();
    }
    EXPECT_TRUE(reader->Finish().ok());
    return watched;
  }

  static std::map<std::string, std::string> EnvLines(const std::string& text) {
    std::map<std::string, std::string> env;
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      const size_t eq = line.find('=');
      if (eq == absl::string_view::npos) continue;
      env[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    }
    return env;
  }

  std::unique_ptr<v1::NodeAgent::Stub> stub_;
  // For the tests that move the agent's time by hand; outlives the agent (TearDown ends it).
  FakeClock clock_;
};

TEST_F(AgentServerTest, WorkersOfAnAgentWithAStoreAreToldItsSocket) {
  StartAgent("h100-sxm-8.yaml", "n1", uint64_t{4} << 20);
  v1::LeaseReply reply;
  ASSERT_TRUE(Lease(Request({{"CPU", 10000}}, {"/bin/sh", "-c", "env"}), &reply).ok());
  ASSERT_TRUE(reply.has_granted()) << reply.explanation();
  Watched watched = Watch(reply.granted().worker_id());
  ASSERT_TRUE(watched.exited);
  EXPECT_EQ(EnvLines(watched.out)["TESSERA_OBJECT_STORE_SOCKET"],
            state_dir_ + "/nodes/n1/objects.sock");
}

TEST_F(AgentServerTest, GrantsAndRunsWorkerWithIsolationEnvAndLogs) {
  StartAgent("h100-sxm-8.yaml");
  auto request = Request({{"GPU", 20000}}, {"/bin/sh", "-c", "env; echo to-stderr >&2"});
  (*request.mutable_worker()->mutable_env())["MY_VAR"] = "mine";
  v1::LeaseReply reply;
  ASSERT_TRUE(Lease(request, &reply).ok());
  ASSERT_TRUE(reply.has_granted()) << reply.explanation();
  const v1::LeaseGrant& grant = reply.granted();
  EXPECT_EQ(grant.node_id(), "n1");
  EXPECT_GT(grant.pid(), 0);
  ASSERT_EQ(grant.allocation().devices_size(), 1);
  const v1::DeviceGrant& gpus = grant.allocation().devices(0);
  ASSERT_EQ(gpus.instances_size(), 2);
  const std::string visible = absl::StrCat(gpus.instances(0), ",", gpus.instances(1));
  EXPECT_EQ(grant.isolation_env().at("CUDA_VISIBLE_DEVICES"), visible);

  Watched watched = Watch(grant.worker_id());
  ASSERT_TRUE(watched.exited);
  EXPECT_EQ(watched.exit.exit_code(), 0);
  EXPECT_EQ(watched.exit.reason(), "exited with code 0");
  auto env = EnvLines(watched.out);
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], visible);
  EXPECT_EQ(env["TESSERA_NODE_ID"], "n1");
  EXPECT_EQ(env["TESSERA_WORKER_ID"], grant.worker_id());
  EXPECT_EQ(env["TESSERA_LEASE_ID"], grant.lease_id());
  EXPECT_EQ(env["MY_VAR"], "mine");
  EXPECT_EQ(env["AGENT_VAR"], "inherited");
  EXPECT_EQ(env["TESSERA_OBJECT_STORE_SOCKET"], "");   // this agent hosts no store
  EXPECT_EQ(env["TESSERA_WORKER_BIND"], "127.0.0.1");  // where this agent is reached
  EXPECT_EQ(watched.err, "to-stderr\n");

  // The log files are where the contract says, with the same bytes.
  const std::string base = state_dir_ + "/nodes/n1/workers/" + grant.worker_id();
  std::stringstream out, err;
  out << std::ifstream(base + ".out").rdbuf();
  err << std::ifstream(base + ".err").rdbuf();
  EXPECT_EQ(out.str(), watched.out);
  EXPECT_EQ(err.str(), "to-stderr\n");

  // The exit released the lease at once.
  EXPECT_THAT(agent_->state().Leases(), IsEmpty());
  EXPECT_EQ(agent_->state().Available().Get("GPU"), Quantity::FromInt(8));

  // Watching again after the exit still gives the output and the exit.
  Watched again = Watch(grant.worker_id());
  EXPECT_TRUE(again.exited);
  EXPECT_EQ(again.out, watched.out);

  // The address and pid files.
  std::stringstream address;
  address << std::ifstream(state_dir_ + "/nodes/n1/agent.address").rdbuf();
  EXPECT_EQ(address.str(), agent_->address() + "\n");
}

TEST_F(AgentServerTest, TpuHostWorkerSeesItsChipsAndSliceIdentity) {
  StartAgent("tpu-v6e-4x4-worker0.yaml", "tpu-w0");
  v1::LeaseReply reply;
  ASSERT_TRUE(Lease(Request({{"TPU", 20000}}, {"/bin/sh", "-c", "env"}), &reply).ok());
  ASSERT_TRUE(reply.has_granted()) << reply.explanation();
  const v1::DeviceGrant& chips = reply.granted().allocation().devices(0);
  ASSERT_EQ(chips.instances_size(), 2);
  Watched watched = Watch(reply.granted().worker_id());
  auto env = EnvLines(watched.out);
  EXPECT_EQ(env["TPU_VISIBLE_CHIPS"], absl::StrCat(chips.instances(0), ",", chips.instances(1)));
  EXPECT_EQ(env["TPU_HOST_BOUNDS"], "1,1,1");
  EXPECT_EQ(env["TPU_WORKER_ID"], "0");
  EXPECT_EQ(env["TPU_NAME"], "my-v6e-slice");
  EXPECT_EQ(env["TPU_ACCELERATOR_TYPE"], "v6e-16");
  EXPECT_EQ(env["TPU_TOPOLOGY"], "4x4");
  EXPECT_EQ(env["TPU_WORKER_HOSTNAMES"], "t1v-n-0,t1v-n-1,t1v-n-2,t1v-n-3");
}

TEST_F(AgentServerTest, ExitCodeAndKillReasons) {
  StartAgent("cpu-only.yaml");
  v1::LeaseReply failing;
  ASSERT_TRUE(Lease(Request({{"CPU", 10000}}, {"/bin/sh", "-c", "exit 3"}), &failing).ok());
  ASSERT_TRUE(failing.has_granted());
  Watched failed = Watch(failing.granted().worker_id());
  EXPECT_EQ(failed.exit.exit_code(), 3);
  EXPECT_EQ(failed.exit.reason(), "exited with code 3");

  v1::LeaseReply sleeping;
  ASSERT_TRUE(Lease(Request({{"CPU", 10000}}, {"/bin/sleep", "1000"}), &sleeping).ok());
  ASSERT_TRUE(sleeping.has_granted());
  {
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, kPatience);
    v1::KillWorkerRequest kill;
    kill.set_worker_id(sleeping.granted().worker_id());
    v1::KillWorkerResponse response;
    ASSERT_TRUE(stub_->KillWorker(&context, kill, &response).ok());
  }
  Watched killed = Watch(sleeping.granted().worker_id());
  EXPECT_EQ(killed.exit.exit_code(), -1);
  EXPECT_EQ(killed.exit.signal(), 15);
  EXPECT_THAT(killed.exit.reason(), HasSubstr("SIGTERM"));
  EXPECT_THAT(killed.exit.reason(), HasSubstr("KillWorker"));
  EXPECT_THAT(agent_->state().Leases(), IsEmpty());

  // ListWorkers shows both, exited, with their reasons.
  grpc::ClientContext context;
  rpc::ConfigureClientContext(&context, kPatience);
  v1::ListWorkersResponse list;
  ASSERT_TRUE(stub_->ListWorkers(&context, v1::ListWorkersRequest(), &list).ok());
  EXPECT_EQ(list.node_id(), "n1");
  ASSERT_EQ(list.workers_size(), 2);
  for (const v1::WorkerInfo& w : list.workers()) {
    EXPECT_EQ(w.state(), v1::WORKER_STATE_EXITED);
    EXPECT_FALSE(w.exit().reason().empty());
    EXPECT_THAT(w.stdout_path(), HasSubstr(w.worker_id() + ".out"));
  }
}

TEST_F(AgentServerTest, CommandThatCannotStartIsAnErrorAndReleasesTheLease) {
  StartAgent("h100-sxm-8.yaml");
  v1::LeaseReply reply;
  grpc::Status status = Lease(Request({{"GPU", 10000}}, {"/nonexistent/program"}), &reply);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.error_message(), HasSubstr("/nonexistent/program"));
  EXPECT_THAT(agent_->state().Leases(), IsEmpty());
  EXPECT_EQ(agent_->state().Available().Get("GPU"), Quantity::FromInt(8));
}

TEST_F(AgentServerTest, WrongTokenAndMalformedRequestsChangeNothing) {
  StartAgent("h100-sxm-8.yaml");
  v1::LeaseReply reply;
  auto good = Request({{"GPU", 10000}}, {"/bin/true"});
  EXPECT_TRUE(rpc::IsPeerAuthenticationFailure(Lease(good, &reply, "wrong-token")));

  auto no_argv = Request({{"GPU", 10000}}, {});
  grpc::Status status = Lease(no_argv, &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("argv"));

  auto fractional = Request({{"GPU", 15000}}, {"/bin/true"});
  EXPECT_EQ(Lease(fractional, &reply).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  auto negative = Request({{"CPU", -1}}, {"/bin/true"});
  EXPECT_EQ(Lease(negative, &reply).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  grpc::ClientContext context;
  rpc::ConfigureClientContext(&context, kPatience);
  v1::PrepareBundlesRequest prepare;
  prepare.set_placement_group("pg-1");
  auto* bundle = prepare.add_bundles();
  bundle->set_bundle_index(0);
  (*bundle->mutable_allocation()->mutable_resources()->mutable_raw())["GPU"] = 10000;
  v1::PrepareBundlesResponse prepared;
  // A GPU demand without its device grant.
  EXPECT_EQ(stub_->PrepareBundles(&context, prepare, &prepared).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  EXPECT_THAT(agent_->state().Leases(), IsEmpty());
  EXPECT_THAT(agent_->state().Workers(), IsEmpty());
  EXPECT_THAT(agent_->state().Bundles(), IsEmpty());
  EXPECT_EQ(agent_->state().Available().Get("GPU"), Quantity::FromInt(8));
}

TEST_F(AgentServerTest, RetriedRequestIdStartsOneWorker) {
  StartAgent("cpu-only.yaml");
  auto request = Request({{"CPU", 10000}}, {"/bin/sleep", "1000"});
  request.set_request_id("req-1");
  v1::LeaseReply first, second;
  ASSERT_TRUE(Lease(request, &first).ok());
  ASSERT_TRUE(Lease(request, &second).ok());
  ASSERT_TRUE(first.has_granted());
  EXPECT_EQ(first.granted().worker_id(), second.granted().worker_id());
  EXPECT_EQ(agent_->state().Workers().size(), 1u);
}

TEST_F(AgentServerTest, SpillsBackThroughTheHeadAndStopsAtTheHopLimit) {
  StartHead();
  {
    absl::MutexLock lock(&head_.mu);
    head_.pick_answer.set_node_id("n2");
    head_.pick_answer.set_address("127.0.0.1:9");
    head_.pick_answer.set_status(v1::PICK_STATUS_PLACED);
  }
  StartAgent("cpu-only.yaml");
  // More GPUs than a CPU-only node has.
  v1::LeaseReply reply;
  ASSERT_TRUE(Lease(Request({{"GPU", 10000}}, {"/bin/true"}), &reply).ok());
  ASSERT_TRUE(reply.has_spillback()) << reply.status() << ": " << reply.explanation();
  EXPECT_EQ(reply.spillback().node_id(), "n2");
  EXPECT_EQ(reply.spillback().address(), "127.0.0.1:9");
  {
    absl::MutexLock lock(&head_.mu);
    ASSERT_EQ(head_.picks.size(), 1u);
    ASSERT_EQ(head_.picks[0].exclude_node_ids_size(), 1);
    EXPECT_EQ(head_.picks[0].exclude_node_ids(0), "n1");
    EXPECT_EQ(head_.picks[0].request().resources().raw().at("GPU"), 10000);
  }

  // A selector this node does not match spills too.
  auto tpu = Request({{"CPU", 10000}}, {"/bin/true"});
  v1::LabelSelectorConstraint* accelerator =
      tpu.mutable_request()->mutable_label_selector()->add_label_constraints();
  accelerator->set_label_key("tessera.io/accelerator-type");
  accelerator->set_operator_(v1::LABEL_OPERATOR_IN);
  accelerator->add_label_values("TPU-V6E");
  ASSERT_TRUE(Lease(tpu, &reply).ok());
  EXPECT_TRUE(reply.has_spillback());

  // After the hop limit: answered here with the explanation, the head not asked.
  auto tired = Request({{"GPU", 10000}}, {"/bin/true"});
  tired.set_hops(4);
  ASSERT_TRUE(Lease(tired, &reply).ok());
  EXPECT_FALSE(reply.has_spillback());
  EXPECT_FALSE(reply.has_granted());
  EXPECT_EQ(reply.status(), v1::PICK_STATUS_INFEASIBLE);
  EXPECT_THAT(reply.explanation(), HasSubstr("GPU"));
  EXPECT_THAT(reply.explanation(), HasSubstr("4 spillbacks"));
  {
    absl::MutexLock lock(&head_.mu);
    EXPECT_EQ(head_.picks.size(), 2u);
  }

  // Nobody can take it: the head's explanation is added.
  {
    absl::MutexLock lock(&head_.mu);
    head_.pick_answer = v1::PickNodeResponse();
    head_.pick_answer.set_status(v1::PICK_STATUS_INFEASIBLE);
    head_.pick_answer.set_explanation("no node has 1 GPU free");
  }
  ASSERT_TRUE(Lease(Request({{"GPU", 10000}}, {"/bin/true"}), &reply).ok());
  EXPECT_EQ(reply.status(), v1::PICK_STATUS_INFEASIBLE);
  EXPECT_THAT(reply.explanation(), HasSubstr("no node has 1 GPU free"));
}

TEST_F(AgentServerTest, RegistersHeartbeatsAndRegistersAgainWhenForgotten) {
  StartHead();
  StartAgent("h100-sxm-8.yaml");
  {
    absl::MutexLock lock(&head_.mu);
    ASSERT_EQ(head_.registrations.size(), 1u);  // Create registers before returning
    const v1::NodeDescription& node = head_.registrations[0].node();
    EXPECT_EQ(node.node_id(), "n1");
    EXPECT_EQ(node.address(), agent_->address());
    EXPECT_EQ(node.incarnation(), agent_->incarnation());
    EXPECT_EQ(node.resources().raw().at("GPU"), 80000);
    EXPECT_EQ(node.labels().at("tessera.io/node-id"), "n1");
    ASSERT_EQ(node.devices_size(), 1);
    EXPECT_EQ(node.devices(0).resource(), "GPU");
    EXPECT_EQ(node.devices(0).count(), 8);
  }
  v1::LeaseReply reply;
  ASSERT_TRUE(Lease(Request({{"GPU", 10000}}, {"/bin/sleep", "1000"}), &reply).ok());
  ASSERT_TRUE(reply.has_granted());
  const std::string lease_id = reply.granted().lease_id();
  // Heartbeats carry the full lease set.
  ASSERT_TRUE(Eventually([&] {
    absl::MutexLock lock(&head_.mu);
    return !head_.heartbeats.empty() && head_.heartbeats.back().leases_size() == 1 &&
           head_.heartbeats.back().leases(0).lease_id() == lease_id;
  }));
  {
    absl::MutexLock lock(&head_.mu);
    EXPECT_EQ(head_.heartbeats.back().incarnation(), agent_->incarnation());
    EXPECT_EQ(head_.heartbeats.back().workers(), 1);
  }

  // The head restarts and forgets the node: the agent registers again with its lease, and
  // releases the bundle the head does not know.
  ASSERT_TRUE(agent_->state()
                  .PrepareBundles("pg-old", {BundleAsk{0, node_testing::Res("CPU=1"), {}}})
                  .ok());
  {
    absl::MutexLock lock(&head_.mu);
    head_.known = false;
    v1::HeldBundle release;
    release.set_placement_group("pg-old");
    release.set_bundle_index(0);
    head_.release_on_register.push_back(release);
  }
  ASSERT_TRUE(Eventually([&] {
    absl::MutexLock lock(&head_.mu);
    return head_.registrations.size() >= 2;
  }));
  {
    absl::MutexLock lock(&head_.mu);
    const v1::RegisterNodeRequest& again = head_.registrations[1];
    ASSERT_EQ(again.leases_size(), 1);
    EXPECT_EQ(again.leases(0).lease_id(), lease_id);
    ASSERT_EQ(again.bundles_size(), 1);
    EXPECT_EQ(again.bundles(0).placement_group(), "pg-old");
  }
  ASSERT_TRUE(Eventually([&] { return agent_->state().Bundles().empty(); }));
  EXPECT_EQ(agent_->state().Leases().size(), 1u);
}

TEST_F(AgentServerTest, RegistersOnceTheHeadComesUp) {
  // The head's address is taken but nothing answers yet: reserve a port, then free it.
  StartHead();
  const std::string address = head_server_->address();
  head_server_.reset();
  AgentOptions options;
  options.state_dir = state_dir_;
  options.token = kToken;
  options.node_id = "late";
  options.hardware_file = node_testing::ExampleHardware("cpu-only.yaml");
  options.environment = Environment();
  options.head_address = address;
  options.head_retry_budget_ms = 100;
  auto agent = NodeAgentServer::Create(options);
  ASSERT_TRUE(agent.ok()) << agent.status();
  EXPECT_FALSE((*agent)->head_link()->registered());
  // The head appears on the same port.
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  rpc::ServerOptions head_options;
  head_options.token = kToken;
  head_options.port = port;
  auto server = rpc::RpcServer::Start(head_options, {&head_});
  ASSERT_TRUE(server.ok()) << server.status();
  head_server_ = std::move(*server);
  EXPECT_TRUE(Eventually([&] { return (*agent)->head_link()->registered(); }));
  agent->reset();
}

TEST_F(AgentServerTest, BundlesOverRpcAndLeasesInsideThem) {
  StartAgent("h100-sxm-8.yaml");
  auto call = [&](auto method, const auto& request, auto* response) {
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, kPatience);
    return (stub_.get()->*method)(&context, request, response);
  };
  v1::PrepareBundlesRequest prepare;
  prepare.set_placement_group("pg-1");
  auto* bundle = prepare.add_bundles();
  bundle->set_bundle_index(0);
  (*bundle->mutable_allocation()->mutable_resources()->mutable_raw())["GPU"] = 20000;
  auto* grant = bundle->mutable_allocation()->add_devices();
  grant->set_resource("GPU");
  grant->add_instances(2);
  grant->add_instances(3);
  grant->add_amounts_raw(10000);
  grant->add_amounts_raw(10000);
  v1::PrepareBundlesResponse prepared;
  ASSERT_TRUE(call(&v1::NodeAgent::Stub::PrepareBundles, prepare, &prepared).ok());
  // A retried prepare is fine.
  ASSERT_TRUE(call(&v1::NodeAgent::Stub::PrepareBundles, prepare, &prepared).ok());
  v1::CommitBundlesRequest commit;
  commit.set_placement_group("pg-1");
  commit.add_bundle_indices(0);
  v1::CommitBundlesResponse committed;
  ASSERT_TRUE(call(&v1::NodeAgent::Stub::CommitBundles, commit, &committed).ok());

  auto request =
      Request({{"GPU", 10000}}, {"/bin/sh", "-c", "echo $CUDA_VISIBLE_DEVICES; sleep 1000"});
  request.mutable_request()->set_placement_group("pg-1");
  request.mutable_request()->set_bundle_index(0);
  v1::LeaseReply reply;
  ASSERT_TRUE(Lease(request, &reply).ok());
  ASSERT_TRUE(reply.has_granted()) << reply.explanation();
  const int instance = reply.granted().allocation().devices(0).instances(0);
  EXPECT_TRUE(instance == 2 || instance == 3);
  // The worker has printed what it sees before its bundle goes.
  const std::string out_path =
      state_dir_ + "/nodes/n1/workers/" + reply.granted().worker_id() + ".out";
  ASSERT_TRUE(Eventually([&] {
    std::error_code ec;
    return std::filesystem::file_size(out_path, ec) > 0 && !ec;
  }));

  v1::CancelBundlesRequest cancel;
  cancel.set_placement_group("pg-1");
  v1::CancelBundlesResponse cancelled;
  ASSERT_TRUE(call(&v1::NodeAgent::Stub::CancelBundles, cancel, &cancelled).ok());
  ASSERT_EQ(cancelled.killed_workers_size(), 1);
  EXPECT_EQ(cancelled.killed_workers(0), reply.granted().worker_id());
  Watched watched = Watch(reply.granted().worker_id());
  EXPECT_EQ(watched.out, absl::StrCat(instance, "\n"));
  EXPECT_EQ(watched.exit.signal(), 9);
  EXPECT_THAT(watched.exit.reason(), HasSubstr("pg-1 was cancelled"));
  EXPECT_THAT(agent_->state().Bundles(), IsEmpty());
  EXPECT_EQ(agent_->state().Available().Get("GPU"), Quantity::FromInt(8));
}

// Two bundles of one group on this node, GPUs 2,3 and 5: a gang's ranks of this node.
void PrepareTwoGpuBundles(v1::NodeAgent::Stub& stub) {
  v1::PrepareBundlesRequest prepare;
  prepare.set_placement_group("gang-1");
  prepare.set_commit(true);
  auto add = [&](int index, std::vector<int> gpus) {
    auto* bundle = prepare.add_bundles();
    bundle->set_bundle_index(index);
    (*bundle->mutable_allocation()->mutable_resources()->mutable_raw())["GPU"] =
        10000 * static_cast<int64_t>(gpus.size());
    auto* grant = bundle->mutable_allocation()->add_devices();
    grant->set_resource("GPU");
    for (int gpu : gpus) {
      grant->add_instances(gpu);
      grant->add_amounts_raw(10000);
    }
  };
  add(0, {2, 3});
  add(1, {5});
  grpc::ClientContext context;
  rpc::ConfigureClientContext(&context, kPatience);
  v1::PrepareBundlesResponse prepared;
  ASSERT_TRUE(stub.PrepareBundles(&context, prepare, &prepared).ok());
}

TEST_F(AgentServerTest, AGangRankSeesTheUnionOfItsGroupsBundlesOnTheNode) {
  StartAgent("h100-sxm-8.yaml");
  PrepareTwoGpuBundles(*stub_);
  auto request = Request({{"GPU", 10000}}, {"/bin/sh", "-c", "echo $CUDA_VISIBLE_DEVICES"});
  request.mutable_request()->set_placement_group("gang-1");
  request.mutable_request()->set_bundle_index(1);
  request.mutable_worker()->add_visible_bundles(0);
  request.mutable_worker()->add_visible_bundles(1);
  v1::LeaseReply reply;
  ASSERT_TRUE(Lease(request, &reply).ok());
  ASSERT_TRUE(reply.has_granted()) << reply.explanation();
  EXPECT_EQ(reply.granted().allocation().devices(0).instances(0), 5);  // its own device
  Watched watched = Watch(reply.granted().worker_id());
  EXPECT_EQ(watched.out, "2,3,5\n");  // every device of the gang's bundles here

  // A bundle it names that this node does not hold is refused, and nothing runs.
  request.mutable_worker()->add_visible_bundles(7);
  ASSERT_EQ(Lease(request, &reply).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(AgentServerTest, AnOwnedWorkerIsStoppedWhenItsWatcherGoesAway) {
  StartAgent("h100-sxm-8.yaml");
  auto request = Request({{"CPU", 10000}}, {"/bin/sh", "-c", "echo up; exec sleep 1000"});
  request.mutable_worker()->set_stop_when_unwatched(true);
  v1::LeaseReply reply;
  ASSERT_TRUE(Lease(request, &reply).ok());
  ASSERT_TRUE(reply.has_granted()) << reply.explanation();
  const std::string worker = reply.granted().worker_id();
  {
    // A watcher that reads the first output, then goes away (as a killed owner does).
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, kPatience);
    v1::WatchWorkerRequest watch;
    watch.set_worker_id(worker);
    auto reader = stub_->WatchWorker(&context, watch);
    v1::WorkerEvent event;
    ASSERT_TRUE(reader->Read(&event));
    context.TryCancel();
    while (reader->Read(&event)) {
    }
    (void)reader->Finish();
  }
  ASSERT_TRUE(Eventually([&] {
    auto record = agent_->state().FindWorker(WorkerId(worker));
    return record.has_value() && record->state == WorkerState::kExited;
  }));
  auto record = agent_->state().FindWorker(WorkerId(worker));
  EXPECT_THAT(record->exit->reason, HasSubstr("owner stopped watching"));
  EXPECT_THAT(agent_->state().Leases(), IsEmpty());
}

TEST_F(AgentServerTest, AWorkerWithoutOutputOrCpuTimeIsKilledAsHung) {
  StartAgent("h100-sxm-8.yaml");
  auto request = Request({{"CPU", 10000}}, {"/bin/sh", "-c", "exec sleep 1000"});
  request.mutable_worker()->set_hang_timeout_ms(300);
  v1::LeaseReply reply;
  ASSERT_TRUE(Lease(request, &reply).ok());
  ASSERT_TRUE(reply.has_granted()) << reply.explanation();
  Watched watched = Watch(reply.granted().worker_id());
  ASSERT_TRUE(watched.exited);
  EXPECT_EQ(watched.exit.signal(), 9);
  EXPECT_THAT(watched.exit.reason(), HasSubstr("hung: no output and no CPU time"));
}

TEST_F(AgentServerTest, TheHangTimeoutRunsOnTheAgentsClock) {
  StartAgent("h100-sxm-8.yaml", "n1", 0, &clock_);
  auto request = Request({{"CPU", 10000}}, {"/bin/sh", "-c", "exec sleep 1000"});
  request.mutable_worker()->set_hang_timeout_ms(absl::ToInt64Milliseconds(absl::Hours(1)));
  v1::LeaseReply reply;
  ASSERT_TRUE(Lease(request, &reply).ok());
  ASSERT_TRUE(reply.has_granted()) << reply.explanation();
  const WorkerId worker(reply.granted().worker_id());
  // Hours of the agent's clock pass at once, two at a time: a watchdog round (every 100 ms of
  // real time) that finds no progress since the round before judges the silent worker hung,
  // without the test waiting an hour. (The first rounds may still see the shell exec sleep.)
  EXPECT_TRUE(node_testing::Eventually([&] {
    clock_.Advance(absl::Hours(2));
    absl::SleepFor(absl::Milliseconds(50));
    return agent_->state().FindWorker(worker)->exit.has_value();
  }));
  const auto record = agent_->state().FindWorker(worker);
  ASSERT_TRUE(record->exit.has_value());
  EXPECT_THAT(record->exit->reason, HasSubstr("hung: no output and no CPU time"));
}

TEST_F(AgentServerTest, AWorkerWithAStdinPipeReadsWhatIsWrittenThenEndOfFile) {
  StartAgent("h100-sxm-8.yaml");
  auto request = Request({{"CPU", 10000}}, {"/bin/sh", "-c", "cat; echo end"});
  request.mutable_worker()->set_stdin_pipe(true);
  v1::LeaseReply reply;
  ASSERT_TRUE(Lease(request, &reply).ok());
  ASSERT_TRUE(reply.has_granted()) << reply.explanation();
  auto write = [&](const std::string& worker, const std::string& data, bool close) {
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, kPatience);
    v1::WriteWorkerStdinRequest input;
    input.set_worker_id(worker);
    input.set_data(data);
    input.set_close(close);
    v1::WriteWorkerStdinResponse written;
    grpc::Status status = stub_->WriteWorkerStdin(&context, input, &written);
    return std::make_pair(status, written.written());
  };
  auto [status, written] = write(reply.granted().worker_id(), "fed\n", false);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(written, 4u);
  ASSERT_TRUE(write(reply.granted().worker_id(), "", true).first.ok());
  Watched watched = Watch(reply.granted().worker_id());
  EXPECT_EQ(watched.out, "fed\nend\n");
  EXPECT_EQ(watched.exit.exit_code(), 0);
  // Closed (and the worker gone): nothing more to write; a worker without a pipe neither.
  EXPECT_EQ(write(reply.granted().worker_id(), "more", false).first.error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_FALSE(std::filesystem::exists(state_dir_ + "/nodes/n1/workers/" +
                                       reply.granted().worker_id() + ".in"));
}

TEST_F(AgentServerTest, FindsFreePortsAndUnpacksWorkingDirectories) {
  StartAgent("h100-sxm-8.yaml");
  grpc::ClientContext context;
  rpc::ConfigureClientContext(&context, kPatience);
  v1::FindFreePortResponse port;
  ASSERT_TRUE(stub_->FindFreePort(&context, v1::FindFreePortRequest(), &port).ok());
  EXPECT_GT(port.port(), 0);
  EXPECT_EQ(port.host(), "127.0.0.1");
  EXPECT_EQ(port.interface(), "lo");  // where 127.0.0.1 lives

  const std::string src = state_dir_ + "/src";
  std::filesystem::create_directories(src);
  std::ofstream(src + "/train.py") << "print('shipped')\n";
  auto packed = PackDirectory(src, 1 << 20);
  ASSERT_TRUE(packed.ok());
  v1::PrepareWorkingDirRequest prepare;
  prepare.set_job_id("job-7");
  prepare.set_archive(packed->archive);
  v1::PrepareWorkingDirResponse prepared;
  grpc::ClientContext context2;
  rpc::ConfigureClientContext(&context2, kPatience);
  ASSERT_TRUE(stub_->PrepareWorkingDir(&context2, prepare, &prepared).ok());
  EXPECT_EQ(prepared.path(), state_dir_ + "/nodes/n1/jobs/job-7");

  auto request = Request({{"CPU", 10000}}, {"/bin/sh", "-c", "pwd; cat train.py"});
  request.mutable_worker()->set_working_dir_job("job-7");
  v1::LeaseReply reply;
  ASSERT_TRUE(Lease(request, &reply).ok());
  ASSERT_TRUE(reply.has_granted()) << reply.explanation();
  Watched watched = Watch(reply.granted().worker_id());
  EXPECT_EQ(watched.out, prepared.path() + "\nprint('shipped')\n");

  // A job whose folder is not here: the lease fails, naming it.
  request.mutable_worker()->set_working_dir_job("job-8");
  EXPECT_EQ(Lease(request, &reply).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(AgentServerTest, ReadLogsFollowsUntilExit) {
  StartAgent("cpu-only.yaml");
  v1::LeaseReply reply;
  ASSERT_TRUE(Lease(Request({{"CPU", 10000}},
                            {"/bin/sh", "-c", "echo one; echo err >&2; sleep 0.2; echo two"}),
                    &reply)
                  .ok());
  ASSERT_TRUE(reply.has_granted());
  grpc::ClientContext context;
  rpc::ConfigureClientContext(&context, kPatience);
  v1::ReadLogsRequest request;
  request.set_worker_id(reply.granted().worker_id());
  request.set_follow(true);
  request.set_stdout_only(true);
  auto reader = stub_->ReadLogs(&context, request);
  std::string out;
  v1::LogChunk chunk;
  while (reader->Read(&chunk)) {
    EXPECT_FALSE(chunk.is_stderr());
    out += chunk.data();
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(out, "one\ntwo\n");
}

TEST_F(AgentServerTest, ShutdownRpcStopsTheAgentAndItsWorkers) {
  StartAgent("cpu-only.yaml");
  v1::LeaseReply reply;
  ASSERT_TRUE(Lease(Request({{"CPU", 10000}}, {"/bin/sleep", "1000"}), &reply).ok());
  ASSERT_TRUE(reply.has_granted());
  const int pid = reply.granted().pid();
  grpc::ClientContext context;
  rpc::ConfigureClientContext(&context, kPatience);
  v1::ShutdownResponse response;
  ASSERT_TRUE(stub_->Shutdown(&context, v1::ShutdownRequest(), &response).ok());
  agent_->Wait();
  EXPECT_FALSE(std::filesystem::exists(state_dir_ + "/nodes/n1/agent.address"));
  EXPECT_NE(::kill(pid, 0), 0);  // reaped and gone
  auto worker = agent_->state().FindWorker(WorkerId(reply.granted().worker_id()));
  ASSERT_TRUE(worker.has_value());
  EXPECT_EQ(worker->state, WorkerState::kExited);
}

TEST_F(AgentServerTest, RunNodeAgentServesUntilTheShutdownRpc) {
  AgentOptions options;
  options.state_dir = state_dir_;
  options.token = kToken;
  options.node_id = "runner";
  options.hardware_file = node_testing::ExampleHardware("cpu-only.yaml");
  options.environment = Environment();
  absl::Status result = absl::UnknownError("still running");
  std::thread runner([&] { result = RunNodeAgent(options); });
  const std::string address_file = state_dir_ + "/nodes/runner/agent.address";
  std::string address;
  ASSERT_TRUE(Eventually([&] {
    std::ifstream in(address_file);
    return static_cast<bool>(std::getline(in, address)) && !address.empty();
  }));
  auto stub = v1::NodeAgent::NewStub(rpc::MakeChannel(address, kToken));
  grpc::ClientContext context;
  rpc::ConfigureClientContext(&context, kPatience);
  v1::ShutdownResponse response;
  ASSERT_TRUE(stub->Shutdown(&context, v1::ShutdownRequest(), &response).ok());
  runner.join();
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_FALSE(std::filesystem::exists(address_file));
}

TEST_F(AgentServerTest, CreateFailsCleanlyOnBadInput) {
  AgentOptions options;
  options.state_dir = state_dir_;
  options.token = kToken;
  options.node_id = "n1";
  options.hardware_file = "/nonexistent/hardware.yaml";
  options.environment = Environment();
  EXPECT_FALSE(NodeAgentServer::Create(options).ok());
  options.hardware_file = node_testing::ExampleHardware("cpu-only.yaml");
  options.token = "";
  auto no_token = NodeAgentServer::Create(options);
  EXPECT_EQ(no_token.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(no_token.status().message(), HasSubstr("token"));
}

TEST_F(AgentServerTest, WorkersStartFromPrestartedLaunchers) {
  StartAgent("cpu-only.yaml");
  LauncherPool* pool = agent_->launcher_pool();
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(Eventually([&] { return pool->IdlePids().size() == 2; }));
  const std::vector<pid_t> ready = pool->IdlePids();
  v1::LeaseReply reply;
  ASSERT_TRUE(Lease(Request({{"CPU", 10000}}, {"/bin/sh", "-c", "echo pooled"}), &reply).ok());
  ASSERT_TRUE(reply.has_granted()) << reply.explanation();
  // The worker is a launcher that was waiting, not a fork of the agent.
  EXPECT_THAT(ready, ::testing::Contains(reply.granted().pid()));
  Watched watched = Watch(reply.granted().worker_id());
  EXPECT_EQ(watched.out, "pooled\n");
  EXPECT_EQ(watched.exit.exit_code(), 0);
  // A bad program is refused as clearly as on the fork path, and releases its lease.
  v1::LeaseReply bad;
  grpc::Status status = Lease(Request({{"CPU", 10000}}, {"no-such-program-anywhere"}), &bad);
  EXPECT_TRUE(!status.ok() || !bad.has_granted());
  EXPECT_THAT(status.error_message() + bad.explanation(), HasSubstr("no-such-program-anywhere"));
  EXPECT_TRUE(Eventually([&] { return agent_->state().Leases().empty(); }));
}

TEST_F(AgentServerTest, LauncherChoices) {
  AgentOptions options;
  options.state_dir = state_dir_;
  options.token = kToken;
  options.node_id = "n1";
  options.hardware_file = node_testing::ExampleHardware("cpu-only.yaml");
  options.environment =
      Environment(std::map<std::string, std::string, std::less<>>{{"PATH", "/usr/bin:/bin"}});
  // No launcher beside this test binary: said on stderr, and workers are forked.
  {
    auto agent = NodeAgentServer::Create(options);
    ASSERT_TRUE(agent.ok()) << agent.status();
    EXPECT_EQ((*agent)->launcher_pool(), nullptr);
    stub_ = v1::NodeAgent::NewStub(rpc::MakeChannel((*agent)->address(), kToken));
    v1::LeaseReply reply;
    ASSERT_TRUE(Lease(Request({{"CPU", 10000}}, {"/bin/sh", "-c", "echo forked"}), &reply).ok());
    ASSERT_TRUE(reply.has_granted()) << reply.explanation();
    EXPECT_EQ(Watch(reply.granted().worker_id()).out, "forked\n");
  }
  // No pool asked for.
  options.launcher = kLauncher;
  options.prestarted_workers = 0;
  {
    auto agent = NodeAgentServer::Create(options);
    ASSERT_TRUE(agent.ok()) << agent.status();
    EXPECT_EQ((*agent)->launcher_pool(), nullptr);
  }
  // A pool of 3.
  options.prestarted_workers = 3;
  {
    auto agent = NodeAgentServer::Create(options);
    ASSERT_TRUE(agent.ok()) << agent.status();
    ASSERT_NE((*agent)->launcher_pool(), nullptr);
    EXPECT_TRUE(Eventually([&] { return (*agent)->launcher_pool()->IdlePids().size() == 3; }));
  }
  // A launcher given by name must exist.
  options.launcher = state_dir_ + "/missing-launcher";
  auto missing = NodeAgentServer::Create(options);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("missing-launcher is not an executable file"));
}

TEST_F(AgentServerTest, UnknownWorkers) {
  StartAgent("cpu-only.yaml");
  grpc::ClientContext context;
  rpc::ConfigureClientContext(&context, kPatience);
  v1::KillWorkerRequest kill;
  kill.set_worker_id("nope");
  v1::KillWorkerResponse response;
  EXPECT_EQ(stub_->KillWorker(&context, kill, &response).error_code(), grpc::StatusCode::NOT_FOUND);
}

// --- A node id has one live agent ---

TEST_F(AgentServerTest, AnAgentWhoseNodeIdWentToAnotherLiveAgentStopsWithTheHeadsReason) {
  StartHead();
  StartAgent("cpu-only.yaml");
  ASSERT_TRUE(agent_->head_link()->refusal().ok());
  // While this agent was away, the head gave its node id to another agent, which is alive.
  {
    absl::MutexLock lock(&head_.mu);
    head_.known = false;
    head_.refuse_registration = "node n1 is already held by a live agent at 10.0.0.2:7000";
  }
  agent_->Wait();  // the agent shuts itself down
  const absl::Status refusal = agent_->head_link()->refusal();
  EXPECT_EQ(refusal.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(refusal.message()),
              HasSubstr("refused this agent: node n1 is already held by a live agent at "
                        "10.0.0.2:7000"));
  // It asked once and gave up: it does not keep knocking.
  absl::MutexLock lock(&head_.mu);
  EXPECT_EQ(head_.registrations.size(), 2u);
}

}  // namespace
}  // namespace tessera
