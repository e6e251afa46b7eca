#include "hardware/plugins/amd/amd_error_reader.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"

namespace tessera {
namespace {

constexpr std::string_view kFamily = "amd";
constexpr std::string_view kCounterSuffix = "_err_count";
// More blocks than any product has: a bound on the files one call reads.
constexpr size_t kMaxBlocks = 32;

// "ue" / "ce" -> count, for the lines of one <block>_err_count file.
std::map<std::string, uint64_t> ParseErrCount(std::string_view text) {
  std::map<std::string, uint64_t> counts;
  for (absl::string_view line : absl::StrSplit(ToAbsl(text), '\n')) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    const std::string_view kind = Trim(ToStd(line.substr(0, colon)));
    uint64_t count = 0;
    if ((kind == "ue" || kind == "ce") &&
        absl::SimpleAtoi(ToAbsl(Trim(ToStd(line.substr(colon + 1)))), &count)) {
      counts[std::string(kind)] = count;
    }
  }
  return counts;
}

class AmdErrorReader final : public DeviceErrorReader {
 public:
  explicit AmdErrorReader(Sysroot sysroot) : sysroot_(std::move(sysroot)) {}

  DeviceErrorSnapshot Snapshot(std::span<const Device> devices, absl::Time now) override {
    DeviceErrorSnapshot snapshot;
    snapshot.taken = now;
    for (const Device& device : devices) ReadCounters(device, snapshot.marks);
    return snapshot;
  }

  DeviceErrorReport MessagesSince(const DeviceErrorSnapshot& snapshot,
                                  std::span<const Device> devices, absl::Time /*now*/) override {
    DeviceErrorReport report;
    for (const Device& device : devices) {
      std::map<std::string, uint64_t> now;
      ReadCounters(device, now);
      const std::string label = DeviceLabel("GPU", device);
      // Uncorrectable first: they are what ends a program.
      for (const auto& [kind, what] :
           {std::pair{"ue", "uncorrectable"}, std::pair{"ce", "correctable"}}) {
        for (const auto& [key, after] : now) {
          if (!absl::EndsWith(key, absl::StrCat("/", kind))) continue;
          auto before = snapshot.marks.find(key);
          if (before == snapshot.marks.end()) continue;
          const std::string block = BlockOf(key);
          std::string line = CounterRise(label, absl::StrCat(what, " ECC errors in ", block),
                                         before->second, after);
          if (!line.empty()) report.messages.push_back(std::move(line));
        }
      }
    }
    return report;
  }

 private:
  // Marks "<index>/<block>/ue" and "<index>/<block>/ce".
  void ReadCounters(const Device& device, std::map<std::string, uint64_t>& marks) const {
    if (device.family != kFamily || device.pci_bus_id.empty()) return;
    const std::string dir = absl::StrCat("/sys/bus/pci/devices/", device.pci_bus_id, "/ras");
    auto names = sysroot_.ListDirectory(dir);
    if (!names.ok()) return;
    size_t blocks = 0;
    for (const std::string& name : *names) {
      if (!absl::EndsWith(name, ToAbsl(kCounterSuffix)) || ++blocks > kMaxBlocks) continue;
      auto text = sysroot_.ReadFile(absl::StrCat(dir, "/", name));
      if (!text.ok()) continue;
      const std::string block = name.substr(0, name.size() - kCounterSuffix.size());
      for (const auto& [kind, count] : ParseErrCount(*text)) {
        marks[absl::StrCat(device.index, "/", block, "/", kind)] = count;
      }
    }
  }

  // "umc" of "3/umc/ue".
  static std::string BlockOf(const std::string& key) {
    const size_t first = key.find('/');
    const size_t last = key.rfind('/');
    return key.substr(first + 1, last - first - 1);
  }

  const Sysroot sysroot_;
};

}  // namespace

std::unique_ptr<DeviceErrorReader> MakeAmdErrorReader(const DeviceErrorContext& context) {
  return std::make_unique<AmdErrorReader>(context.sysroot);
}

}  // namespace tessera
