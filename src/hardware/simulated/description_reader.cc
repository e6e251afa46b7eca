#include "hardware/simulated/description_reader.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/string_util.h"
#include "resources/byte_size.h"

namespace tessera::simulated {
namespace {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

bool HasMark(const YAML::Node& node) {
  if (!node.IsDefined()) return false;
  const YAML::Mark mark = node.Mark();
  return !mark.is_null() && mark.line >= 0;
}

// Errors are one line even when they quote the input (yaml-cpp puts the offending character
// into some messages): control characters are escaped.
std::string OneLine(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      absl::StrAppend(&out, "\\x", absl::Hex(u, absl::kZeroPad2));
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string DidYouMean(std::string_view word, const std::vector<std::string>& options) {
  const std::string* closest = nullptr;
  size_t best = 3;  // suggest only near misses (typos)
  for (const std::string& option : options) {
    const size_t d = EditDistance(word, option);
    if (d < best) {
      best = d;
      closest = &option;
    }
  }
  return closest == nullptr ? "" : absl::StrCat(" (did you mean ", *closest, "?)");
}

std::string KindName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null: return "nothing (null)";
    case YAML::NodeType::Scalar: return absl::StrCat("the string ", Quote(node.Scalar()));
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Undefined: break;
  }
  return "nothing";
}

absl::Status DescriptionReader::ErrorAt(const YAML::Mark& mark, std::string_view problem) const {
  if (mark.is_null() || mark.line < 0) {
    return absl::InvalidArgumentError(OneLine(absl::StrCat(source_, ": ", ToAbsl(problem))));
  }
  return absl::InvalidArgumentError(OneLine(
      absl::StrCat(source_, ":", mark.line + 1, ":", mark.column + 1, ": ", ToAbsl(problem))));
}

absl::Status DescriptionReader::Error(const Field& field, std::string_view problem) const {
  const std::string text =
      field.path.empty() ? std::string(problem) : absl::StrCat(field.path, ": ", ToAbsl(problem));
  // An empty value ("count:") has no position of its own; its key has.
  if (HasMark(field.value) && !field.value.IsNull()) return ErrorAt(field.value.Mark(), text);
  if (HasMark(field.key)) return ErrorAt(field.key.Mark(), text);
  if (HasMark(field.value)) return ErrorAt(field.value.Mark(), text);
  return ErrorAt(YAML::Mark::null_mark(), text);
}

absl::Status DescriptionReader::CheckMap(const Field& field,
                                         std::initializer_list<std::string_view> allowed) const {
  if (!field.value.IsMap()) {
    return Error(field, absl::StrCat("expected a map, got ", KindName(field.value)));
  }
  std::set<std::string> seen;
  for (auto it = field.value.begin(); it != field.value.end(); ++it) {
    const Field key_field{field.path, it->first, it->first};
    if (!it->first.IsScalar()) {
      return Error(key_field, absl::StrCat("a key must be a string, got ", KindName(it->first)));
    }
    const std::string& key = it->first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      const std::vector<std::string> names(allowed.begin(), allowed.end());
      return Error(key_field, absl::StrCat("unknown key ", Quote(key), DidYouMean(key, names),
                                           "; expected one of: ", absl::StrJoin(names, ", ")));
    }
    if (!seen.insert(key).second) {
      return Error(key_field, absl::StrCat("key ", Quote(key), " is given twice"));
    }
  }
  return absl::OkStatus();
}

std::optional<Field> DescriptionReader::Child(const Field& map, std::string_view key) const {
  for (auto it = map.value.begin(); it != map.value.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key) {
      return Field{map.path.empty() ? std::string(key) : absl::StrCat(map.path, ".", ToAbsl(key)),
                   it->second, it->first};
    }
  }
  return std::nullopt;
}

absl::StatusOr<Field> DescriptionReader::Required(const Field& map, std::string_view key) const {
  std::optional<Field> child = Child(map, key);
  if (!child.has_value()) {
    return Error(map, absl::StrCat("missing required key ", Quote(key)));
  }
  return *std::move(child);
}

absl::StatusOr<std::vector<Field>> DescriptionReader::List(const Field& field) const {
  if (!field.value.IsSequence()) {
    return Error(field, absl::StrCat("expected a list, got ", KindName(field.value)));
  }
  std::vector<Field> out;
  for (size_t i = 0; i < field.value.size(); ++i) {
    out.push_back(Field{absl::StrCat(field.path, "[", i, "]"), field.value[i], field.key});
  }
  return out;
}

absl::StatusOr<std::string> DescriptionReader::String(const Field& field) const {
  if (!field.value.IsScalar()) {
    return Error(field, absl::StrCat("expected a string, got ", KindName(field.value)));
  }
  return field.value.Scalar();
}

absl::StatusOr<int64_t> DescriptionReader::Integer(const Field& field, int64_t min,
                                                   int64_t max) const {
  if (!field.value.IsScalar()) {
    return Error(field, absl::StrCat("expected an integer, got ", KindName(field.value)));
  }
  const std::string& text = field.value.Scalar();
  int64_t value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  if (begin != end && *begin == '+') ++begin;
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (text.empty() || ec == std::errc::invalid_argument || ptr != end) {
    return Error(field, absl::StrCat("expected an integer, got ", Quote(text)));
  }
  if (ec == std::errc::result_out_of_range || value < min || value > max) {
    std::string range;
    if (min == 1 && max == INT64_MAX) {
      range = "a positive integer";
    } else if (min == 0 && max == INT64_MAX) {
      range = "a non-negative integer";
    } else {
      range = absl::StrCat("an integer from ", min, " to ", max);
    }
    return Error(field, absl::StrCat("must be ", range, ", got ", text));
  }
  return value;
}

absl::StatusOr<uint64_t> DescriptionReader::Bytes(const Field& field) const {
  if (!field.value.IsScalar()) {
    return Error(field, absl::StrCat("expected a size such as 80GiB, got ", KindName(field.value)));
  }
  auto bytes = ParseByteSize(field.value.Scalar());
  if (!bytes.ok()) return Error(field, ToStd(bytes.status().message()));
  return *bytes;
}

}  // namespace tessera::simulated
