// Reads the Prometheus text format 0.0.4 back into samples: for tests of what an endpoint
// serves, and for the CLI to show another process's figures.
//
//   TESSERA_ASSIGN_OR_RETURN(ParsedExposition parsed, ParsePrometheusText(body));
//   std::optional<double> v = parsed.Value("tessera_tasks_finished_total", {{"outcome", "ok"}});
//
// Accepts what the format allows: blank lines; comments (only "# HELP name text" and
// "# TYPE name type" mean anything); blanks and tabs between tokens; a trailing comma in a
// label set; values as Go's ParseFloat reads them (decimal and exponent forms, Inf, +Inf,
// -Inf, NaN in any case; not hexadecimal); an optional int64 millisecond timestamp. Refuses,
// with "line L, column C: what" (1-based, in bytes): a name that breaks the name rules, an
// unknown escape in a label value (only \\ \" \n exist), text that is not UTF-8, a label named
// twice, the same series twice, a second HELP or TYPE for a name, a TYPE after that family's
// samples, an unknown type, and a last line without its "\n". Never crashes on any input.
//
// Pure; thread-safe; linear in the input.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::metrics {

struct ParsedSample {
  std::string name;                                         // as written: "x_bucket", "x_total"
  std::vector<std::pair<std::string, std::string>> labels;  // as written, unescaped
  double value = 0;
  std::optional<int64_t> timestamp_ms;
};

struct ParsedExposition {
  std::vector<ParsedSample> samples;         // in the order written
  std::map<std::string, std::string> help;   // by family name, unescaped
  std::map<std::string, std::string> types;  // by family name: "counter", "gauge", ...

  // The value of the sample named `name` whose labels are exactly `labels` (in any order);
  // nullopt when there is none.
  std::optional<double> Value(std::string_view name,
                              std::vector<std::pair<std::string, std::string>> labels = {}) const;
};

absl::StatusOr<ParsedExposition> ParsePrometheusText(std::string_view text);

// A value as the format writes it (see above); nullopt when `text` is not one.
std::optional<double> ParsePrometheusValue(std::string_view text);

}  // namespace tessera::metrics
