#include "hardware/plugins/nvidia/nvidia_type.h"

#include <cctype>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"

namespace tessera {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return absl::EqualsIgnoreCase(ToAbsl(a), ToAbsl(b));
}

bool IsOneOf(std::string_view token, std::initializer_list<std::string_view> words) {
  for (std::string_view w : words) {
    if (EqualsIgnoreCase(token, w)) return true;
  }
  return false;
}

bool HasDigit(std::string_view token) {
  for (char c : token) {
    if (absl::ascii_isdigit(static_cast<unsigned char>(c))) return true;
  }
  return false;
}

std::string LabelSafe(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') {
      out += c;
    }
  }
  // A label value starts and ends with an alphanumeric character.
  while (!out.empty() && !absl::ascii_isalnum(static_cast<unsigned char>(out.back()))) {
    out.pop_back();
  }
  while (!out.empty() && !absl::ascii_isalnum(static_cast<unsigned char>(out.front()))) {
    out.erase(out.begin());
  }
  return out;
}

}  // namespace

std::string NvidiaTypeString(std::string_view name) {
  std::vector<std::string_view> tokens;
  for (absl::string_view t : absl::StrSplit(ToAbsl(name), ' ', absl::SkipEmpty())) {
    tokens.push_back(ToStd(t));
  }
  size_t i = 0;
  while (i < tokens.size() && IsOneOf(tokens[i], {"NVIDIA", "Tesla", "GeForce", "Quadro"})) ++i;
  if (i == tokens.size()) return "";

  if (IsOneOf(tokens[i], {"RTX", "GTX", "GT", "TITAN"})) {
    std::vector<std::string_view> parts = {tokens[i++]};
    // Up to and including the model number ("A6000", "4090"); "TITAN RTX" has none.
    while (i < tokens.size()) {
      parts.push_back(tokens[i]);
      if (HasDigit(tokens[i++])) break;
      if (parts.size() == 3) break;  // no number soon: "TITAN RTX", "RTX PRO ..." without one
    }
    while (i < tokens.size() && IsOneOf(tokens[i], {"Ti", "SUPER", "Ada", "D"})) {
      parts.push_back(tokens[i++]);
    }
    std::string joined;
    for (std::string_view part : parts) {
      if (!joined.empty()) joined += '-';
      joined += part;
    }
    return LabelSafe(joined);
  }
  std::string_view model = tokens[i];
  model = model.substr(0, model.find('-'));
  return LabelSafe(model);
}

}  // namespace tessera
