#include "labels/fallback.h"

#include <exception>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "labels/yaml_util.h"

namespace tessera {
namespace {

constexpr std::string_view kSelectorKey = "label_selector";

absl::StatusOr<LabelSelector> ParseEntry(const YAML::Node& entry, size_t index) {
  const std::string line = labels_internal::LineOf(entry);
  const std::string where = absl::StrCat("fallback entry ", index,
                                         line.empty() ? "" : absl::StrCat(" (", line, ")"), ": ");
  auto fail = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(where, why));
  };
  if (!entry.IsMap()) return fail("must be a map {label_selector: {...}}");
  if (entry.size() == 0) return fail("is empty; expected {label_selector: {...}}");
  YAML::Node selector_node;
  bool seen = false;
  for (auto it = entry.begin(); it != entry.end(); ++it) {
    const std::string key = it->first.IsScalar() ? it->first.Scalar() : "";
    if (key != kSelectorKey) {
      return fail(
          absl::StrCat("unknown key ", Quote(key), "; the only key allowed is label_selector"));
    }
    if (seen) return fail("label_selector is given twice");
    seen = true;
    selector_node = it->second;
  }
  if (selector_node.IsNull()) return LabelSelector();
  auto entries = labels_internal::ReadFlatStringMap(selector_node);
  if (!entries.ok()) return fail(absl::StrCat("label_selector: ", entries.status().message()));
  std::map<std::string, std::string> map;
  for (labels_internal::FlatEntry& e : *entries) map.emplace(std::move(e.key), std::move(e.value));
  auto selector = ParseLabelSelectorMap(map);
  if (!selector.ok()) return fail(selector.status().message());
  return selector;
}

}  // namespace

FallbackList FallbackList::FromSelectors(std::vector<LabelSelector> options) {
  FallbackList list;
  list.options_ = std::move(options);
  return list;
}

absl::StatusOr<FallbackList> FallbackList::ParseYaml(std::string_view text) {
  auto node = labels_internal::LoadYaml(text);
  if (!node.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("fallback list YAML: ", node.status().message()));
  }
  FallbackList list;
  if (node->IsNull()) return list;
  try {
    if (!node->IsSequence()) {
      return absl::InvalidArgumentError(
          "fallback list YAML: expected a list of {label_selector: {...}} entries");
    }
    for (size_t i = 0; i < node->size(); ++i) {
      auto selector = ParseEntry((*node)[i], i);
      if (!selector.ok()) return selector.status();
      list.options_.push_back(*std::move(selector));
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("fallback list YAML: ", e.what()));
  }
  return list;
}

FallbackList FallbackList::WithPrimary(LabelSelector primary, const FallbackList& fallbacks) {
  FallbackList list;
  list.options_.push_back(std::move(primary));
  list.options_.insert(list.options_.end(), fallbacks.options_.begin(), fallbacks.options_.end());
  return list;
}

std::optional<size_t> FallbackList::FirstMatch(const LabelSet& labels) const {
  for (size_t i = 0; i < options_.size(); ++i) {
    if (options_[i].Matches(labels)) return i;
  }
  return std::nullopt;
}

std::string FallbackList::ToString() const {
  // Keys and expressions hold only label characters and !(),, so they need no JSON escaping.
  std::string out = "[";
  for (size_t i = 0; i < options_.size(); ++i) {
    if (i > 0) out += ", ";
    out += "{\"label_selector\": {";
    bool first = true;
    for (const auto& [key, expressions] : options_[i].ToMap()) {
      if (!first) out += ", ";
      first = false;
      absl::StrAppend(&out, "\"", key, "\": \"", expressions, "\"");
    }
    out += "}}";
  }
  return out + "]";
}

}  // namespace tessera
