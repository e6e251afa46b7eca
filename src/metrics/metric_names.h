// What Prometheus accepts as a metric name, a label name and a label value (text format 0.0.4):
// the registry checks definitions with these, the exposition parser checks what it reads.
//
//   metric name  [a-zA-Z_:][a-zA-Z0-9_:]*, not starting "__" (reserved for Prometheus itself)
//   label name   [a-zA-Z_][a-zA-Z0-9_]*,   not starting "__"
//   label value  any valid UTF-8
//
// Pure functions; thread-safe; cost linear in the text's length.
#pragma once

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"

namespace tessera::metrics {

// InvalidArgument naming the name and the rule it breaks.
absl::Status ValidateMetricName(std::string_view name);
absl::Status ValidateLabelName(std::string_view name);

// True when `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF).
bool IsValidUtf8(std::string_view text);
// The offset of the first byte that is not part of well-formed UTF-8; npos when there is none.
size_t FirstInvalidUtf8(std::string_view text);

// True for the characters that may follow the first one of a metric name ([a-zA-Z0-9_:]).
bool IsMetricNameChar(char c);
// True for the characters that may follow the first one of a label name ([a-zA-Z0-9_]).
bool IsLabelNameChar(char c);

}  // namespace tessera::metrics
