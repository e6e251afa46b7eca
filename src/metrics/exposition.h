// Renders collected metric families as the Prometheus text format 0.0.4, the body a /metrics
// endpoint serves with kPrometheusTextContentType:
//
//   # HELP tessera_task_duration_seconds Task execution time.
//   # TYPE tessera_task_duration_seconds histogram
//   tessera_task_duration_seconds_bucket{le="0.1"} 12
//   tessera_task_duration_seconds_bucket{le="+Inf"} 41
//   tessera_task_duration_seconds_sum 23.5
//   tessera_task_duration_seconds_count 41
//
// One HELP and one TYPE line per family, before its samples; families in the order given
// (MetricRegistry::Collect gives name order), series in theirs (label order); a histogram's
// buckets cumulative and increasing, "+Inf" last and equal to _count, then _sum and _count.
// HELP escapes \ and newline; label values escape \, " and newline. Whole values below 2^53
// print as integers ("1500000000"), others in the shortest form that parses back to the same
// float64 ("0.1", "1e+300"), and the specials as "+Inf", "-Inf", "NaN".
// Every line ends "\n". No timestamps.
//
// Pure functions; thread-safe; cost linear in the output (~100 bytes a series).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "metrics/metric_registry.h"

namespace tessera::metrics {

inline constexpr std::string_view kPrometheusTextContentType =
    "text/plain; version=0.0.4; charset=utf-8";

std::string RenderPrometheusText(const std::vector<FamilySnapshot>& families);
// Collects `registry` and renders it.
std::string RenderPrometheusText(const MetricRegistry& registry);

// The pieces, for code that writes the format by hand (the parser's fuzzer, tests).
std::string FormatPrometheusValue(double value);
std::string EscapeLabelValue(std::string_view value);
std::string EscapeHelp(std::string_view help);

}  // namespace tessera::metrics
