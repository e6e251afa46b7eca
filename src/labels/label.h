// Node labels: Kubernetes key/value syntax, the reserved tessera.io/ prefix, and the parsers for
// every way labels enter Tessera (CLI string, YAML/JSON file). All of them go through the one
// validator, ValidateLabel, so no path is more lenient than another.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera {

// Keys under this prefix are set by Tessera itself (tessera.io/accelerator-type, ...).
inline constexpr std::string_view kReservedPrefix = "tessera.io/";

// Who is setting a label: users may not use kReservedPrefix; Tessera's own code may.
enum class LabelOrigin { kUser, kSystem };

// Sorted by key; find() takes a std::string_view.
using LabelSet = std::map<std::string, std::string, std::less<>>;

// Key: optional prefix + '/' + name. Prefix: at most 253 characters, DNS labels (lowercase
// letters, digits, '-'; a letter or digit at both ends; 1-63 each) joined by '.'. Name: 1-63
// characters, a letter or digit at both ends, letters, digits, '_', '.', '-' inside.
absl::Status ValidateLabelKey(std::string_view key);
// Value: empty, or 1-63 characters with the same rules as a key's name.
absl::Status ValidateLabelValue(std::string_view value);
bool HasReservedPrefix(std::string_view key);

// The one validator for a label from any source: key, value, and the reserved prefix for
// kUser. Errors are one line naming the key or value.
absl::Status ValidateLabel(std::string_view key, std::string_view value, LabelOrigin origin);
absl::Status ValidateLabels(const LabelSet& labels, LabelOrigin origin);

// Parses "k1=v1,k2=v2". One pair of outer quotes ('...' or "...") is stripped; keys and values
// are trimmed; empty text is no labels. Each pair has exactly one '='; an empty pair, a repeated
// key or an invalid label is an error.
absl::StatusOr<LabelSet> ParseLabels(std::string_view text, LabelOrigin origin);

// Parses a flat map of string keys to string values, in YAML or JSON (JSON is YAML). Empty
// text is no labels. Lists, nested maps, null values and repeated keys are errors naming the
// YAML line; write "" for an empty value.
absl::StatusOr<LabelSet> ParseLabelsYaml(std::string_view yaml, LabelOrigin origin);

// "k1=v1,k2=v2", sorted; ParseLabels(FormatLabels(x), kSystem) == x for valid labels.
std::string FormatLabels(const LabelSet& labels);

}  // namespace tessera
