#include "cli/selector_check.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::cli {
namespace {

// Why `constraint` rules the node out, in the words a user would use.
std::string Failure(const LabelConstraint& c, const LabelSet& labels) {
  auto it = labels.find(c.key);
  const std::string has =
      it == labels.end() ? "the node has no " + c.key : c.key + "=" + it->second;
  const std::string values = absl::StrJoin(c.values, ",");
  switch (c.op) {
    case SelectorOperator::kIn: return absl::StrCat("needs ", c.key, " in (", values, "); ", has);
    case SelectorOperator::kNotIn:
      return absl::StrCat("needs ", c.key, " not in (", values, "); ", has);
    case SelectorOperator::kExists: return absl::StrCat("needs ", c.key, " to exist; ", has);
    case SelectorOperator::kDoesNotExist: return absl::StrCat("needs no ", c.key, "; ", has);
  }
  return has;
}

}  // namespace

SelectorCheck CheckSelector(const FallbackList& selector, const LabelSet& labels) {
  SelectorCheck check;
  for (const LabelSelector& option : selector.options()) check.options.push_back(option.ToString());
  check.matched = selector.FirstMatch(labels);
  const size_t tried = check.matched.value_or(selector.options().size());
  for (size_t i = 0; i < tried; ++i) {
    for (const LabelConstraint& c : selector.options()[i].constraints()) {
      if (!c.Matches(labels)) {
        check.failures.push_back(Failure(c, labels));
        break;
      }
    }
  }
  return check;
}

nlohmann::json SelectorCheckJson(const SelectorCheck& check) {
  nlohmann::json j = {{"options", check.options}, {"failures", check.failures}};
  j["matched"] = check.matched.has_value() ? nlohmann::json(*check.matched) : nlohmann::json();
  return j;
}

std::string SelectorCheckText(const SelectorCheck& check) {
  std::string out;
  for (size_t i = 0; i < check.failures.size(); ++i) {
    absl::StrAppend(&out, "Selector option ", i, " (", check.options[i], "): no, ",
                    check.failures[i], "\n");
  }
  if (check.matched.has_value()) {
    absl::StrAppend(&out, "Selector option ", *check.matched, " (", check.options[*check.matched],
                    "): matches\n");
  } else {
    absl::StrAppend(&out, "Selector: no option matches this node\n");
  }
  return out;
}

}  // namespace tessera::cli
