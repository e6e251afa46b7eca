#include "labels/label_selector.h"

#include <algorithm>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "labels/yaml_util.h"

namespace tessera {
namespace {

// An error at 0-based `offset` of the text being parsed, printed 1-based like
// SplitOutsideParentheses does.
absl::Status ErrorAt(size_t offset, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("column ", offset + 1, ": ", why));
}

bool IsSpace(char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); }

// Narrows [begin, end) of `text` to exclude surrounding whitespace.
void TrimRange(std::string_view text, size_t& begin, size_t& end) {
  while (begin < end && IsSpace(text[begin])) ++begin;
  while (end > begin && IsSpace(text[end - 1])) --end;
}

absl::Status CheckValue(std::string_view text, size_t begin, size_t end) {
  if (absl::Status status = ValidateLabelValue(text.substr(begin, end - begin)); !status.ok()) {
    return ErrorAt(begin, status.message());
  }
  return absl::OkStatus();
}

// Parses the one expression in text[begin, end) for `key`. Errors carry columns into `text`.
absl::StatusOr<LabelConstraint> ParseExpression(std::string_view key, std::string_view text,
                                                size_t begin, size_t end) {
  const size_t piece_start = begin;
  TrimRange(text, begin, end);
  if (begin == end) {
    return ErrorAt(piece_start, absl::StrCat("empty expression for key ", Quote(key)));
  }
  bool negated = false;
  if (text[begin] == '!') {
    negated = true;
    const size_t bang = begin++;
    TrimRange(text, begin, end);
    if (begin == end) {
      return ErrorAt(bang, absl::StrCat("bare '!' for key ", Quote(key),
                                        "; write !value, !in(a,b) or !exists()"));
    }
  }
  LabelConstraint constraint{
      std::string(key), negated ? SelectorOperator::kNotIn : SelectorOperator::kIn, {}};
  const std::string_view rest = text.substr(begin, end - begin);
  const size_t open_in_rest = rest.find('(');
  if (open_in_rest == std::string_view::npos) {
    TESSERA_RETURN_IF_ERROR(CheckValue(text, begin, end));
    constraint.values.emplace_back(rest);
    return constraint;
  }
  const size_t open = begin + open_in_rest;
  const size_t close = text.find(')', open);  // the piece is balanced, so it is before `end`
  if (const size_t nested = text.find('(', open + 1); nested < close) {
    return ErrorAt(nested, "nested '(' is not allowed");
  }
  if (size_t after = close + 1, after_end = end;
      TrimRange(text, after, after_end), after < after_end) {
    return ErrorAt(after, absl::StrCat("unexpected text ",
                                       Quote(text.substr(after, after_end - after)), " after ')'"));
  }
  const std::string_view name = Trim(text.substr(begin, open - begin));
  if (name.empty()) {
    return ErrorAt(begin, absl::StrCat(Quote(rest), " needs an operator: write in", ToAbsl(rest)));
  }
  if (name == "exists") {
    if (!Trim(text.substr(open + 1, close - open - 1)).empty()) {
      return ErrorAt(open + 1, "exists() takes no values");
    }
    constraint.op = negated ? SelectorOperator::kDoesNotExist : SelectorOperator::kExists;
    return constraint;
  }
  if (name != "in") {
    return ErrorAt(begin, absl::StrCat("unknown operator ", Quote(name),
                                       " (expected a value, in(...) or exists())"));
  }
  if (Trim(text.substr(open + 1, close - open - 1)).empty()) {
    return ErrorAt(open, "in() needs at least one value");
  }
  size_t value_begin = open + 1;
  while (value_begin <= close) {
    size_t value_end = text.find(',', value_begin);
    if (value_end > close) value_end = close;
    const size_t raw_begin = value_begin;
    size_t b = value_begin, e = value_end;
    TrimRange(text, b, e);
    if (b == e) return ErrorAt(raw_begin, "empty value in in(...)");
    TESSERA_RETURN_IF_ERROR(CheckValue(text, b, e));
    constraint.values.emplace_back(text.substr(b, e - b));
    value_begin = value_end + 1;
  }
  return constraint;
}

