#include "metrics/relayed_families.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "metrics/metric_names.h"

namespace tessera::metrics {
namespace {

using LabelMap = std::map<std::string, std::string>;
using ValuesOf = std::function<std::vector<std::string>(const LabelMap&)>;

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// Counts above 2^53 are not exact as the float64 the text carries.
constexpr double kMaxExactCount = 9007199254740992.0;

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool IsHistogramLike(const std::string& type) { return type == "histogram" || type == "summary"; }

// The family a sample belongs to, and which part of it: "" a counter's or gauge's value (or a
// sample named as a histogram or summary itself), else "_bucket", "_sum" or "_count".
struct Owner {
  std::string family;
  std::string part;
};

std::optional<Owner> OwnerOf(const std::string& sample,
                             const std::map<std::string, std::string>& types) {
  auto exact = types.find(sample);
  if (exact != types.end() && !IsHistogramLike(exact->second)) return Owner{sample, ""};
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    if (!EndsWith(sample, suffix)) continue;
    std::string stem = sample.substr(0, sample.size() - std::string_view(suffix).size());
    auto it = types.find(stem);
    if (it != types.end() && IsHistogramLike(it->second)) return Owner{std::move(stem), suffix};
  }
  if (exact != types.end()) return Owner{sample, ""};
  return std::nullopt;
}

// One histogram series as read.
struct HistogramParts {
  std::map<double, double> buckets;  // by bound (le), +Inf included
  std::optional<double> sum;
  std::optional<double> count;
};

// A family while its samples are read.
struct Reading {
  MetricType type = MetricType::kGauge;
  std::map<LabelMap, double> values;         // a counter's or gauge's series
  std::map<LabelMap, HistogramParts> parts;  // a histogram's series (labels without le)
  std::string problem;                       // the first one; the family is left out
};

void Fail(Reading& family, std::string why) {
  if (family.problem.empty()) family.problem = std::move(why);
}

void AddSample(Reading& family, const std::string& part, const ParsedSample& sample) {
  LabelMap labels(sample.labels.begin(), sample.labels.end());
  if (family.type != MetricType::kHistogram) {
    // The parser refuses a series given twice, so each label set comes once.
    family.values.emplace(std::move(labels), sample.value);
    return;
  }
  if (part.empty()) return Fail(family, "a sample is named as the histogram itself");
  if (part == "_sum") {
    family.parts[labels].sum = sample.value;
    return;
  }
  if (part == "_count") {
    family.parts[labels].count = sample.value;
    return;
  }
  auto le = labels.find("le");
  if (le == labels.end()) return Fail(family, "a bucket has no le label");
  const std::optional<double> bound = ParsePrometheusValue(le->second);
  if (!bound.has_value() || std::isnan(*bound)) {
    return Fail(family, absl::StrCat("a bucket's le ", Quote(le->second), " is not a number"));
  }
  labels.erase(le);
  if (!family.parts[labels].buckets.emplace(*bound, sample.value).second) {
    return Fail(family, absl::StrCat("a series has two buckets with le ", *bound));
  }
}

absl::StatusOr<uint64_t> WholeCount(double value) {
  if (!(value >= 0) || value > kMaxExactCount || value != std::trunc(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a count ", value, " is not a whole number from 0 to 2^53"));
  }
  return static_cast<uint64_t>(value);
}

// A histogram's series and bounds from its parts (the counts are checked to be cumulative by
// CheckFamilySnapshot afterwards).
absl::Status FinishHistogram(const Reading& family, const ValuesOf& values_of,
                             FamilySnapshot& out) {
  std::optional<std::vector<double>> bounds;
  for (const auto& [labels, parts] : family.parts) {
    if (!parts.count.has_value() || !parts.sum.has_value()) {
      return absl::InvalidArgumentError("a series lacks its _count or its _sum");
    }
    auto inf = parts.buckets.find(kInfinity);
    if (inf == parts.buckets.end()) {
      return absl::InvalidArgumentError("a series has no +Inf bucket");
    }
    if (*parts.count != inf->second) {
      return absl::InvalidArgumentError("a series' _count differs from its +Inf bucket");
    }
    SeriesSnapshot series;
    series.label_values = values_of(labels);
    series.sum = *parts.sum;
    std::vector<double> own;
    for (const auto& [bound, value] : parts.buckets) {  // ascending: +Inf last
      TESSERA_ASSIGN_OR_RETURN(uint64_t count, WholeCount(value));
      if (bound != kInfinity) own.push_back(bound);
      series.cumulative_counts.push_back(count);
    }
    if (!bounds.has_value()) {
      bounds = std::move(own);
    } else if (*bounds != own) {
      return absl::InvalidArgumentError("its series have different bucket bounds");
    }
    out.series.push_back(std::move(series));
  }
  out.bucket_bounds = bounds.value_or(std::vector<double>());
  return absl::OkStatus();
}

absl::StatusOr<FamilySnapshot> Finish(const std::string& name, const Reading& family,
                                      const std::map<std::string, std::string>& help) {
  if (!family.problem.empty()) return absl::InvalidArgumentError(family.problem);
  FamilySnapshot out;
  out.name = name;
  auto text = help.find(name);
  out.help = text != help.end() && !text->second.empty() ? text->second : name;
  out.type = family.type;
  std::set<std::string> names;
  for (const auto& [labels, value] : family.values) {
    for (const auto& [label, unused] : labels) names.insert(label);
  }
  for (const auto& [labels, parts] : family.parts) {
    for (const auto& [label, unused] : labels) names.insert(label);
  }
  out.label_names.assign(names.begin(), names.end());
  const ValuesOf values_of = [&out](const LabelMap& labels) {
    std::vector<std::string> values;
    values.reserve(out.label_names.size());
    for (const std::string& label : out.label_names) {
      auto it = labels.find(label);
      values.push_back(it == labels.end() ? std::string() : it->second);
    }
    return values;
  };
  if (family.type == MetricType::kHistogram) {
    TESSERA_RETURN_IF_ERROR(FinishHistogram(family, values_of, out));
  } else {
    for (const auto& [labels, value] : family.values) {
      SeriesSnapshot series;
      series.label_values = values_of(labels);
      series.value = value;
      out.series.push_back(std::move(series));
    }
  }
  SortAndDedupeSeries(out.series);
  TESSERA_RETURN_IF_ERROR(CheckFamilySnapshot(out));
  return out;
}

// `from`'s series added to `into`'s, over the union of their label names (byte order).
void MergeInto(FamilySnapshot& into, const FamilySnapshot& from) {
  std::set<std::string> names(into.label_names.begin(), into.label_names.end());
  names.insert(from.label_names.begin(), from.label_names.end());
  const std::vector<std::string> all(names.begin(), names.end());
  auto remap = [&all](const std::vector<std::string>& own, SeriesSnapshot series) {
    std::vector<std::string> values(all.size());
    for (size_t i = 0; i < own.size() && i < series.label_values.size(); ++i) {
      const size_t at = std::lower_bound(all.begin(), all.end(), own[i]) - all.begin();
      values[at] = std::move(series.label_values[i]);
    }
    series.label_values = std::move(values);
    return series;
  };
  std::vector<SeriesSnapshot> series;
  series.reserve(into.series.size() + from.series.size());
  for (const SeriesSnapshot& s : into.series) series.push_back(remap(into.label_names, s));
  for (const SeriesSnapshot& s : from.series) series.push_back(remap(from.label_names, s));
  into.label_names = all;
  into.series = std::move(series);
}

}  // namespace

RelayedFamilies FamiliesOfExposition(const ParsedExposition& parsed) {
  RelayedFamilies out;
  std::map<std::string, Reading> reading;
  std::set<std::string> untyped;
  for (const ParsedSample& sample : parsed.samples) {
    std::optional<Owner> owner = OwnerOf(sample.name, parsed.types);
    if (!owner.has_value()) {
      untyped.insert(sample.name);
      continue;
    }
    auto [it, fresh] = reading.try_emplace(owner->family);
    Reading& family = it->second;
    if (fresh) {
      const std::string& type = parsed.types.at(owner->family);
      if (type == "counter") {
        family.type = MetricType::kCounter;
      } else if (type == "gauge") {
        family.type = MetricType::kGauge;
      } else if (type == "histogram") {
        family.type = MetricType::kHistogram;
      } else {
        Fail(family, absl::StrCat(type, " families are not relayed"));
      }
    }
    if (family.problem.empty()) AddSample(family, owner->part, sample);
  }
  for (const std::string& name : untyped) {
    out.dropped.push_back(absl::StrCat(name, ": no TYPE line names its family"));
  }
  for (const auto& [name, family] : reading) {
    absl::StatusOr<FamilySnapshot> snapshot = Finish(name, family, parsed.help);
    if (snapshot.ok()) {
      out.families.push_back(*std::move(snapshot));
    } else {
      out.dropped.push_back(absl::StrCat(name, ": ", snapshot.status().message()));
    }
  }
  return out;
}

absl::Status SetLabel(std::vector<FamilySnapshot>& families, std::string_view name,
                      std::string_view value) {
  TESSERA_RETURN_IF_ERROR(ValidateLabelName(name));
  if (name == "le" || name == "quantile") {
    return absl::InvalidArgumentError(
        absl::StrCat("label name ", Quote(name), " is reserved for buckets and quantiles"));
  }
  for (FamilySnapshot& family : families) {
    std::vector<std::string>& names = family.label_names;
    auto found = std::find(names.begin(), names.end(), name);
    if (found != names.end()) {
      const size_t at = found - names.begin();
      for (SeriesSnapshot& series : family.series) {
        if (at < series.label_values.size()) series.label_values[at] = std::string(value);
      }
    } else {
      auto after = std::find_if(names.begin(), names.end(), [name](const std::string& other) {
        return std::string_view(other) > name;
      });
      const size_t at = after - names.begin();
      names.insert(after, std::string(name));
      for (SeriesSnapshot& series : family.series) {
        if (at <= series.label_values.size()) {
          series.label_values.insert(series.label_values.begin() + at, std::string(value));
        }
      }
    }
    SortAndDedupeSeries(family.series);
  }
  return absl::OkStatus();
}

std::vector<FamilySnapshot> MergeFamilies(const std::vector<std::vector<FamilySnapshot>>& sources,
                                          std::vector<std::string>* dropped) {
  std::map<std::string, FamilySnapshot> merged;
  for (const std::vector<FamilySnapshot>& source : sources) {
    for (const FamilySnapshot& family : source) {
      auto [it, fresh] = merged.try_emplace(family.name, family);
      if (fresh) continue;
      FamilySnapshot& into = it->second;
      if (into.type != family.type || into.bucket_bounds != family.bucket_bounds) {
        if (dropped != nullptr) {
          dropped->push_back(absl::StrCat(
              family.name, ": an earlier source has it with another type or other buckets"));
        }
        continue;
      }
      MergeInto(into, family);
    }
  }
  std::vector<FamilySnapshot> out;
  out.reserve(merged.size());
  for (auto& [name, family] : merged) {
    SortAndDedupeSeries(family.series);
    out.push_back(std::move(family));
  }
  return out;
}

}  // namespace tessera::metrics
