#include "hardware/plugins/nvidia/nvidia_sysfs.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"
#include "hardware/plugins/nvidia/nvidia_pci.h"

namespace tessera {
namespace {

constexpr std::string_view kProcGpus = "/proc/driver/nvidia/gpus";

std::string ProcGpuDir(std::string_view bus_id) {
  return absl::StrCat(ToAbsl(kProcGpus), "/", ToAbsl(bus_id));
}

SysfsGpu FromProc(const Sysroot& sysroot, std::string bus_id) {
  SysfsGpu gpu;
  gpu.bus_id = std::move(bus_id);
  if (auto text = sysroot.ReadFile(ProcGpuDir(gpu.bus_id) + "/information"); text.ok()) {
    ProcGpuInformation info = ParseProcGpuInformation(*text);
    gpu.model = std::move(info.model);
    gpu.uuid = std::move(info.uuid);
  }
  return gpu;
}

}  // namespace

ProcGpuInformation ParseProcGpuInformation(std::string_view text) {
  ProcGpuInformation info;
  for (absl::string_view line : absl::StrSplit(ToAbsl(text), '\n')) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    const std::string_view key = Trim(ToStd(line.substr(0, colon)));
    const std::string value(Trim(ToStd(line.substr(colon + 1))));
    if (key == "Model") {
      info.model = value;
    } else if (key == "GPU UUID") {
      info.uuid = value;
    } else if (key == "Bus Location") {
      info.bus_location = absl::AsciiStrToLower(value);
    }
  }
  return info;
}

std::string ParseNvrmVersion(std::string_view text) {
  for (absl::string_view line : absl::StrSplit(ToAbsl(text), '\n')) {
    if (!absl::StartsWith(line, "NVRM version:")) continue;
    // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.133.20  Fri Mar 14 ..." (or "Open
    // Kernel Module for x86_64"): the first token made of digits and dots with a dot in it.
    for (absl::string_view token : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      bool numeric = !token.empty() && absl::ascii_isdigit(static_cast<unsigned char>(token[0]));
      for (char c : token) {
        numeric = numeric && (absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '.');
      }
      if (numeric && absl::StrContains(token, '.')) return std::string(token);
    }
  }
  return "";
}

bool IsSysfsNvidiaGpu(const Sysroot& sysroot, const PciFunction& f) {
  if (f.vendor_id != kPciVendorNvidia) return false;
  const uint32_t klass = f.class_code >> 8;
  if (klass != kPciClassVga && klass != kPciClass3dController) return false;
  return f.driver == "nvidia" || sysroot.IsDirectory(ProcGpuDir(f.bus_id));
}

SysfsGpuScan ScanNvidiaSysfs(const Sysroot& sysroot, const PciInventory& pci) {
  SysfsGpuScan scan;
  if (auto version = sysroot.ReadFile("/proc/driver/nvidia/version"); version.ok()) {
    scan.driver_version = ParseNvrmVersion(*version);
  }
  if (pci.functions().empty()) {
    auto entries = sysroot.ListDirectory(kProcGpus);
    if (!entries.ok()) return scan;
    scan.evidence.push_back(
        absl::StrCat("no PCI bus in sysfs: GPUs taken from ", ToAbsl(kProcGpus), " alone"));
    for (const std::string& bus_id : *entries) {
      if (sysroot.IsDirectory(ProcGpuDir(bus_id))) scan.gpus.push_back(FromProc(sysroot, bus_id));
    }
    return scan;
  }
  for (const PciFunction* f : pci.ByVendor(kPciVendorNvidia)) {
    if (!IsSysfsNvidiaGpu(sysroot, *f)) continue;
    SysfsGpu gpu = FromProc(sysroot, f->bus_id);
    gpu.numa_node = f->numa_node;
    gpu.device_id = f->device_id;
    gpu.pci_description = DescribePciFunction(*f);
    scan.gpus.push_back(std::move(gpu));
  }
  return scan;
}

}  // namespace tessera
