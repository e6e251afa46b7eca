#include "metrics/exposition.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <system_error>

namespace tessera::metrics {
namespace {

// The renderer appends into one string: no temporary per label value or number.

void AppendEscapedLabelValue(std::string& out, std::string_view value) {
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
}

void AppendValue(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
    return;
  }
  if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
    return;
  }
  char buffer[64];
  std::to_chars_result result;
  if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0) {
    // Whole numbers below 2^53 (counts, bytes) print as integers, exact and easy to read.
    result = std::to_chars(buffer, buffer + sizeof(buffer), static_cast<int64_t>(value));
  } else {
    // Anything else: the shortest form that parses back to the same double.
    result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  }
  out.append(buffer, result.ptr);  // 64 bytes hold any double, so to_chars cannot fail
}

// `{name="value",...}` for a series, with `extra_name="extra_value"` last when given (a
// histogram's le). Nothing when there are no labels at all.
void AppendLabels(std::string& out, const std::vector<std::string>& names,
                  const std::vector<std::string>& values, std::string_view extra_name = {},
                  std::string_view extra_value = {}) {
  if (names.empty() && extra_name.empty()) return;
  out += '{';
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    out += names[i];
    out += "=\"";
    AppendEscapedLabelValue(out, values[i]);
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!names.empty()) out += ',';
    out += extra_name;
    out += "=\"";
    out += extra_value;  // a formatted number: nothing to escape
    out += '"';
  }
  out += '}';
}

void AppendSample(std::string& out, std::string_view name, std::string_view suffix,
                  const FamilySnapshot& family, const SeriesSnapshot& series, double value,
                  std::string_view extra_name = {}, std::string_view extra_value = {}) {
  out += name;
  out += suffix;
  AppendLabels(out, family.label_names, series.label_values, extra_name, extra_value);
  out += ' ';
  AppendValue(out, value);
  out += '\n';
}

}  // namespace

std::string FormatPrometheusValue(double value) {
  std::string out;
  AppendValue(out, value);
  return out;
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  AppendEscapedLabelValue(out, value);
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string RenderPrometheusText(const std::vector<FamilySnapshot>& families) {
  std::string out;
  for (const FamilySnapshot& family : families) {
    if (family.series.empty()) continue;
    out += "# HELP ";
    out += family.name;
    out += ' ';
    out += EscapeHelp(family.help);
    out += "\n# TYPE ";
    out += family.name;
    out += ' ';
    out += MetricTypeName(family.type);
    out += '\n';
    std::vector<std::string> les;  // the bounds as "le" values, formatted once per family
    for (double bound : family.bucket_bounds) les.push_back(FormatPrometheusValue(bound));
    for (const SeriesSnapshot& series : family.series) {
      if (family.type != MetricType::kHistogram) {
        AppendSample(out, family.name, "", family, series, series.value);
        continue;
      }
      const std::vector<uint64_t>& counts = series.cumulative_counts;
      const uint64_t count = counts.empty() ? 0 : counts.back();
      for (size_t i = 0; i < les.size() && i < counts.size(); ++i) {
        AppendSample(out, family.name, "_bucket", family, series, static_cast<double>(counts[i]),
                     "le", les[i]);
      }
      AppendSample(out, family.name, "_bucket", family, series, static_cast<double>(count), "le",
                   "+Inf");
      AppendSample(out, family.name, "_sum", family, series, series.sum);
      AppendSample(out, family.name, "_count", family, series, static_cast<double>(count));
    }
  }
  return out;
}

std::string RenderPrometheusText(const MetricRegistry& registry) {
  return RenderPrometheusText(registry.Collect());
}

}  // namespace tessera::metrics
