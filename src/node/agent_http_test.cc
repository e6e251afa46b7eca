// A real NodeAgentServer's HTTP endpoint, scraped over a socket: /metrics is valid Prometheus
// text (our parser, and promtool when installed) with the node's resources, its simulated GPUs
// and its object store; a leased GPU shows utilization and its worker is measured and counted;
// heartbeats to a fake head carry device samples and the registration the endpoint's address;
// agent.http is written and removed; the token is needed, on loopback too.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "metrics/exposition_parser.h"
#include "metrics/http_test_client.h"
#include "node/agent_server.h"
#include "node/agent_test_util.h"
#include "node/fake_head.h"
#include "rpc/auth.h"
#include "rpc/channel.h"
#include "rpc/server.h"
#include "tessera/v1/node_agent.grpc.pb.h"
#include "wire/proto_convert.h"

namespace tessera {
namespace {

using metrics::ParsedExposition;
using metrics_testing::HttpGet;
using metrics_testing::HttpReply;
using node_testing::Eventually;
using node_testing::kPatience;
using node_testing::kToken;
using Labels = std::vector<std::pair<std::string, std::string>>;

std::string ReadFile(const std::string& path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

// The port of a "host:port".
int PortOf(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

Labels Gpu(int index) {
  return {{"node", "n1"},
          {"family", "nvidia"},
          {"index", absl::StrCat(index)},
          {"type", "H100"},
          {"slice", ""}};
}

class AgentHttpTest : public node_testing::AgentWithHeadTest {
 protected:
  AgentOptions Options(std::string hardware) {
    AgentOptions options = AgentOptionsFor(std::move(hardware));
    options.environment = Environment({{"PATH", "/usr/bin:/bin"}, {"HOME", state_dir_}});
    options.telemetry_interval_ms = 20;
    return options;
  }

  absl::Status StartAgent(const AgentOptions& options) {
    auto agent = NodeAgentServer::Create(options);
    if (!agent.ok()) return agent.status();
    agent_ = std::move(*agent);
    return absl::OkStatus();
  }

  // GET /metrics from the agent's endpoint (on loopback, whatever it is bound to), with the
  // cluster token.
  HttpReply Get() { return GetWith(absl::StrCat("Authorization: Bearer ", kToken, "\r\n")); }
  HttpReply GetWith(std::string_view extra_headers) {
    auto reply = HttpGet("127.0.0.1", PortOf(agent_->http_address()), "/metrics", extra_headers);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? *std::move(reply) : HttpReply();
  }

  ParsedExposition Scrape() {
    HttpReply reply = Get();
    EXPECT_EQ(reply.status, 200) << reply.body;
    auto parsed = metrics::ParsePrometheusText(reply.body);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    return parsed.ok() ? *std::move(parsed) : ParsedExposition();
  }

  // Scrapes until `holds` is true of a scrape; that scrape (the last one when it never is).
  ParsedExposition ScrapeUntil(const std::function<bool(const ParsedExposition&)>& holds) {
    ParsedExposition scrape;
    EXPECT_TRUE(Eventually([&] {
      scrape = Scrape();
      return holds(scrape);
    }));
    return scrape;
  }

  v1::LeaseGrant Lease(std::string_view resources, std::vector<std::string> argv) {
    v1::LeaseRequest request;
    wire::ResourcesToProto(node_testing::Res(resources),
                           request.mutable_request()->mutable_resources());
    for (std::string& arg : argv) request.mutable_worker()->add_argv(std::move(arg));
    auto stub = v1::NodeAgent::NewStub(rpc::MakeChannel(agent_->address(), kToken));
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, kPatience);
    v1::LeaseReply reply;
    const grpc::Status status = stub->RequestLease(&context, request, &reply);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(reply.has_granted()) << reply.status() << ": " << reply.explanation();
    return reply.granted();
  }

  void Kill(const std::string& worker) {
    auto stub = v1::NodeAgent::NewStub(rpc::MakeChannel(agent_->address(), kToken));
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, kPatience);
    v1::KillWorkerRequest request;
    request.set_worker_id(worker);
    request.set_signal(9);
    v1::KillWorkerResponse response;
    const grpc::Status status = stub->KillWorker(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
};

TEST_F(AgentHttpTest, ServesMetricsWithResourcesDevicesAndTheStore) {
  AgentOptions options = Options("h100-sxm-8.yaml");
  options.object_store_bytes = uint64_t{8} << 20;
  ASSERT_TRUE(StartAgent(options).ok());
  ASSERT_TRUE(agent_->http_address().starts_with("127.0.0.1:")) << agent_->http_address();

  HttpReply reply = Get();
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_TRUE(reply.headers["content-type"].starts_with("text/plain; version=0.0.4"))
      << reply.headers["content-type"];
  // Every simulated GPU has device series once the sampler has read them.
  ParsedExposition scrape = ScrapeUntil([](const ParsedExposition& s) {
    return s.Value("tessera_device_utilization_ratio", Gpu(7)).has_value();
  });
  const Labels node = {{"node", "n1"}};
  EXPECT_EQ(scrape.Value("tessera_node_resource_capacity", {{"node", "n1"}, {"resource", "GPU"}}),
            8);
  EXPECT_EQ(scrape.Value("tessera_node_resource_reserved", {{"node", "n1"}, {"resource", "GPU"}}),
            0);
  EXPECT_EQ(scrape.Value("tessera_node_resource_used", {{"node", "n1"}, {"resource", "CPU"}}), 0)
      << "no worker runs";
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(scrape.Value("tessera_device_utilization_ratio", Gpu(i)), 0) << i;
    EXPECT_EQ(scrape.Value("tessera_device_memory_total_bytes", Gpu(i)), 80.0 * (1 << 30)) << i;
    EXPECT_TRUE(scrape.Value("tessera_device_power_watts", Gpu(i)).has_value()) << i;
    EXPECT_TRUE(scrape.Value("tessera_device_temperature_celsius", Gpu(i)).has_value()) << i;
  }
  EXPECT_EQ(scrape.Value("tessera_object_store_capacity_bytes", node), 8 << 20);
  EXPECT_EQ(scrape.Value("tessera_object_store_objects", node), 0);
  EXPECT_EQ(scrape.Value("tessera_leases_total", {{"node", "n1"}, {"outcome", "granted"}}), 0);
}

TEST_F(AgentHttpTest, TheMetricsPassPromtool) {
  const char* promtool = "/usr/bin/promtool";
  if (::access(promtool, X_OK) != 0) {
    GTEST_SKIP() << promtool << " is not installed (Debian package prometheus, scripts/setup)";
  }
  AgentOptions options = Options("h100-sxm-8.yaml");
  options.object_store_bytes = uint64_t{8} << 20;
  ASSERT_TRUE(StartAgent(options).ok());
  // A running worker, so that the worker families are in the text too.
  (void)Lease("GPU=1", {"/bin/sh", "-c", "exec sleep 600"});
  ScrapeUntil([&](const ParsedExposition& s) {
    return s.types.contains("tessera_device_utilization_ratio") &&
           s.types.contains("tessera_worker_memory_bytes");
  });
  const std::string text_file = state_dir_ + "/metrics.txt";
  std::ofstream(text_file) << Get().body;
  const std::string command = absl::StrCat(promtool, " check metrics < ", text_file, " > ",
                                           state_dir_, "/promtool.out 2>&1");
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << ReadFile(state_dir_ + "/promtool.out");
}

TEST_F(AgentHttpTest, ALeasedGpuShowsUtilizationAndItsWorkerIsMeasuredAndCounted) {
  ASSERT_TRUE(StartAgent(Options("h100-sxm-8.yaml")).ok());
  // A worker that spins, so its CPU time grows between the sampler's readings.
  const v1::LeaseGrant grant = Lease("GPU=1,CPU=1", {"/bin/sh", "-c", "while :; do :; done"});
  ASSERT_EQ(grant.allocation().devices_size(), 1);
  const int held = grant.allocation().devices(0).instances(0);  // no mask: instance = index
  const Labels worker = {{"node", "n1"}, {"worker", grant.worker_id()}, {"job", ""}};
  const Labels cpu = {{"node", "n1"}, {"resource", "CPU"}};

  ParsedExposition busy = ScrapeUntil([&](const ParsedExposition& s) {
    return s.Value("tessera_device_utilization_ratio", Gpu(held)).value_or(0) > 0 &&
           s.Value("tessera_node_resource_used", cpu).value_or(0) > 0;
  });
  for (int i = 0; i < 8; ++i) {
    if (i != held) {
      EXPECT_EQ(busy.Value("tessera_device_utilization_ratio", Gpu(i)), 0) << i;
    }
  }
  EXPECT_EQ(busy.Value("tessera_node_resource_reserved", {{"node", "n1"}, {"resource", "GPU"}}), 1);
  EXPECT_GT(busy.Value("tessera_worker_memory_bytes", worker).value_or(0), 0);
  EXPECT_GT(busy.Value("tessera_worker_cpu_seconds_total", worker).value_or(0), 0);
  EXPECT_EQ(busy.Value("tessera_leases_total", {{"node", "n1"}, {"outcome", "granted"}}), 1);
  EXPECT_EQ(busy.Value("tessera_workers_started_total", {{"node", "n1"}}), 1);
  EXPECT_EQ(busy.Value("tessera_workers_running", {{"node", "n1"}}), 1);

  Kill(grant.worker_id());
  ParsedExposition after = ScrapeUntil([&](const ParsedExposition& s) {
    return s.Value("tessera_workers_exited_total", {{"node", "n1"}, {"reason", "killed"}}) == 1 &&
           !s.Value("tessera_worker_memory_bytes", worker).has_value();
  });
  EXPECT_EQ(after.Value("tessera_workers_running", {{"node", "n1"}}), 0);
  EXPECT_EQ(after.Value("tessera_node_resource_reserved", {{"node", "n1"}, {"resource", "GPU"}}),
            0);
}

TEST_F(AgentHttpTest, TheRegistrationNamesTheEndpointAndHeartbeatsCarryDeviceSamples) {
  StartHead();
  ASSERT_TRUE(StartAgent(Options("h100-sxm-8.yaml")).ok());
  {
    absl::MutexLock lock(&head_.mu);
    ASSERT_FALSE(head_.registrations.empty());
    EXPECT_EQ(head_.registrations[0].node().http_address(), agent_->http_address());
  }
  // The latest heartbeat that carries samples.
  auto latest_samples = [&] {
    absl::MutexLock lock(&head_.mu);
    for (auto it = head_.heartbeats.rbegin(); it != head_.heartbeats.rend(); ++it) {
      if (it->device_samples_size() > 0) return *it;
    }
    return v1::HeartbeatRequest();
  };
  ASSERT_TRUE(Eventually([&] { return latest_samples().device_samples_size() == 8; }));
  std::set<int> indices;
  const v1::HeartbeatRequest heartbeat = latest_samples();
  for (const v1::DeviceSample& sample : heartbeat.device_samples()) {
    EXPECT_EQ(sample.resource(), "GPU");
    indices.insert(sample.index());
    EXPECT_GT(sample.time_ms(), 0);
    EXPECT_TRUE(sample.has_utilization());
    EXPECT_EQ(sample.utilization(), 0);
    EXPECT_EQ(sample.memory_total_bytes(), uint64_t{80} << 30);
    EXPECT_TRUE(sample.has_power_watts());
  }
  EXPECT_EQ(indices, (std::set<int>{0, 1, 2, 3, 4, 5, 6, 7}));

  const v1::LeaseGrant grant = Lease("GPU=1", {"/bin/sh", "-c", "exec sleep 600"});
  const int held = grant.allocation().devices(0).instances(0);
  EXPECT_TRUE(Eventually([&] {
    const v1::HeartbeatRequest latest = latest_samples();
    for (const v1::DeviceSample& sample : latest.device_samples()) {
      if (sample.index() == held && sample.utilization() > 0) return true;
    }
    return false;
  }));
}

TEST_F(AgentHttpTest, ANodeWithoutDevicesSendsNoSamples) {
  StartHead();
  ASSERT_TRUE(StartAgent(Options("cpu-only.yaml")).ok());
  ASSERT_TRUE(
      Eventually([&] { return agent_->telemetry().Latest().read_at != absl::InfinitePast(); }));
  size_t seen = 0;
  {
    absl::MutexLock lock(&head_.mu);
    seen = head_.heartbeats.size();
  }
  // A heartbeat sent after the first reading.
  ASSERT_TRUE(Eventually([&] {
    absl::MutexLock lock(&head_.mu);
    return head_.heartbeats.size() > seen + 1;
  }));
  absl::MutexLock lock(&head_.mu);
  EXPECT_EQ(head_.heartbeats.back().device_samples_size(), 0);
}

TEST_F(AgentHttpTest, AgentHttpHoldsTheAddressUntilShutdown) {
  ASSERT_TRUE(StartAgent(Options("cpu-only.yaml")).ok());
  const std::string file = state_dir_ + "/nodes/n1/agent.http";
  EXPECT_EQ(ReadFile(file), agent_->http_address() + "\n");
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  agent_->Shutdown();
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_FALSE(std::filesystem::exists(state_dir_ + "/nodes/n1/agent.address"));
}

TEST_F(AgentHttpTest, HttpPortMinusOneServesNothing) {
  StartHead();
  AgentOptions options = Options("cpu-only.yaml");
  options.http_port = -1;
  ASSERT_TRUE(StartAgent(options).ok());
  EXPECT_EQ(agent_->http_address(), "");
  EXPECT_FALSE(std::filesystem::exists(state_dir_ + "/nodes/n1/agent.http"));
  absl::MutexLock lock(&head_.mu);
  ASSERT_FALSE(head_.registrations.empty());
  EXPECT_EQ(head_.registrations[0].node().http_address(), "");
}

TEST_F(AgentHttpTest, BoundBeyondLoopbackTheClusterTokenIsRequired) {
  AgentOptions options = Options("cpu-only.yaml");
  options.bind = "0.0.0.0";
  if (absl::Status started = StartAgent(options); !started.ok()) {
    GTEST_SKIP() << "cannot bind 0.0.0.0 here: " << started;
  }
  EXPECT_EQ(GetWith("").status, 401);
  EXPECT_EQ(GetWith("Authorization: Bearer wrong-token-0123456789\r\n").status, 401);
  HttpReply reply = Get();
  EXPECT_EQ(reply.status, 200);
  EXPECT_TRUE(metrics::ParsePrometheusText(reply.body).ok());
  EXPECT_FALSE(absl::StrContains(reply.body, kToken));
}

// Every local user reaches a loopback port: the token is asked for there too.
TEST_F(AgentHttpTest, OnLoopbackTooTheClusterTokenIsRequired) {
  ASSERT_TRUE(StartAgent(Options("cpu-only.yaml")).ok());
  HttpReply refused = GetWith("");
  EXPECT_EQ(refused.status, 401);
  EXPECT_FALSE(absl::StrContains(refused.body, "tessera_"));
  EXPECT_EQ(GetWith("Authorization: Bearer wrong-token-0123456789\r\n").status, 401);
  EXPECT_EQ(Get().status, 200);
}

TEST_F(AgentHttpTest, AnHttpPortOutOfRangeIsRefused) {
  AgentOptions options = Options("cpu-only.yaml");
  options.http_port = 70000;
  const absl::Status status = StartAgent(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "HTTP port 70000")) << status;
}

}  // namespace
}  // namespace tessera