// Adds every expression in `expressions` (commas outside parentheses) for `key`. Errors:
// 'key "gpu": "in(a": column 3: why', or the key's own validation error.
absl::Status AddKeyExpressions(LabelSelector& selector, std::string_view key,
                               std::string_view expressions) {
  TESSERA_RETURN_IF_ERROR(ValidateLabelKey(key));
  const std::string prefix = absl::StrCat("key ", Quote(key), ": ", Quote(expressions), ": ");
  auto pieces = SplitOutsideParentheses(expressions, ',');
  if (!pieces.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, pieces.status().message()));
  }
  for (const Piece& piece : *pieces) {
    auto constraint =
        ParseExpression(key, expressions, piece.column, piece.column + piece.text.size());
    if (!constraint.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, constraint.status().message()));
    }
    TESSERA_RETURN_IF_ERROR(selector.AddConstraint(*std::move(constraint)));
  }
  return absl::OkStatus();
}

// The position of the first '=' outside parentheses in `s`, or npos.
size_t TopLevelEquals(std::string_view s) {
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '(') ++depth;
    if (s[i] == ')') --depth;
    if (s[i] == '=' && depth == 0) return i;
  }
  return std::string_view::npos;
}

std::string ValuesText(const std::vector<std::string>& values) {
  if (values.size() == 1) return values[0];
  return absl::StrCat("in(", absl::StrJoin(values, ","), ")");
}

std::string ExpressionText(const LabelConstraint& c) {
  switch (c.op) {
    case SelectorOperator::kIn: return ValuesText(c.values);
    case SelectorOperator::kNotIn: return "!" + ValuesText(c.values);
    case SelectorOperator::kExists: return "exists()";
    case SelectorOperator::kDoesNotExist: return "!exists()";
  }
  return "";
}

}  // namespace

std::string_view SelectorOperatorName(SelectorOperator op) {
  switch (op) {
    case SelectorOperator::kIn: return "in";
    case SelectorOperator::kNotIn: return "!in";
    case SelectorOperator::kExists: return "exists";
    case SelectorOperator::kDoesNotExist: return "!exists";
  }
  return "?";
}

bool LabelConstraint::Matches(const LabelSet& labels) const {
  const auto it = labels.find(key);
  const bool present = it != labels.end();
  switch (op) {
    case SelectorOperator::kIn:
      return present && std::find(values.begin(), values.end(), it->second) != values.end();
    case SelectorOperator::kNotIn:
      return !present || std::find(values.begin(), values.end(), it->second) == values.end();
    case SelectorOperator::kExists: return present;
    case SelectorOperator::kDoesNotExist: return !present;
  }
  return false;
}

absl::StatusOr<LabelSelector> LabelSelector::Of(std::vector<LabelConstraint> constraints) {
  LabelSelector selector;
  for (LabelConstraint& constraint : constraints) {
    TESSERA_RETURN_IF_ERROR(selector.AddConstraint(std::move(constraint)));
  }
  return selector;
}

absl::Status LabelSelector::AddConstraint(LabelConstraint constraint) {
  TESSERA_RETURN_IF_ERROR(ValidateLabelKey(constraint.key));
  const std::string where = absl::StrCat("label selector key ", Quote(constraint.key), ": ");
  const bool takes_values =
      constraint.op == SelectorOperator::kIn || constraint.op == SelectorOperator::kNotIn;
  if (takes_values && constraint.values.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ToAbsl(SelectorOperatorName(constraint.op)), " needs at least one value"));
  }
  if (!takes_values && !constraint.values.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ToAbsl(SelectorOperatorName(constraint.op)), " takes no values"));
  }
  for (const std::string& value : constraint.values) {
    if (value.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "a selector value may not be empty"));
    }
    if (absl::Status status = ValidateLabelValue(value); !status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, status.message()));
    }
  }
  std::sort(constraint.values.begin(), constraint.values.end());
  constraint.values.erase(std::unique(constraint.values.begin(), constraint.values.end()),
                          constraint.values.end());
  const auto at = std::lower_bound(constraints_.begin(), constraints_.end(), constraint);
  if (at == constraints_.end() || *at != constraint) constraints_.insert(at, std::move(constraint));
  return absl::OkStatus();
}

