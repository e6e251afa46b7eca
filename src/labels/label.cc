#include "labels/label.h"

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "labels/yaml_util.h"

namespace tessera {
namespace {

constexpr size_t kMaxTokenLength = 63;
constexpr size_t kMaxPrefixLength = 253;

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// Why `token` is not a valid name/value token, or nullopt when it is.
std::optional<std::string> TokenProblem(std::string_view token) {
  if (token.empty()) return "is empty";
  if (token.size() > kMaxTokenLength) return "is longer than 63 characters";
  for (char c : token) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') {
      return absl::StrCat("has an invalid character ", Quote(std::string_view(&c, 1)),
                          " (allowed: letters, digits, '-', '_', '.')");
    }
  }
  if (!IsAlnum(token.front()) || !IsAlnum(token.back())) {
    return "must start and end with a letter or digit";
  }
  return std::nullopt;
}

// Why `label` is not a DNS label (RFC 1123, lowercase), or nullopt.
std::optional<std::string> DnsLabelProblem(std::string_view label) {
  if (label.empty()) return "is empty";
  if (label.size() > kMaxTokenLength) return "is longer than 63 characters";
  for (char c : label) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok) {
      return absl::StrCat("has an invalid character ", Quote(std::string_view(&c, 1)),
                          " (allowed: lowercase letters, digits, '-')");
    }
  }
  if (label.front() == '-' || label.back() == '-') {
    return "must start and end with a letter or digit";
  }
  return std::nullopt;
}

absl::Status KeyError(std::string_view key, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("label key ", Quote(key), ToAbsl(why)));
}

std::string_view StripOuterQuotes(std::string_view s) {
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) {
    return s.substr(1, s.size() - 2);
  }
  return s;
}

}  // namespace

absl::Status ValidateLabelKey(std::string_view key) {
  if (key.empty()) return KeyError(key, " is empty");
  const size_t slash = key.find('/');
  std::string_view name = key;
  if (slash != std::string_view::npos) {
    if (key.find('/', slash + 1) != std::string_view::npos) {
      return KeyError(key, " has more than one '/'");
    }
    const std::string_view prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    if (prefix.empty()) return KeyError(key, " has an empty prefix before '/'");
    if (prefix.size() > kMaxPrefixLength) {
      return KeyError(key, " has a prefix longer than 253 characters");
    }
    for (absl::string_view label : absl::StrSplit(ToAbsl(prefix), '.')) {
      if (auto problem = DnsLabelProblem(ToStd(label))) {
        return KeyError(key, absl::StrCat(": prefix part ", Quote(ToStd(label)), " ", *problem));
      }
    }
  }
  if (auto problem = TokenProblem(name)) {
    return KeyError(key, absl::StrCat(": name ", Quote(name), " ", *problem));
  }
  return absl::OkStatus();
}

absl::Status ValidateLabelValue(std::string_view value) {
  if (value.empty()) return absl::OkStatus();
  if (auto problem = TokenProblem(value)) {
    return absl::InvalidArgumentError(absl::StrCat("label value ", Quote(value), " ", *problem));
  }
  return absl::OkStatus();
}

bool HasReservedPrefix(std::string_view key) { return key.starts_with(kReservedPrefix); }

absl::Status ValidateLabel(std::string_view key, std::string_view value, LabelOrigin origin) {
  TESSERA_RETURN_IF_ERROR(ValidateLabelKey(key));
  if (origin == LabelOrigin::kUser && HasReservedPrefix(key)) {
    return absl::InvalidArgumentError(
        absl::StrCat("label key ", Quote(key), " uses the reserved prefix ", Quote(kReservedPrefix),
                     ", which only Tessera itself may set"));
  }
  TESSERA_RETURN_IF_ERROR(ValidateLabelValue(value));
  return absl::OkStatus();
}

absl::Status ValidateLabels(const LabelSet& labels, LabelOrigin origin) {
  for (const auto& [key, value] : labels) {
    TESSERA_RETURN_IF_ERROR(ValidateLabel(key, value, origin));
  }
  return absl::OkStatus();
}

absl::StatusOr<LabelSet> ParseLabels(std::string_view text, LabelOrigin origin) {
  LabelSet labels;
  const std::string_view body = Trim(StripOuterQuotes(Trim(text)));
  if (body.empty()) return labels;
  size_t index = 0;
  for (absl::string_view raw_pair : absl::StrSplit(ToAbsl(body), ',')) {
    ++index;
    const std::string_view pair = Trim(ToStd(raw_pair));
    if (pair.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("labels ", Quote(body), ": pair ", index, " is empty"));
    }
    const size_t equals = pair.find('=');
    if (equals == std::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("label ", Quote(pair), " has no '=' (expected key=value)"));
    }
    if (pair.find('=', equals + 1) != std::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("label ", Quote(pair), " has more than one '='"));
    }
    const std::string_view key = Trim(pair.substr(0, equals));
    const std::string_view value = Trim(pair.substr(equals + 1));
    TESSERA_RETURN_IF_ERROR(ValidateLabel(key, value, origin));
    if (!labels.emplace(std::string(key), std::string(value)).second) {
      return absl::InvalidArgumentError(absl::StrCat("label key ", Quote(key), " is given twice"));
    }
  }
  return labels;
}

absl::StatusOr<LabelSet> ParseLabelsYaml(std::string_view yaml, LabelOrigin origin) {
  auto node = labels_internal::LoadYaml(yaml);
  if (!node.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("labels YAML: ", node.status().message()));
  }
  LabelSet labels;
  if (node->IsNull()) return labels;
  auto entries = labels_internal::ReadFlatStringMap(*node);
  if (!entries.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("labels YAML: ", entries.status().message()));
  }
  for (labels_internal::FlatEntry& entry : *entries) {
    if (absl::Status status = ValidateLabel(entry.key, entry.value, origin); !status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "labels YAML: ", entry.line, entry.line.empty() ? "" : ": ", status.message()));
    }
    labels.emplace(std::move(entry.key), std::move(entry.value));
  }
  return labels;
}

std::string FormatLabels(const LabelSet& labels) {
  std::string out;
  for (const auto& [key, value] : labels) {
    if (!out.empty()) out += ',';
    absl::StrAppend(&out, key, "=", value);
  }
  return out;
}

}  // namespace tessera
