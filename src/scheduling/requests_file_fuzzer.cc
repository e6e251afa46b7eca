// Feeds arbitrary text to the requests-file parser and, when it parses, replays it through the
// Simulation `tessera schedule` runs (the reservation engine, the task scheduler, the bundle
// ledger) on the example clusters' nodes: the parser returns events or a one-line error, and the
// replay never crashes, refuses only in one line, and never uses more of a resource than the
// alive nodes have, nor less than nothing. Seeds: examples/requests (scripts/fuzz).
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "scheduling/cluster_file.h"
#include "scheduling/requests_file.h"
#include "scheduling/simulation.h"

namespace {

// The nodes of examples/clusters/mixed.yaml, and small.yaml's whose ids mixed.yaml lacks, so
// every example requests file replays.
const std::vector<tessera::ClusterNode>& Nodes() {
  static const std::vector<tessera::ClusterNode> nodes = [] {
    std::vector<tessera::ClusterNode> all;
    std::set<std::string> ids;
    for (const char* name : {"mixed", "small"}) {
      const std::string path =
          std::string(TESSERA_SOURCE_DIR) + "/examples/clusters/" + name + ".yaml";
      std::ifstream in(path);
      std::stringstream text;
      text << in.rdbuf();
      auto parsed = tessera::ParseClusterFile(text.str(), path);
      if (!parsed.ok()) __builtin_trap();  // the examples parse (a CLI test runs them)
      for (tessera::ClusterNode& node : *parsed) {
        if (ids.insert(node.id).second) all.push_back(std::move(node));
      }
    }
    return all;
  }();
  return nodes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::set<std::string> ids;
  for (const tessera::ClusterNode& node : Nodes()) ids.insert(node.id);
  auto events = tessera::ParseRequestsFile(text, "fuzz.yaml", ids);
  if (!events.ok()) {
    if (events.status().message().find('\n') != std::string_view::npos) __builtin_trap();
    return 0;
  }
  tessera::Simulation simulation(tessera::SchedulerOptions{});
  if (!simulation.AddNodes(Nodes()).ok()) __builtin_trap();
  for (const tessera::SimulatedEvent& event : *events) {
    auto outcome = simulation.Apply(event);
    if (!outcome.ok()) {
      if (outcome.status().message().find('\n') != std::string_view::npos) __builtin_trap();
      return 0;
    }
    for (const auto& [resource, use] : simulation.Utilization()) {
      const auto& [used, total] = use;
      if (used.raw() < 0 || used.raw() > total.raw()) __builtin_trap();
    }
  }
  return 0;
}
