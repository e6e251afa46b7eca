#include "hardware/plugins/common/index_list.h"

#include <charconv>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/string_util.h"

namespace tessera {
namespace {

std::optional<int> ParseNonNegative(std::string_view s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  int value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr != s.data() + s.size() || value < 0) return std::nullopt;
  return value;
}

// Upper bound on one range's size, so "0-999999999" cannot exhaust memory.
constexpr int kMaxRange = 4096;

}  // namespace

absl::StatusOr<std::vector<int>> ParseIndexList(std::string_view text,
                                                const IndexListOptions& options) {
  std::vector<int> out;
  const std::string separators = absl::StrCat(",", ToAbsl(options.extra_separators));
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find_first_of(separators, pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view piece = Trim(text.substr(pos, end - pos));
    pos = end + 1;
    if (piece.empty()) {
      // Whitespace-separated lists produce empty pieces between separators; a bare "," does not.
      if (options.extra_separators.empty() && !Trim(text).empty()) {
        return absl::InvalidArgumentError(absl::StrCat(Quote(text), ": empty entry"));
      }
      continue;
    }
    const size_t dash = options.allow_ranges ? piece.find('-') : std::string_view::npos;
    if (dash != std::string_view::npos) {
      auto lo = ParseNonNegative(piece.substr(0, dash));
      auto hi = ParseNonNegative(piece.substr(dash + 1));
      if (!lo || !hi || *lo > *hi || *hi - *lo >= kMaxRange) {
        return absl::InvalidArgumentError(
            absl::StrCat(Quote(text), ": ", Quote(piece), " is not a range a-b with a <= b"));
      }
      for (int i = *lo; i <= *hi; ++i) out.push_back(i);
      continue;
    }
    auto value = ParseNonNegative(piece);
    if (!value) {
      return absl::InvalidArgumentError(
          absl::StrCat(Quote(text), ": ", Quote(piece), " is not a non-negative integer"));
    }
    out.push_back(*value);
  }
  return out;
}

std::optional<int> NumberedEntry(std::string_view name, std::string_view prefix) {
  if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix) return std::nullopt;
  const std::string_view digits = name.substr(prefix.size());
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  return ParseNonNegative(digits);
}

}  // namespace tessera
