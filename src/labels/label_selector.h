// Label selectors: per-key constraints on node labels (keys ANDed), the CLI form
// `gpu=in(a,b),zone=!x` and the map form {gpu: "in(a,b)", zone: "!x"} (YAML or JSON).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "labels/label.h"

namespace tessera {

enum class SelectorOperator { kIn, kNotIn, kExists, kDoesNotExist };

// "in", "!in", "exists", "!exists": for messages and logs.
std::string_view SelectorOperatorName(SelectorOperator op);

// One constraint on one key. `values` is sorted and deduplicated (non-empty for kIn/kNotIn,
// empty for kExists/kDoesNotExist) once it is inside a LabelSelector.
struct LabelConstraint {
  std::string key;
  SelectorOperator op = SelectorOperator::kIn;
  std::vector<std::string> values;

  // kIn: key present with a listed value. kNotIn: key absent, or its value is not listed.
  // kExists: key present (an empty value counts). kDoesNotExist: key absent.
  bool Matches(const LabelSet& labels) const;

  friend auto operator<=>(const LabelConstraint&, const LabelConstraint&) = default;
  friend bool operator==(const LabelConstraint&, const LabelConstraint&) = default;
};

// Not thread-safe; copyable value. Constraints are kept in canonical order (key, operator,
// values) without duplicates, so equal selectors compare equal however they were written.
// The empty selector matches every node.
class LabelSelector {
 public:
  LabelSelector() = default;
  // A selector of these constraints (each through AddConstraint): the typed way to write one,
  // LabelSelector::Of({{"zone", SelectorOperator::kIn, {"a", "b"}}}). The first invalid key or
  // value is the error.
  static absl::StatusOr<LabelSelector> Of(std::vector<LabelConstraint> constraints);

  // Validates (key as a label key, the tessera.io/ prefix allowed; values as non-empty label
  // values), sorts and deduplicates the values, and adds the constraint unless already there.
  absl::Status AddConstraint(LabelConstraint constraint);

  // True when the node's labels satisfy every constraint.
  bool Matches(const LabelSet& labels) const;

  const std::vector<LabelConstraint>& constraints() const { return constraints_; }
  bool empty() const { return constraints_.empty(); }

  // Key -> its expressions in canonical form ("in(a,b)", "!x", "exists(),!in(a,b)"): the map
  // form, ParseLabelSelectorMap(ToMap()) == *this.
  std::map<std::string, std::string> ToMap() const;
  // Canonical CLI form, keys and values sorted: "gpu=in(a,b),zone=!x"; one value is written
  // bare (`v`, `!v`). ParseLabelSelector(ToString()) == *this. Empty selector: "".
  std::string ToString() const;

  friend bool operator==(const LabelSelector&, const LabelSelector&) = default;
  // Constraint by constraint: an order for keys, nothing more.
  friend auto operator<=>(const LabelSelector&, const LabelSelector&) = default;

 private:
  std::vector<LabelConstraint> constraints_;
};

// The CLI form. Grammar (every token trimmed; columns in errors are 1-based):
//   selector   := "" | piece ("," piece)*           split at commas outside parentheses
//   piece      := key "=" expression                starts a new key
//               | expression                        one more expression on the previous key
//   expression := value | "!" value | "in(" values ")" | "!in(" values ")"
//               | "exists()" | "!exists()"
//   values     := value ("," value)*
// A key given in several pieces collects all their expressions (ANDed). Errors are one line:
//   label selector "gpu=in(a,b": column 7: '(' is never closed
absl::StatusOr<LabelSelector> ParseLabelSelector(std::string_view cli);

// The map form: key -> one or more expressions separated by commas outside parentheses.
// Errors: label selector: key "gpu": "in(a": column 3: '(' is never closed
absl::StatusOr<LabelSelector> ParseLabelSelectorMap(const std::map<std::string, std::string>& map);

// The map form as YAML or JSON text: a flat map of strings. Empty text is the empty selector.
// Errors name the YAML line: label selector YAML: line 2: key "gpu": ...
absl::StatusOr<LabelSelector> ParseLabelSelectorYaml(std::string_view text);

}  // namespace tessera
