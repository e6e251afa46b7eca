#include "labels/yaml_util.h"

#include <exception>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/string_util.h"

namespace tessera::labels_internal {
namespace {

std::string KindOf(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null: return "null";
    case YAML::NodeType::Scalar: return "a string";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Undefined: break;
  }
  return "undefined";
}

std::string At(const YAML::Node& node) {
  std::string line = LineOf(node);
  return line.empty() ? "" : line + ": ";
}

}  // namespace

std::string LineOf(const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null() || mark.line < 0) return "";
  return absl::StrCat("line ", mark.line + 1);
}

absl::StatusOr<YAML::Node> LoadYaml(std::string_view text) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    const std::string where = e.mark.is_null() ? "" : absl::StrCat("line ", e.mark.line + 1, ": ");
    return absl::InvalidArgumentError(absl::StrCat(where, e.msg));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(e.what());
  }
}

absl::StatusOr<std::vector<FlatEntry>> ReadFlatStringMap(const YAML::Node& node) {
  try {
    if (!node.IsMap()) {
      return absl::InvalidArgumentError(
          absl::StrCat(At(node), "expected a map of strings, not ", KindOf(node)));
    }
    std::vector<FlatEntry> entries;
    std::set<std::string> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      const YAML::Node key = it->first;
      const YAML::Node value = it->second;
      if (!key.IsScalar()) {
        return absl::InvalidArgumentError(
            absl::StrCat(At(key), "a key must be a string, not ", KindOf(key)));
      }
      if (!seen.insert(key.Scalar()).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(At(key), "key ", Quote(key.Scalar()), " is given twice"));
      }
      if (value.IsNull()) {
        return absl::InvalidArgumentError(absl::StrCat(At(key), "value of ", Quote(key.Scalar()),
                                                       " is null; write \"\" for an empty string"));
      }
      if (!value.IsScalar()) {
        return absl::InvalidArgumentError(absl::StrCat(At(value), "value of ", Quote(key.Scalar()),
                                                       " must be a string, not ", KindOf(value)));
      }
      entries.push_back({key.Scalar(), value.Scalar(), LineOf(key)});
    }
    return entries;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(At(node), e.what()));
  }
}

}  // namespace tessera::labels_internal
