// FakeHead: the head as a node agent sees it, for the agent's tests: a HeadNodes service that
// records registrations and heartbeats and answers PickNode with what the test says (serve it with
// rpc::RpcServer), and AgentWithHeadTest, the fixture of the tests that run a real agent against
// it. FakeHead is thread-safe (its fields are guarded by `mu`); the fixture runs on gtest's thread.
// It serves no HeadActors: an agent's ActorWorkerExited reports get UNIMPLEMENTED.
#pragma once

#include <stdlib.h>  // mkdtemp

#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "node/agent_options.h"
#include "node/agent_server.h"
#include "node/agent_test_util.h"
#include "rpc/server.h"
#include "tessera/v1/head.grpc.pb.h"

namespace tessera::node_testing {

// The head as the agent sees it: records registrations and heartbeats; PickNode answers what the
// test says.
class FakeHead final : public v1::HeadNodes::Service {
 public:
  grpc::Status RegisterNode(grpc::ServerContext*, const v1::RegisterNodeRequest* request,
                            v1::RegisterNodeResponse* response) override {
    absl::MutexLock lock(&mu);
    registrations.push_back(*request);
    if (!refuse_registration.empty()) {
      return grpc::Status(grpc::StatusCode::ALREADY_EXISTS, refuse_registration);
    }
    response->set_heartbeat_interval_ms(20);
    response->set_dead_after_ms(1000);
    for (const v1::HeldBundle& b : release_on_register) *response->add_release() = b;
    release_on_register.clear();
    known = true;
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override {
    absl::MutexLock lock(&mu);
    heartbeats.push_back(*request);
    response->set_known(known);
    for (const std::string& driver : gone_drivers) response->add_gone_drivers(driver);
    return grpc::Status::OK;
  }
  grpc::Status PickNode(grpc::ServerContext*, const v1::PickNodeRequest* request,
                        v1::PickNodeResponse* response) override {
    absl::MutexLock lock(&mu);
    picks.push_back(*request);
    *response = pick_answer;
    return grpc::Status::OK;
  }

  absl::Mutex mu;
  std::vector<v1::RegisterNodeRequest> registrations ABSL_GUARDED_BY(mu);
  std::vector<v1::HeartbeatRequest> heartbeats ABSL_GUARDED_BY(mu);
  std::vector<v1::PickNodeRequest> picks ABSL_GUARDED_BY(mu);
  std::vector<v1::HeldBundle> release_on_register ABSL_GUARDED_BY(mu);
  v1::PickNodeResponse pick_answer ABSL_GUARDED_BY(mu);
  bool known ABSL_GUARDED_BY(mu) = true;
  // Named in every heartbeat response (HeartbeatResponse.gone_drivers).
  std::vector<std::string> gone_drivers ABSL_GUARDED_BY(mu);
  // Not empty: RegisterNode is refused with ALREADY_EXISTS and this message.
  std::string refuse_registration ABSL_GUARDED_BY(mu);
};

// The token the fake head, the agents and the tests' clients share.
inline constexpr char kToken[] = "test-token-0123456789";
// Agents in the test binaries have no launcher beside them; they get the built one.
inline constexpr char kLauncher[] = TESSERA_BINARY_DIR "/bin/tessera-launcher";

// A fresh state directory per test, a FakeHead that StartHead() serves on loopback (taking
// kToken), and the agent the test starts (`agent_`). TearDown destroys the agent before the head
// and then removes the directory.
class AgentWithHeadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "tessera-agent-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr) << "mkdtemp " << pattern;
    state_dir_ = pattern;
  }
  void TearDown() override {
    agent_.reset();
    head_server_.reset();
    std::error_code ec;
    std::filesystem::remove_all(state_dir_, ec);
  }

  void StartHead() {
    rpc::ServerOptions options;
    options.token = kToken;
    auto server = rpc::RpcServer::Start(options, {&head_});
    ASSERT_TRUE(server.ok()) << server.status();
    head_server_ = std::move(*server);
  }

  // An agent `node_id` over the example description `hardware` in this test's state directory,
  // with the built launcher and kToken, reporting to the fake head once StartHead() has run.
  // The environment and the rest are the test's to set.
  AgentOptions AgentOptionsFor(std::string hardware, std::string node_id = "n1") const {
    AgentOptions options;
    options.state_dir = state_dir_;
    options.token = kToken;
    options.node_id = std::move(node_id);
    options.hardware_file = ExampleHardware(hardware);
    options.launcher = kLauncher;
    if (head_server_ != nullptr) options.head_address = head_server_->address();
    return options;
  }

  std::string state_dir_;
  FakeHead head_;
  std::unique_ptr<rpc::RpcServer> head_server_;
  std::unique_ptr<NodeAgentServer> agent_;
};

}  // namespace tessera::node_testing
