#include "serve_runtime/serve_metrics_json.h"

#include <cmath>
#include <string>
#include <string_view>

namespace tessera::serve {
namespace {

constexpr std::string_view kServePrefixes[] = {"ray_serve_", "ray_vllm_", "tessera_serve_"};

bool IsServeFamily(const std::string& name) {
  for (std::string_view prefix : kServePrefixes) {
    if (name.compare(0, prefix.size(), prefix) == 0) return true;
  }
  return false;
}

nlohmann::ordered_json Number(double value) {
  return std::isfinite(value) ? nlohmann::ordered_json(value) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json SeriesJson(const metrics::FamilySnapshot& family,
                                  const metrics::SeriesSnapshot& series) {
  nlohmann::ordered_json labels = nlohmann::ordered_json::object();
  for (size_t i = 0; i < family.label_names.size() && i < series.label_values.size(); ++i) {
    labels[family.label_names[i]] = series.label_values[i];
  }
  nlohmann::ordered_json out = {{"labels", std::move(labels)}};
  if (family.type != metrics::MetricType::kHistogram) {
    out["value"] = Number(series.value);
    return out;
  }
  out["count"] = series.cumulative_counts.empty() ? 0 : series.cumulative_counts.back();
  out["sum"] = Number(series.sum);
  nlohmann::ordered_json bounds = nlohmann::ordered_json::array();
  for (double bound : family.bucket_bounds) bounds.push_back(Number(bound));
  out["bounds"] = std::move(bounds);
  out["counts"] = series.cumulative_counts;
  return out;
}

}  // namespace

nlohmann::ordered_json ServeMetricsJson(const std::vector<metrics::FamilySnapshot>& families) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const metrics::FamilySnapshot& family : families) {
    if (!IsServeFamily(family.name)) continue;
    nlohmann::ordered_json series = nlohmann::ordered_json::array();
    for (const metrics::SeriesSnapshot& one : family.series) {
      series.push_back(SeriesJson(family, one));
    }
    out.push_back({{"name", family.name},
                   {"type", std::string(metrics::MetricTypeName(family.type))},
                   {"help", family.help},
                   {"series", std::move(series)}});
  }
  return {{"families", std::move(out)}};
}

}  // namespace tessera::serve
