#include "base/string_util.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace tessera {

std::string_view Trim(std::string_view s) { return ToStd(absl::StripAsciiWhitespace(ToAbsl(s))); }

bool ConstantTimeEquals(std::string_view given, std::string_view secret) {
  unsigned char difference = given.size() == secret.size() ? 0 : 1;
  for (size_t i = 0; i < secret.size(); ++i) {
    difference |= static_cast<unsigned char>((i < given.size() ? given[i] : 0) ^ secret[i]);
  }
  // Keep the compiler from turning the loop into an early-exit comparison.
  volatile unsigned char result = difference;
  return result == 0;
}

absl::StatusOr<std::vector<Piece>> SplitOutsideParentheses(std::string_view s, char separator) {
  std::vector<Piece> pieces;
  int depth = 0;
  size_t open_column = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '(') {
      if (depth == 0) open_column = i;
      ++depth;
    } else if (c == ')') {
      if (depth == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("column ", i + 1, ": ')' without a matching '('"));
      }
      --depth;
    } else if (c == separator && depth == 0) {
      pieces.push_back({s.substr(start, i - start), start});
      start = i + 1;
    }
  }
  if (depth != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("column ", open_column + 1, ": '(' is never closed"));
  }
  pieces.push_back({s.substr(start), start});
  return pieces;
}

absl::StatusOr<bool> ParseBool(std::string_view s) {
  const std::string v = absl::AsciiStrToLower(ToAbsl(Trim(s)));
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return absl::InvalidArgumentError(
      absl::StrCat("expected a boolean (1/true/yes/on or 0/false/no/off), got ", Quote(s)));
}

std::string Quote(std::string_view s) {
  return absl::StrCat("\"", absl::CHexEscape(ToAbsl(s)), "\"");
}

}  // namespace tessera
