// What the C++ API's integration suites share: one cluster per suite (a head and two node agents
// as processes: a CPU node "cpu1" and a node "gpu1" with 4 simulated GPUs), and this test binary
// initialized as the driver on it. The binary is also the workers' program: its main checks
// tessera::IsWorkerProcess() before anything else.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "integration/cluster_harness.h"
#include "tessera/tessera.h"

namespace tessera::testing {

inline constexpr absl::Duration kPatience = absl::Seconds(60);

// A suite whose tests share one cluster of `options`' nodes, with this binary initialized as
// its driver: call StartCluster from the suite's SetUpTestSuite.
class ApiClusterFixture : public ::testing::Test {
 protected:
  // `local_worker_streams`: InitOptions::local_worker_streams of the driver.
  static void StartCluster(const ClusterOptions& options, bool local_worker_streams = true) {
    auto cluster = TestCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = cluster->release();
    InitOptions init;
    init.state_dir = cluster_->state_dir();
    init.forward_worker_output = false;
    init.local_worker_streams = local_worker_streams;
    ASSERT_OK(Init(init));
  }
  static void TearDownTestSuite() {
    Shutdown();
    delete cluster_;
    cluster_ = nullptr;
  }
  static inline TestCluster* cluster_ = nullptr;
};

// The usual cluster: a CPU node "cpu1" of `kCpus` and "gpu1" with 4 simulated GPUs;
// `kMoreCpuNodes` adds CPU nodes "cpu2", "cpu3", ... of that size (the chaos tests need a node
// to lose).
template <int kCpus, int kMoreCpuNodes = 0>
class ApiClusterSuite : public ApiClusterFixture {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions options;
    options.nodes.push_back(NodeSpec{.id = "cpu1", .hardware_yaml = CpuHost(kCpus)});
    options.nodes.push_back(NodeSpec{.id = "gpu1", .hardware_yaml = GpuHost(4, 2)});
    for (int i = 0; i < kMoreCpuNodes; ++i) {
      options.nodes.push_back(
          NodeSpec{.id = "cpu" + std::to_string(i + 2), .hardware_yaml = CpuHost(kCpus)});
    }
    StartCluster(options);
  }
};

}  // namespace tessera::testing
