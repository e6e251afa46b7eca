// A real NodeAgentServer probing the H100 fixture tree, its kernel log a file the test writes
// /dev/kmsg records into, reporting to a fake head: a worker killed while an Xid record for its
// GPU appears gets an exit reason naming the Xid; a worker on another GPU does not.
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "node/agent_server.h"
#include "node/fake_head.h"
#include "rpc/auth.h"
#include "rpc/channel.h"
#include "tessera/v1/node_agent.grpc.pb.h"

namespace tessera {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

using node_testing::kPatience;
using node_testing::kToken;

class AgentDeviceErrorsTest : public node_testing::AgentWithHeadTest {
 protected:
  void SetUp() override {
    AgentWithHeadTest::SetUp();
    StartHead();
    kmsg_ = state_dir_ + "/kmsg";
    std::ofstream(kmsg_) << "6,1,1,-;a record from before the agent started\n";
    AgentOptions options = AgentOptionsFor("h100-sxm-8.yaml");
    options.hardware_file.reset();  // probe the fixture tree instead
    options.sysroot = std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/hardware/h100-sxm-8";
    options.environment =
        Environment(std::map<std::string, std::string, std::less<>>{{"PATH", "/usr/bin:/bin"}});
    options.device_errors.kernel_log = kmsg_;
    auto agent = NodeAgentServer::Create(options);
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = std::move(*agent);
    stub_ = v1::NodeAgent::NewStub(rpc::MakeChannel(agent_->address(), kToken));
  }

  struct Sleeper {
    std::string worker;
    Device gpu;
  };
  // A worker holding one GPU, sleeping until it is killed.
  Sleeper SleeperOnOneGpu() {
    v1::LeaseRequest request;
    (*request.mutable_request()->mutable_resources()->mutable_raw())["GPU"] = 10000;
    request.mutable_worker()->add_argv("/bin/sleep");
    request.mutable_worker()->add_argv("1000");
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, kPatience);
    v1::LeaseReply reply;
    EXPECT_TRUE(stub_->RequestLease(&context, request, &reply).ok());
    EXPECT_TRUE(reply.has_granted()) << reply.explanation();
    const int instance = reply.granted().allocation().devices(0).instances(0);
    return {reply.granted().worker_id(),
            agent_->state().hardware().VisibleFamilies()[0].visible[instance]};
  }

  void Kill(const std::string& worker) {
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, kPatience);
    v1::KillWorkerRequest kill;
    kill.set_worker_id(worker);
    v1::KillWorkerResponse response;
    ASSERT_TRUE(stub_->KillWorker(&context, kill, &response).ok());
  }

  v1::WorkerExit ExitOf(const std::string& worker) {
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, kPatience);
    v1::WatchWorkerRequest request;
    request.set_worker_id(worker);
    auto reader = stub_->WatchWorker(&context, request);
    v1::WorkerEvent event;
    v1::WorkerExit exit;
    while (reader->Read(&event)) {
      if (event.has_exit()) exit = event.exit();
    }
    EXPECT_TRUE(reader->Finish().ok());
    return exit;
  }

  std::string kmsg_;
  std::unique_ptr<v1::NodeAgent::Stub> stub_;
};

TEST_F(AgentDeviceErrorsTest, AWorkerKilledAsItsGpuFaultsHearsTheXidAndOthersDoNot) {
  const Sleeper faulty = SleeperOnOneGpu();
  const Sleeper healthy = SleeperOnOneGpu();
  ASSERT_FALSE(faulty.gpu.pci_bus_id.empty());
  ASSERT_NE(faulty.gpu.pci_bus_id, healthy.gpu.pci_bus_id);
  // The driver's record for the first worker's GPU, as /dev/kmsg gives it.
  const std::string& bus = faulty.gpu.pci_bus_id;
  std::ofstream(kmsg_, std::ios::app)
      << "3,2,5000000,-;NVRM: Xid (PCI:" << bus.substr(0, bus.rfind('.'))
      << "): 79, pid=4242, name=sleep, GPU has fallen off the bus.\n";
  Kill(faulty.worker);
  Kill(healthy.worker);
  const v1::WorkerExit faulted = ExitOf(faulty.worker);
  EXPECT_THAT(faulted.reason(),
              StartsWith("killed by signal 15 (SIGTERM), after a KillWorker request"));
  EXPECT_THAT(faulted.reason(),
              EndsWith(absl::StrCat("; device messages: GPU ", faulty.gpu.index, " (", bus,
                                    "): Xid 79, GPU has fallen off the bus")));
  const v1::WorkerExit spared = ExitOf(healthy.worker);
  EXPECT_THAT(spared.reason(), HasSubstr("SIGTERM"));
  EXPECT_THAT(spared.reason(), Not(HasSubstr("device messages")));
}

}  // namespace
}  // namespace tessera
