// libFuzzer target: the Prometheus text parser never crashes on any input, and whatever it
// accepts, written back with the renderer's escaping and value formatting, parses to the same
// samples (NaN equal to NaN).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "metrics/exposition.h"
#include "metrics/exposition_parser.h"

namespace {

using tessera::metrics::ParsedSample;

std::string Write(const std::vector<ParsedSample>& samples) {
  std::string out;
  for (const ParsedSample& sample : samples) {
    out += sample.name;
    out += '{';
    for (const auto& [name, value] : sample.labels) {
      out += name + "=\"" + tessera::metrics::EscapeLabelValue(value) + "\",";
    }
    out += "} " + tessera::metrics::FormatPrometheusValue(sample.value);
    if (sample.timestamp_ms.has_value()) out += " " + std::to_string(*sample.timestamp_ms);
    out += '\n';
  }
  return out;
}

bool SameValue(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = tessera::metrics::ParsePrometheusText(text);
  if (!parsed.ok()) return 0;
  const std::string written = Write(parsed->samples);
  auto again = tessera::metrics::ParsePrometheusText(written);
  bool same = again.ok() && again->samples.size() == parsed->samples.size();
  for (size_t i = 0; same && i < parsed->samples.size(); ++i) {
    const ParsedSample& a = parsed->samples[i];
    const ParsedSample& b = again->samples[i];
    same = a.name == b.name && a.labels == b.labels && SameValue(a.value, b.value) &&
           a.timestamp_ms == b.timestamp_ms;
  }
  if (!same) {
    std::fprintf(stderr, "round trip failed: wrote [%s] (%s)\n", written.c_str(),
                 again.ok() ? "different samples" : std::string(again.status().message()).c_str());
    std::abort();
  }
  return 0;
}
