#include "hardware/plugins/common/sysfs_properties.h"

#include <charconv>

#include "base/string_util.h"

namespace tessera {

SysfsProperties SysfsProperties::Parse(std::string_view text) {
  SysfsProperties out;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = Trim(text.substr(0, eol));
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    const size_t sep = line.find_first_of(" \t=");
    if (sep == std::string_view::npos) continue;
    const std::string_view name = Trim(line.substr(0, sep));
    const std::string_view value = Trim(line.substr(sep + 1));
    if (name.empty() || value.empty()) continue;
    out.values_[std::string(name)] = std::string(value);
  }
  return out;
}

absl::StatusOr<SysfsProperties> SysfsProperties::Read(const Sysroot& sysroot,
                                                      std::string_view linux_path) {
  auto text = sysroot.ReadFile(linux_path);
  if (!text.ok()) return text.status();
  return Parse(*text);
}

std::optional<std::string> SysfsProperties::Get(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::optional<uint64_t> SysfsProperties::GetUnsigned(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  std::string_view digits = it->second;
  int base = 10;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    digits.remove_prefix(2);
    base = 16;
  }
  uint64_t value = 0;
  const char* end = digits.data() + digits.size();
  auto [ptr, ec] = std::from_chars(digits.data(), end, value, base);
  if (digits.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace tessera
