// Helpers for the node agent's tests: agents over the example hardware descriptions.
// Thread-compatible test code.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "node/agent_options.h"
#include "node/agent_state.h"
#include "node/node_hardware_loader.h"
#include "resources/resource_set.h"

namespace tessera::node_testing {

// Generous: the machine may be loaded; the happy path never waits this long.
inline constexpr absl::Duration kPatience = absl::Seconds(60);

// Polls `done` until it holds or the patience runs out.
inline bool Eventually(const std::function<bool()>& done) {
  const absl::Time end = absl::Now() + kPatience;
  while (absl::Now() < end) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return done();
}

inline std::string ExampleHardware(std::string_view name) {
  return std::string(TESSERA_SOURCE_DIR) + "/examples/hardware/" + std::string(name);
}

inline ResourceSet Res(std::string_view text) { return *ParseResourceSet(text); }

// The node a simulated description makes, with an empty environment (no inherited masks).
inline LoadedNode LoadExample(std::string_view name, std::string node_id = "n1") {
  AgentOptions options;
  options.node_id = std::move(node_id);
  options.hardware_file = ExampleHardware(name);
  options.environment = Environment();
  auto loaded = LoadNodeHardware(options);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return *std::move(loaded);
}

inline std::unique_ptr<AgentState> MakeState(std::string_view example, std::string node_id = "n1") {
  LoadedNode loaded = LoadExample(example, std::move(node_id));
  auto state = AgentState::Create(loaded.id, std::move(loaded.hardware));
  EXPECT_TRUE(state.ok()) << state.status();
  return *std::move(state);
}

}  // namespace tessera::node_testing
