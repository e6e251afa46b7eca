#include "resources/byte_size.h"

#include <array>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "resources/decimal.h"

namespace tessera {
namespace {

using uint128 = unsigned __int128;

struct ByteUnit {
  std::string_view name;
  uint64_t bytes;
};

// Largest first, binary before decimal of the same rank: FormatByteQuantity's tie order.
constexpr std::array<ByteUnit, 11> kUnits = {{
    {"PiB", uint64_t{1} << 50},
    {"PB", 1000000000000000},
    {"TiB", uint64_t{1} << 40},
    {"TB", 1000000000000},
    {"GiB", uint64_t{1} << 30},
    {"GB", 1000000000},
    {"MiB", uint64_t{1} << 20},
    {"MB", 1000000},
    {"KiB", uint64_t{1} << 10},
    {"KB", 1000},
    {"B", 1},
}};

constexpr std::string_view kUnitList = "B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB";

bool IsNumberChar(char c) { return (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+'; }

// Units whose spelling matches `unit` up to case or a missing "B"/"iB": the likely intent.
std::string Suggest(std::string_view unit) {
  const std::string lower = absl::AsciiStrToLower(ToAbsl(unit));
  std::vector<std::string> hits;
  for (const ByteUnit& u : kUnits) {
    const std::string candidate = absl::AsciiStrToLower(ToAbsl(u.name));
    if (candidate == lower || candidate == lower + "b" || candidate == lower + "ib") {
      hits.emplace_back(u.name);
    }
  }
  if (hits.empty()) return "";
  return absl::StrCat("; did you mean ", absl::StrJoin(hits, " or "), "?");
}

// The amount in units of 0.0001 byte, exact, or an error naming `text`.
absl::StatusOr<uint128> ParseTenThousandthsOfBytes(std::string_view text) {
  const std::string_view t = Trim(text);
  std::string lower = absl::AsciiStrToLower(ToAbsl(t));
  if (!lower.empty() && (lower[0] == '+' || lower[0] == '-')) lower.erase(0, 1);
  if (lower.rfind("nan", 0) == 0 || lower.rfind("inf", 0) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(Quote(text), " is not a finite number"));
  }
  size_t end = 0;
  while (end < t.size() && IsNumberChar(t[end])) ++end;
  TESSERA_ASSIGN_OR_RETURN(const resources_internal::DecimalDigits digits,
                           resources_internal::ScanDecimal(t.substr(0, end), text));
  const std::string_view unit = Trim(t.substr(end));
  if (unit.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(Quote(text), " needs a byte unit, e.g. ",
                                                   ToAbsl(t), "GiB (units: ", ToAbsl(kUnitList),
                                                   ")"));
  }
  const ByteUnit* found = nullptr;
  for (const ByteUnit& u : kUnits) {
    if (u.name == unit) found = &u;
  }
  if (found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(Quote(text), ": unknown byte unit ", Quote(unit),
                                                   " (units: ", ToAbsl(kUnitList), ")",
                                                   Suggest(unit)));
  }
  std::string significant = absl::StrCat(ToAbsl(digits.integer), ToAbsl(digits.fraction));
  const size_t leading_zeros = significant.find_first_not_of('0');
  significant.erase(0, leading_zeros == std::string::npos ? significant.size() : leading_zeros);
  if (significant.empty()) return 0;
  // 19 digits keep mantissa * unit * 10^4 below 2^128 for every unit.
  constexpr size_t kMaxSignificantDigits = 19;
  if (digits.integer.size() > kMaxSignificantDigits) {
    return absl::InvalidArgumentError(absl::StrCat(Quote(text), " is too large"));
  }
  if (significant.size() > kMaxSignificantDigits) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quote(text), " has more than 19 significant digits"));
  }
  uint128 mantissa = 0;
  for (char c : significant) mantissa = mantissa * 10 + static_cast<uint128>(c - '0');
  const uint128 numerator = mantissa * found->bytes * Quantity::kScale;
  // numerator < 10^38.1, so 10^39 or more in the denominator cannot divide it.
  bool exact = digits.fraction.size() <= 38;
  uint128 denominator = 1;
  for (size_t i = 0; exact && i < digits.fraction.size(); ++i) denominator *= 10;
  exact = exact && numerator % denominator == 0;
  if (!exact) {
    return absl::InvalidArgumentError(absl::StrCat(Quote(text), " is finer than 0.0001 byte"));
  }
  return numerator / denominator;
}

