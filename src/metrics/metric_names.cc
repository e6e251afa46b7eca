#include "metrics/metric_names.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/string_util.h"

namespace tessera::metrics {
namespace {

bool IsAsciiLetterOrUnderscore(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

bool IsMetricNameChar(char c) {
  return IsAsciiLetterOrUnderscore(c) || IsAsciiDigit(c) || c == ':';
}

bool IsLabelNameChar(char c) { return IsAsciiLetterOrUnderscore(c) || IsAsciiDigit(c); }

absl::Status ValidateMetricName(std::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("metric name is empty");
  const bool first_ok = IsAsciiLetterOrUnderscore(name[0]) || name[0] == ':';
  bool rest_ok = true;
  for (char c : name.substr(1)) rest_ok = rest_ok && IsMetricNameChar(c);
  if (!first_ok || !rest_ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric name ", Quote(name), " does not match [a-zA-Z_:][a-zA-Z0-9_:]*"));
  }
  if (name.substr(0, 2) == "__") {
    return absl::InvalidArgumentError(absl::StrCat(
        "metric name ", Quote(name), " starts with \"__\", which Prometheus reserves"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLabelName(std::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("label name is empty");
  bool ok = IsAsciiLetterOrUnderscore(name[0]);
  for (char c : name.substr(1)) ok = ok && IsLabelNameChar(c);
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("label name ", Quote(name), " does not match [a-zA-Z_][a-zA-Z0-9_]*"));
  }
  if (name.substr(0, 2) == "__") {
    return absl::InvalidArgumentError(
        absl::StrCat("label name ", Quote(name), " starts with \"__\", which Prometheus reserves"));
  }
  return absl::OkStatus();
}

bool IsValidUtf8(std::string_view text) { return FirstInvalidUtf8(text) == std::string_view::npos; }

size_t FirstInvalidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<uint8_t>(text[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    size_t length = 0;
    uint32_t code_point = 0;
    uint32_t smallest = 0;  // the least code point this length may encode (no overlong forms)
    if ((lead & 0xE0) == 0xC0) {
      length = 2, code_point = lead & 0x1F, smallest = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3, code_point = lead & 0x0F, smallest = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4, code_point = lead & 0x07, smallest = 0x10000;
    } else {
      return i;  // a continuation byte first, or 0xF8..0xFF
    }
    if (text.size() - i < length) return i;
    for (size_t k = 1; k < length; ++k) {
      const auto next = static_cast<uint8_t>(text[i + k]);
      if ((next & 0xC0) != 0x80) return i;
      code_point = (code_point << 6) | (next & 0x3F);
    }
    if (code_point < smallest || code_point > 0x10FFFF) return i;
    if (code_point >= 0xD800 && code_point <= 0xDFFF) return i;  // UTF-16 surrogates
    i += length;
  }
  return std::string_view::npos;
}

}  // namespace tessera::metrics
