#include "hardware/simulated/link_units.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "resources/quantity.h"

namespace tessera::simulated {
namespace {

struct Unit {
  std::string_view suffix;
  int64_t scale;
};

// Splits "400Gbps" into a positive Quantity and a unit from `units`.
absl::StatusOr<std::pair<Quantity, int64_t>> SplitNumberAndUnit(std::string_view text,
                                                                std::initializer_list<Unit> units,
                                                                std::string_view example) {
  const std::string_view trimmed = Trim(text);
  for (const Unit& u : units) {
    if (trimmed.size() > u.suffix.size() &&
        trimmed.substr(trimmed.size() - u.suffix.size()) == u.suffix) {
      auto number = Quantity::Parse(trimmed.substr(0, trimmed.size() - u.suffix.size()));
      if (!number.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(Quote(text), " is not a number with a unit, e.g. ", ToAbsl(example)));
      }
      if (number->IsZero()) {
        return absl::InvalidArgumentError(absl::StrCat(Quote(text), " must be greater than 0"));
      }
      return std::make_pair(*number, u.scale);
    }
  }
  std::string names;
  for (const Unit& u : units) absl::StrAppend(&names, names.empty() ? "" : ", ", ToAbsl(u.suffix));
  return absl::InvalidArgumentError(absl::StrCat(Quote(text), " has no unit; write it as e.g. ",
                                                 ToAbsl(example), " (units: ", names, ")"));
}

}  // namespace

absl::StatusOr<int64_t> ParseLinkSpeedMbps(std::string_view text) {
  auto split =
      SplitNumberAndUnit(text, {{"Mbps", 1}, {"Gbps", 1000}, {"Tbps", 1000000}}, "400Gbps");
  if (!split.ok()) return split.status();
  const auto [number, scale] = *split;
  // raw is number * 10^4; the result must be whole megabits.
  const int64_t raw = number.raw();
  if (raw > INT64_MAX / scale) {
    return absl::InvalidArgumentError(absl::StrCat(Quote(text), " is too large"));
  }
  const int64_t scaled = raw * scale;
  if (scaled % Quantity::kScale != 0) {
    return absl::InvalidArgumentError(absl::StrCat(Quote(text), " is not a whole number of Mbps"));
  }
  return scaled / Quantity::kScale;
}

absl::StatusOr<double> ParseBandwidthGBps(std::string_view text) {
  auto split = SplitNumberAndUnit(text, {{"GB/s", 1}}, "450GB/s");
  if (!split.ok()) return split.status();
  return split->first.ToDouble();
}

}  // namespace tessera::simulated
