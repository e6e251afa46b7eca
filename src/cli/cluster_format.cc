#include "cli/cluster_format.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/string_util.h"
#include "resources/byte_size.h"
#include "resources/quantity.h"
#include "resources/resource_set.h"
#include "rpc/state_names.h"

namespace tessera::cli {

std::string AmountText(std::string_view resource, int64_t raw) {
  if (raw < 0) return absl::StrCat(raw, " (raw)");
  const Quantity q = Quantity::FromRaw(raw);
  if (IsByteResource(resource) && q.IsInteger()) {
    return FormatBytes(static_cast<uint64_t>(q.WholePart()));
  }
  return FormatResourceAmount(resource, q);
}

std::string MeasuredUseText(const tessera::v1::ResourceUsage& usage) {
  if (!usage.has_measured()) return "";
  if (usage.measured_devices() > 0) {
    const double mean = usage.measured() / usage.measured_devices();
    return absl::StrFormat("  busy %.0f%% of %d measured", 100 * mean, usage.measured_devices());
  }
  if (IsByteResource(usage.resource())) {
    return absl::StrCat("  in use ",
                        FormatBytes(static_cast<uint64_t>(std::max(0.0, usage.measured()))));
  }
  return absl::StrFormat("  in use %.2f", usage.measured());
}

std::string ResourcesText(const tessera::v1::Resources& resources) {
  const std::map<std::string, int64_t> sorted(resources.raw().begin(), resources.raw().end());
  std::vector<std::string> parts;
  for (const auto& [name, raw] : sorted) {
    if (raw == 0) continue;
    parts.push_back(absl::StrCat(name, "=",
                                 raw < 0 ? absl::StrCat(raw, " (raw)")
                                         : FormatResourceAmount(name, Quantity::FromRaw(raw))));
  }
  return absl::StrJoin(parts, ",");
}

std::string UsageText(const tessera::v1::Resources& available,
                      const tessera::v1::Resources& total) {
  const std::map<std::string, int64_t> sorted(total.raw().begin(), total.raw().end());
  std::vector<std::string> parts;
  for (const auto& [name, total_raw] : sorted) {
    if (total_raw == 0) continue;
    const auto it = available.raw().find(name);
    const int64_t free_raw = it == available.raw().end() ? 0 : it->second;
    parts.push_back(absl::StrCat(name, " ", AmountText(name, total_raw - free_raw), "/",
                                 AmountText(name, total_raw)));
  }
  return absl::StrJoin(parts, ", ");
}

std::string DevicesText(const tessera::v1::Allocation& allocation) {
  std::vector<std::string> parts;
  for (const tessera::v1::DeviceGrant& grant : allocation.devices()) {
    std::vector<std::string> ids;
    for (int i = 0; i < grant.instances_size(); ++i) {
      const int64_t raw = i < grant.amounts_raw_size() ? grant.amounts_raw(i) : Quantity::kScale;
      ids.push_back(raw == Quantity::kScale ? absl::StrCat(grant.instances(i))
                                            : absl::StrCat(grant.instances(i), " (",
                                                           Quantity::FromRaw(raw).ToString(), ")"));
    }
    parts.push_back(absl::StrCat(grant.resource(), " ", absl::StrJoin(ids, ",")));
  }
  return absl::StrJoin(parts, "; ");
}

std::string LabelsText(const google::protobuf::Map<std::string, std::string>& labels) {
  const std::map<std::string, std::string> sorted(labels.begin(), labels.end());
  return absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

std::vector<std::string> SplitSemicolons(std::string_view text) {
  std::vector<std::string> pieces;
  if (Trim(text).empty()) return pieces;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(';', start);
    pieces.emplace_back(
        Trim(text.substr(start, end == std::string_view::npos ? text.npos : end - start)));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return pieces;
}

}  // namespace tessera::cli
