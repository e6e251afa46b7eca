// A scenario replayed through the simulator and through a real local cluster gives the same
// placements: tests/fixtures/scheduling/replay_requests.yaml on replay_cluster.yaml, once with
// `tessera schedule --json`, once as `tessera pg` / `tessera slice` commands against a head and
// one node agent per node of the file (registered in file order, as the simulator adds them).
// Every group and slice must land on the same nodes with the same device instances, and what
// cannot be placed must be explained alike.
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/cluster_harness.h"
#include "nlohmann/json.hpp"
#include "scheduling/cluster_file.h"
#include "scheduling/requests_file.h"

namespace tessera::testing {
namespace {

using Json = nlohmann::json;

const std::string kFixtures = std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/scheduling/";

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// "a-0 GPU:1,2" per bundle or host, in order: where it is and which devices it holds.
std::string Where(const std::string& node, const std::map<std::string, std::vector<int>>& devices) {
  std::vector<std::string> parts = {node};
  for (const auto& [resource, instances] : devices) {
    parts.push_back(absl::StrCat(resource, ":", absl::StrJoin(instances, ",")));
  }
  return absl::StrJoin(parts, " ");
}

// From the simulator's JSON: a bundle's or slice host's {node, devices: {GPU: [{instance}]}}.
std::string SimulatedWhere(const Json& placed) {
  std::map<std::string, std::vector<int>> devices;
  if (placed.contains("devices")) {
    for (const auto& [resource, grants] : placed["devices"].items()) {
      for (const Json& g : grants) devices[resource].push_back(g["instance"].get<int>());
    }
  }
  return Where(placed["node"].get<std::string>(), devices);
}

std::string RealWhere(const std::string& node, const v1::Allocation& allocation) {
  std::map<std::string, std::vector<int>> devices;
  for (const v1::DeviceGrant& g : allocation.devices()) {
    for (int i : g.instances()) devices[g.resource()].push_back(i);
  }
  return Where(node, devices);
}

// The `tessera` command that does what the event does on a running cluster.
std::vector<std::string> Command(const SimulatedEvent& e, bool wait) {
  std::vector<std::string> args;
  switch (e.kind) {
    case SimulatedEventKind::kCreatePlacementGroup: {
      const PlacementGroupSpec& g = e.group;
      std::vector<std::string> bundles, selectors;
      for (size_t i = 0; i < g.primary.bundles.size(); ++i) {
        bundles.push_back(g.primary.bundles[i].ToString());
        selectors.push_back(BundleSelector(g.primary, i).ToString());
      }
      args = {"pg",
              "create",
              g.name,
              "--strategy",
              std::string(PlacementStrategyName(g.strategy)),
              "--bundles",
              absl::StrJoin(bundles, ";")};
      if (!g.primary.selectors.empty()) {
        args.insert(args.end(), {"--bundle-selector", absl::StrJoin(selectors, ";")});
      }
      if (!g.same_label.empty()) args.insert(args.end(), {"--same-label", g.same_label});
      break;
    }
    case SimulatedEventKind::kRemovePlacementGroup: return {"pg", "remove", e.target};
    case SimulatedEventKind::kReserveSlices: {
      // The scenario keeps to what one alternative on the command line says.
      const DomainAlternative& alt = e.slices.alternatives.at(0);
      const std::string accelerator = alt.shape.has_value() ? alt.shape->accelerator_type : "";
      const std::string topology = alt.shape.has_value() ? alt.shape->topology.ToString() : "";
      args = {"slice",      "reserve", e.slices.name,  "--accelerator",        accelerator,
              "--topology", topology,  "--num-slices", absl::StrCat(alt.count)};
      if (!alt.domain.empty()) args.insert(args.end(), {"--domain", alt.domain});
      if (!alt.selector.empty()) args.insert(args.end(), {"--selector", alt.selector.ToString()});
      if (alt.sub_slice) args.push_back("--sub-slice");
      if (!alt.per_host.empty()) args.insert(args.end(), {"--per-host", alt.per_host.ToString()});
      break;
    }
    case SimulatedEventKind::kReleaseSlices: return {"slice", "release", e.target};
    default: return {};
  }
  if (wait) args.insert(args.end(), {"--wait", "30s"});
  args.push_back("--json");
  return args;
}

TEST(ScenarioReplayTest, TheSimulatorAndARealClusterPlaceEveryGroupAndSliceAlike) {
  const std::string cluster_path = kFixtures + "replay_cluster.yaml";
  const std::string requests_path = kFixtures + "replay_requests.yaml";
  auto nodes = ParseClusterFile(Read(cluster_path), cluster_path);
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  std::set<std::string> ids;
  for (const ClusterNode& n : *nodes) ids.insert(n.id);
  auto events = ParseRequestsFile(Read(requests_path), requests_path, ids);
  ASSERT_TRUE(events.ok()) << events.status();

  auto empty = TestCluster::Empty();
  ASSERT_OK(empty.status());
  const CliResult simulated =
      (*empty)->Cli({"schedule", "--cluster", cluster_path, "--requests", requests_path, "--json"});
  ASSERT_EQ(simulated.exit_code, 0) << Describe(simulated);
  const Json expected = Json::parse(simulated.out)["events"];
  ASSERT_EQ(expected.size(), events->size());

  ClusterOptions options;
  options.register_in_order = true;
  for (const ClusterNode& n : *nodes) {
    options.nodes.push_back({.id = n.id, .cluster_file = cluster_path});
  }
  auto cluster = TestCluster::Start(options);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;

  for (size_t i = 0; i < events->size(); ++i) {
    const SimulatedEvent& e = (*events)[i];
    const Json& sim = expected[i];
    const std::string what = absl::StrCat("event ", i + 1, " (", sim.dump(), ")");
    const bool placed = sim.value("status", "") == "PLACED";
    const std::vector<std::string> args = Command(e, placed);
    ASSERT_FALSE(args.empty()) << what << ": the replay has no command for this event";
    const CliResult r = c.Cli(args);
    ASSERT_EQ(r.exit_code, 0) << what << "\n" << Describe(r);
    if (e.kind == SimulatedEventKind::kCreatePlacementGroup) {
      auto groups = c.client().ListPlacementGroups();
      ASSERT_OK(groups.status());
      const v1::PlacementGroupInfo* group = nullptr;
      for (const auto& g : groups->groups()) {
        if (g.name() == e.group.name) group = &g;
      }
      ASSERT_NE(group, nullptr) << what;
      if (!placed) {
        EXPECT_NE(group->state(), v1::PLACEMENT_GROUP_STATE_CREATED) << what;
        EXPECT_THAT(group->explanation(), ::testing::HasSubstr(sim["explanation"])) << what;
        continue;
      }
      ASSERT_EQ(group->state(), v1::PLACEMENT_GROUP_STATE_CREATED) << what;
      std::vector<std::string> want, got;
      for (const Json& b : sim["bundles"]) want.push_back(SimulatedWhere(b));
      for (const auto& b : group->bundles()) got.push_back(RealWhere(b.node_id(), b.allocation()));
      EXPECT_EQ(got, want) << what;
    } else if (e.kind == SimulatedEventKind::kReserveSlices) {
      auto slices = c.client().ListSlices();
      ASSERT_OK(slices.status());
      const v1::SliceGroupInfo* slice = nullptr;
      for (const auto& g : slices->groups()) {
        if (g.name() == e.slices.name) slice = &g;
      }
      ASSERT_NE(slice, nullptr) << what;
      if (!placed) {
        EXPECT_NE(slice->state(), v1::SLICE_GROUP_STATE_RESERVED) << what;
        EXPECT_THAT(slice->explanation(), ::testing::HasSubstr(sim["explanation"])) << what;
        continue;
      }
      ASSERT_EQ(slice->state(), v1::SLICE_GROUP_STATE_RESERVED) << what;
      std::vector<std::string> want, got;
      for (const Json& h : sim["bundles"]) {
        want.push_back(absl::StrCat(h["domain"].get<std::string>(), " w", h["worker"].get<int>(),
                                    " ", SimulatedWhere(h)));
      }
      for (const auto& h : slice->hosts()) {
        got.push_back(absl::StrCat(h.domain(), " w", h.worker(), " ",
                                   RealWhere(h.node_id(), h.allocation())));
      }
      EXPECT_EQ(got, want) << what;
    }
  }
}

}  // namespace
}  // namespace tessera::testing
