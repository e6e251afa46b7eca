// Small string helpers shared by every parser: trimming, splitting outside parentheses, and the
// one boolean parser used for every on/off flag (environment variables included).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera {

// Debian 12's Abseil is built with its own absl::string_view, which does not convert from
// std::string_view. Project APIs take std::string_view; wrap one with ToAbsl() to hand it to
// absl (StrCat, StrSplit, Status messages, ...).
inline absl::string_view ToAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}
inline std::string_view ToStd(absl::string_view s) { return std::string_view(s.data(), s.size()); }

// Removes ASCII whitespace at both ends.
std::string_view Trim(std::string_view s);

// Whether `given` equals `secret`, in time that depends only on the lengths, never on where the
// first difference is (tokens, tickets, sessions).
bool ConstantTimeEquals(std::string_view given, std::string_view secret);

// A piece of a split string and the 0-based column where it starts in the original text.
struct Piece {
  std::string_view text;
  size_t column = 0;
};

// Splits on `separator` where it is not inside parentheses. Pieces are not trimmed.
// Fails (naming the column) on an unbalanced parenthesis.
absl::StatusOr<std::vector<Piece>> SplitOutsideParentheses(std::string_view s, char separator);

// Parses 1/true/yes/on and 0/false/no/off, case-insensitively, trimmed. Anything else is an error.
absl::StatusOr<bool> ParseBool(std::string_view s);

// Quotes a string for error messages: "abc" with control characters escaped.
std::string Quote(std::string_view s);

}  // namespace tessera
