#include "hardware/node_labels.h"

#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "hardware/node_label_keys.h"

namespace tessera {

void AddDeploymentLabels(const Environment& env, LabelSet& labels,
                         std::vector<std::string>& warnings) {
  static constexpr std::pair<std::string_view, std::string_view> kSources[] = {
      {"TESSERA_NODE_MARKET_TYPE", labels::kMarketType},
      {"TESSERA_NODE_ZONE", labels::kAvailabilityZone},
      {"TESSERA_NODE_REGION", labels::kAvailabilityRegion},
      {"TESSERA_NODE_GROUP", labels::kNodeGroup},
  };
  for (const auto& [variable, key] : kSources) {
    auto value = env.Get(variable);
    if (!value.has_value()) continue;
    const std::string trimmed(Trim(*value));
    if (absl::Status valid = ValidateLabelValue(trimmed); !valid.ok()) {
      warnings.push_back(
          absl::StrCat(ToAbsl(variable), "=", Quote(*value), " ignored: ", valid.message()));
      continue;
    }
    labels[std::string(key)] = trimmed;
  }
}

}  // namespace tessera