bool LabelSelector::Matches(const LabelSet& labels) const {
  return std::all_of(constraints_.begin(), constraints_.end(),
                     [&](const LabelConstraint& c) { return c.Matches(labels); });
}

std::map<std::string, std::string> LabelSelector::ToMap() const {
  std::map<std::string, std::string> out;
  for (const LabelConstraint& c : constraints_) {
    std::string& expressions = out[c.key];
    if (!expressions.empty()) expressions += ',';
    expressions += ExpressionText(c);
  }
  return out;
}

std::string LabelSelector::ToString() const {
  std::string out;
  for (const auto& [key, expressions] : ToMap()) {
    if (!out.empty()) out += ',';
    absl::StrAppend(&out, key, "=", expressions);
  }
  return out;
}

absl::StatusOr<LabelSelector> ParseLabelSelector(std::string_view cli) {
  LabelSelector selector;
  if (Trim(cli).empty()) return selector;
  auto fail = [&](const absl::Status& status) {
    return absl::InvalidArgumentError(
        absl::StrCat("label selector ", Quote(cli), ": ", status.message()));
  };
  auto pieces = SplitOutsideParentheses(cli, ',');
  if (!pieces.ok()) return fail(pieces.status());
  std::optional<std::string> key;
  for (const Piece& piece : *pieces) {
    size_t begin = piece.column;
    const size_t end = piece.column + piece.text.size();
    const size_t equals = TopLevelEquals(piece.text);
    if (equals != std::string_view::npos) {
      size_t key_begin = begin, key_end = begin + equals;
      TrimRange(cli, key_begin, key_end);
      if (key_begin == key_end) return fail(ErrorAt(begin + equals, "empty key before '='"));
      const std::string_view new_key = cli.substr(key_begin, key_end - key_begin);
      if (absl::Status status = ValidateLabelKey(new_key); !status.ok()) {
        return fail(ErrorAt(key_begin, status.message()));
      }
      key = std::string(new_key);
      begin += equals + 1;
    } else if (!key.has_value()) {
      if (Trim(piece.text).empty()) return fail(ErrorAt(begin, "empty entry before ','"));
      return fail(ErrorAt(
          begin, absl::StrCat(Quote(Trim(piece.text)), " has no key (expected key=expression)")));
    }
    auto constraint = ParseExpression(*key, cli, begin, end);
    if (!constraint.ok()) return fail(constraint.status());
    if (absl::Status status = selector.AddConstraint(*std::move(constraint)); !status.ok()) {
      return fail(status);
    }
  }
  return selector;
}

absl::StatusOr<LabelSelector> ParseLabelSelectorMap(const std::map<std::string, std::string>& map) {
  LabelSelector selector;
  for (const auto& [key, expressions] : map) {
    if (absl::Status status = AddKeyExpressions(selector, key, expressions); !status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("label selector: ", status.message()));
    }
  }
  return selector;
}

absl::StatusOr<LabelSelector> ParseLabelSelectorYaml(std::string_view text) {
  auto fail = [](std::string_view line, const absl::Status& status) {
    return absl::InvalidArgumentError(absl::StrCat("label selector YAML: ", ToAbsl(line),
                                                   line.empty() ? "" : ": ", status.message()));
  };
  auto node = labels_internal::LoadYaml(text);
  if (!node.ok()) return fail("", node.status());
  LabelSelector selector;
  if (node->IsNull()) return selector;
  auto entries = labels_internal::ReadFlatStringMap(*node);
  if (!entries.ok()) return fail("", entries.status());
  for (const labels_internal::FlatEntry& entry : *entries) {
    if (absl::Status status = AddKeyExpressions(selector, entry.key, entry.value); !status.ok()) {
      return fail(entry.line, status);
    }
  }
  return selector;
}

}  // namespace tessera
