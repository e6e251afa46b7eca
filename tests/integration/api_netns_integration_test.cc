// The C++ API across a real network interface: the driver here, a node agent and its workers in
// another network namespace behind a veth pair. Workers serve where their agent is reached
// (TESSERA_WORKER_BIND from the agent), so the driver reaches them; the driver serves its Owner
// service on its end of the link (InitOptions::bind_address), so they reach it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "integration/api_test_cluster.h"
#include "integration/cluster_harness.h"
#include "integration/network_namespaces.h"
#include "tessera/tessera.h"

namespace tessera::testing {
namespace {

std::string WhereAmI() {
  const char* bind = std::getenv("TESSERA_WORKER_BIND");
  return absl::StrCat(GetRuntimeContext().node_id, " ", bind == nullptr ? "<unset>" : bind);
}
TESSERA_REMOTE(WhereAmI);

std::string Filled(int64_t size) { return std::string(static_cast<size_t>(size), 'n'); }
TESSERA_REMOTE(Filled);

TEST(ApiNetnsTest, TasksAndStoredResultsReachAWorkerBehindAVethPair) {
  if (const std::string why = NetworkNamespaces::Why(); !why.empty()) GTEST_SKIP() << why;
  NetworkNamespaces namespaces;
  auto link = namespaces.Add(3);
  ASSERT_OK(link.status());
  ClusterOptions options;
  options.head_extra_args = {"--bind", "0.0.0.0"};
  auto cluster = TestCluster::Start(options);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;
  const std::string port = c.head_address().substr(c.head_address().rfind(':') + 1);
  ASSERT_OK(c.StartNode({.id = "far",
                         .hardware_yaml = CpuHost(2),
                         .head_address = absl::StrCat(link->host_ip, ":", port),
                         .extra_args = {"--bind", link->inside_ip},
                         .wrapper = {"ip", "netns", "exec", link->name}}));
  ASSERT_OK(c.WaitNodes({"far"}, v1::NODE_STATE_ALIVE));

  InitOptions init;
  init.state_dir = c.state_dir();
  init.bind_address = link->host_ip;
  init.forward_worker_output = false;
  ASSERT_OK(Init(init));
  auto where = Get(Task(WhereAmI).Remote(), kPatience);
  ASSERT_TRUE(where.ok()) << where.status();
  EXPECT_EQ(*where, absl::StrCat("far ", link->inside_ip));
  // Large enough for the node's store: the owner records where it lies and reads it there.
  auto big = Get(Task(Filled).Remote(int64_t{1} << 20), kPatience);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(*big, std::string(size_t{1} << 20, 'n'));
  Shutdown();
}

}  // namespace
}  // namespace tessera::testing
