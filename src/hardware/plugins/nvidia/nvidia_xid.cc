#include "hardware/plugins/nvidia/nvidia_xid.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"

namespace tessera {
namespace {

constexpr std::string_view kXidMarker = "NVRM: Xid (PCI:";
// The detail is for people; a longer one is cut.
constexpr size_t kMaxDetail = 200;

bool ParseHex(std::string_view text, unsigned& out) {
  if (text.empty() || text.size() > 8) return false;
  return absl::SimpleHexAtoi(ToAbsl(text), &out);
}

}  // namespace

std::optional<PciSlot> ParsePciSlot(std::string_view bus_id) {
  const std::vector<absl::string_view> parts = absl::StrSplit(ToAbsl(Trim(bus_id)), ':');
  if (parts.size() != 3) return std::nullopt;
  // The device part may carry the function: "00.0".
  const std::string_view device = ToStd(parts[2]).substr(0, ToStd(parts[2]).find('.'));
  PciSlot slot;
  if (!ParseHex(ToStd(parts[0]), slot.domain) || !ParseHex(ToStd(parts[1]), slot.bus) ||
      !ParseHex(device, slot.device)) {
    return std::nullopt;
  }
  return slot;
}

std::optional<XidRecord> ParseXidRecord(std::string_view text) {
  const size_t marker = text.find(kXidMarker);
  if (marker == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(marker + kXidMarker.size());
  const size_t close = rest.find("): ");
  if (close == std::string_view::npos) return std::nullopt;
  std::optional<PciSlot> slot = ParsePciSlot(rest.substr(0, close));
  if (!slot.has_value()) return std::nullopt;
  rest = rest.substr(close + 3);
  size_t digits = 0;
  while (digits < rest.size() && absl::ascii_isdigit(static_cast<unsigned char>(rest[digits]))) {
    ++digits;
  }
  XidRecord record;
  record.slot = *slot;
  if (digits == 0 || !absl::SimpleAtoi(ToAbsl(rest.substr(0, digits)), &record.code)) {
    return std::nullopt;
  }
  rest = rest.substr(digits);
  if (absl::StartsWith(ToAbsl(rest), ",")) rest = rest.substr(1);
  // The fields before the message: pid=..., name=... (either may be absent).
  std::vector<std::string_view> fields;
  for (absl::string_view field : absl::StrSplit(ToAbsl(rest), ',')) {
    fields.push_back(ToStd(field));
  }
  size_t first = 0;
  while (first < fields.size()) {
    const std::string_view field = Trim(fields[first]);
    if (!absl::StartsWith(ToAbsl(field), "pid=") && !absl::StartsWith(ToAbsl(field), "name=")) {
      break;
    }
    ++first;
  }
  std::vector<std::string> message;
  for (size_t i = first; i < fields.size(); ++i) message.emplace_back(Trim(fields[i]));
  std::string detail = absl::StrJoin(message, ", ");
  while (!detail.empty() && (detail.back() == '.' || detail.back() == ' ')) detail.pop_back();
  if (detail.size() > kMaxDetail) detail = detail.substr(0, kMaxDetail) + "...";
  record.detail = std::move(detail);
  return record;
}

}  // namespace tessera
