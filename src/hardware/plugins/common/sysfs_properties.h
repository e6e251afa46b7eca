// SysfsProperties: a sysfs "properties" file such as KFD's topology/nodes/<n>/properties, one
// "name value" pair per line ("name=value" is accepted too, as uevent files use it).
// Part of tessera_plugin_support (plugins/common), used by the amd plugin's KFD reader.
// Not thread-safe; copyable value.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "hardware/sysroot.h"

namespace tessera {

class SysfsProperties {
 public:
  SysfsProperties() = default;

  // Lines without a value and blank lines are skipped; a repeated name keeps the last value.
  static SysfsProperties Parse(std::string_view text);
  // Reads and parses `linux_path`; NotFound when the file is missing.
  static absl::StatusOr<SysfsProperties> Read(const Sysroot& sysroot, std::string_view linux_path);

  std::optional<std::string> Get(std::string_view name) const;
  // A non-negative number: decimal (KFD writes decimal) or 0x-prefixed hex. nullopt when the
  // name is missing or the value is not a number.
  std::optional<uint64_t> GetUnsigned(std::string_view name) const;

  bool empty() const { return values_.empty(); }

 private:
  std::map<std::string, std::string, std::less<>> values_;
};

}  // namespace tessera
