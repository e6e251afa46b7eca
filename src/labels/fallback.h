// Fallback lists: ordered alternative label selectors for one request. The scheduler tries
// option 0 (the primary selector), then each fallback in order; the resource demand is the same
// for every option.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "labels/label.h"
#include "labels/label_selector.h"

namespace tessera {

// Not thread-safe; copyable value.
class FallbackList {
 public:
  FallbackList() = default;

  // From the CLI: each repeated selector flag is one option, in the order given.
  static FallbackList FromSelectors(std::vector<LabelSelector> options);

  // From YAML or JSON: a list of entries, each exactly {label_selector: {key: expression, ...}}
  // (the map form of ParseLabelSelectorMap). Empty text is an empty list. An entry that is not a
  // map, is empty, has another key, or has a bad selector is an error naming the entry's
  // 0-based index and YAML line: fallback entry 1 (line 3): unknown key "bundles"; ...
  static absl::StatusOr<FallbackList> ParseYaml(std::string_view text);

  // The primary selector followed by `fallbacks`' options.
  static FallbackList WithPrimary(LabelSelector primary, const FallbackList& fallbacks);

  const std::vector<LabelSelector>& options() const { return options_; }
  bool empty() const { return options_.empty(); }

  // Index of the first option whose selector the node's labels satisfy; nullopt when none does.
  std::optional<size_t> FirstMatch(const LabelSet& labels) const;

  // JSON, parseable by ParseYaml: [{"label_selector": {"gpu": "in(a,b)"}}, ...]; "[]" when empty.
  std::string ToString() const;

  friend bool operator==(const FallbackList&, const FallbackList&) = default;

 private:
  std::vector<LabelSelector> options_;
};

}  // namespace tessera