std::string Uint128ToString(uint128 v) {
  if (v == 0) return "0";
  std::string out;
  while (v != 0) {
    out.insert(out.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  return out;
}

}  // namespace

absl::StatusOr<uint64_t> ParseByteSize(std::string_view text) {
  TESSERA_ASSIGN_OR_RETURN(const uint128 raw, ParseTenThousandthsOfBytes(text));
  if (raw % Quantity::kScale != 0) {
    const uint128 whole = raw / Quantity::kScale;
    std::string fraction = absl::StrCat(static_cast<uint64_t>(raw % Quantity::kScale) + 10000);
    fraction.erase(0, 1);
    while (fraction.back() == '0') fraction.pop_back();
    return absl::InvalidArgumentError(absl::StrCat(Quote(text), " is not a whole number of bytes (",
                                                   Uint128ToString(whole), ".", fraction, " B)"));
  }
  const uint128 bytes = raw / Quantity::kScale;
  if (bytes > std::numeric_limits<uint64_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(Quote(text), " is too large (at most 16 EiB)"));
  }
  return static_cast<uint64_t>(bytes);
}

absl::StatusOr<Quantity> ParseByteQuantity(std::string_view text) {
  TESSERA_ASSIGN_OR_RETURN(const uint128 raw, ParseTenThousandthsOfBytes(text));
  if (raw > static_cast<uint128>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat(
        Quote(text), " is too large (at most 922337203685477.5807 bytes, about 838 TiB)"));
  }
  return Quantity::FromRaw(static_cast<int64_t>(raw));
}

std::string FormatByteQuantity(Quantity bytes) {
  if (bytes.IsNegative()) {
    if (bytes.raw() == std::numeric_limits<int64_t>::min()) return bytes.ToString() + "B";
    return "-" + FormatByteQuantity(Quantity::FromRaw(-bytes.raw()));
  }
  std::string best;
  for (const ByteUnit& u : kUnits) {
    const int64_t unit = static_cast<int64_t>(u.bytes);
    if (bytes.raw() % unit != 0) continue;  // more than 4 decimal places in this unit
    std::string spelled =
        absl::StrCat(Quantity::FromRaw(bytes.raw() / unit).ToString(), ToAbsl(u.name));
    if (best.empty() || spelled.size() < best.size()) best = std::move(spelled);
  }
  return best;
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr std::array<std::string_view, 6> kBinary = {"KiB", "MiB", "GiB",
                                                              "TiB", "PiB", "EiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  size_t index = 0;
  uint128 unit = 1024;
  while (index + 1 < kBinary.size() && bytes >= unit * 1024) {
    unit *= 1024;
    ++index;
  }
  uint128 hundredths = (static_cast<uint128>(bytes) * 100 + unit / 2) / unit;
  if (hundredths >= 1024 * 100 && index + 1 < kBinary.size()) {  // 1023.999 KiB rounds to 1 MiB
    unit *= 1024;
    ++index;
    hundredths = (static_cast<uint128>(bytes) * 100 + unit / 2) / unit;
  }
  std::string out = Uint128ToString(hundredths / 100);
  const int cents = static_cast<int>(hundredths % 100);
  if (cents != 0) {
    absl::StrAppend(&out, ".", cents / 10);
    if (cents % 10 != 0) absl::StrAppend(&out, cents % 10);
  }
  return absl::StrCat(out, " ", ToAbsl(kBinary[index]));
}

}  // namespace tessera
