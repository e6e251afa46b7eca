#include "hardware/plugins/nvidia/nvml_probe.h"

#include <cctype>
#include <cstring>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"
#include "hardware/plugins/common/pci_claim.h"
#include "hardware/plugins/nvidia/nvml_library.h"

namespace tessera {
namespace {

using nvml::NVML_SUCCESS;

// A C string from a fixed buffer that NVML may leave unterminated on error.
std::string FromBuffer(const char* buffer, size_t size) {
  return std::string(buffer, strnlen(buffer, size));
}

std::string FormatFabricUuid(const unsigned char (&bytes)[nvml::NVML_GPU_FABRIC_UUID_LEN]) {
  std::string hex;
  for (unsigned i = 0; i < nvml::NVML_GPU_FABRIC_UUID_LEN; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) hex += '-';
    absl::StrAppend(&hex, absl::Hex(bytes[i], absl::kZeroPad2));
  }
  return hex;
}

bool AllZero(const unsigned char* bytes, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (bytes[i] != 0) return false;
  }
  return true;
}

// Ends the NVML session however ReadNvml returns.
class NvmlSession {
 public:
  explicit NvmlSession(const NvmlLibrary& lib) : lib_(lib) {}
  ~NvmlSession() { lib_.shutdown(); }

 private:
  const NvmlLibrary& lib_;
};

void ReadLinks(const NvmlLibrary& lib, nvml::nvmlDevice_t handle, NvmlGpu& gpu) {
  if (lib.nvlink_state == nullptr) return;
  for (unsigned int link = 0; link < nvml::NVML_NVLINK_MAX_LINKS; ++link) {
    nvml::nvmlEnableState_t active = 0;
    // NOT_SUPPORTED for a GPU without NVLink, INVALID_ARGUMENT past its last link: either ends
    // the walk only for that link; inactive links are skipped.
    if (lib.nvlink_state(handle, link, &active) != NVML_SUCCESS) continue;
    if (active != nvml::NVML_FEATURE_ENABLED) continue;
    NvmlLink l;
    l.link = link;
    if (lib.nvlink_version != nullptr) {
      unsigned int version = 0;
      if (lib.nvlink_version(handle, link, &version) == NVML_SUCCESS) l.version = version;
    }
    if (lib.nvlink_remote_pci != nullptr) {
      nvml::nvmlPciInfo_t pci{};
      if (lib.nvlink_remote_pci(handle, link, &pci) == NVML_SUCCESS) {
        l.remote_bus_id = NormalizeNvmlBusId(FromBuffer(pci.busId, sizeof(pci.busId)));
      }
    }
    if (lib.nvlink_remote_type != nullptr) {
      nvml::nvmlIntNvLinkDeviceType_t type = nvml::NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
      if (lib.nvlink_remote_type(handle, link, &type) == NVML_SUCCESS) {
        l.remote = type == nvml::NVML_NVLINK_DEVICE_TYPE_GPU      ? NvLinkRemote::kGpu
                   : type == nvml::NVML_NVLINK_DEVICE_TYPE_SWITCH ? NvLinkRemote::kSwitch
                                                                  : NvLinkRemote::kOther;
      }
    }
    gpu.links.push_back(std::move(l));
  }
}

void ReadFabric(const NvmlLibrary& lib, nvml::nvmlDevice_t handle, NvmlGpu& gpu) {
  if (lib.fabric_info == nullptr) return;
  nvml::nvmlGpuFabricInfo_t info{};
  if (lib.fabric_info(handle, &info) != NVML_SUCCESS) return;  // NOT_SUPPORTED before Hopper
  // Only a finished registration names the domain; an all-zero cluster UUID means the GPU is
  // not part of a multi-host NVLink domain (e.g. a single HGX board).
  if (info.state != nvml::NVML_GPU_FABRIC_STATE_COMPLETED || info.status != NVML_SUCCESS) return;
  if (AllZero(info.clusterUuid, sizeof(info.clusterUuid))) return;
  gpu.fabric = NvmlFabric{FormatFabricUuid(info.clusterUuid), info.cliqueId};
}

}  // namespace

std::string NormalizeNvmlBusId(std::string_view nvml_bus_id) {
  // domain:bus:device.function with a domain of 4 or 8 hex digits.
  std::vector<absl::string_view> parts = absl::StrSplit(ToAbsl(Trim(nvml_bus_id)), ':');
  if (parts.size() != 3) return "";
  uint32_t domain = 0;
  uint32_t bus = 0;
  if (parts[0].empty() || parts[0].size() > 8 || !absl::SimpleHexAtoi(parts[0], &domain) ||
      domain > 0xffff || parts[1].size() != 2 || !absl::SimpleHexAtoi(parts[1], &bus)) {
    return "";
  }
  std::vector<absl::string_view> dev_fn = absl::StrSplit(parts[2], '.');
  uint32_t dev = 0;
  uint32_t fn = 0;
  if (dev_fn.size() != 2 || dev_fn[0].size() != 2 || dev_fn[1].size() != 1 ||
      !absl::SimpleHexAtoi(dev_fn[0], &dev) || !absl::SimpleHexAtoi(dev_fn[1], &fn) || dev > 0x1f ||
      fn > 7) {
    return "";
  }
  return FormatBusId(static_cast<int>(domain), static_cast<int>(bus), static_cast<int>(dev),
                     static_cast<int>(fn));
}

absl::StatusOr<NvmlSnapshot> ReadNvml(const std::string& library) {
  auto opened = NvmlLibrary::Open(library);
  if (!opened.ok()) return opened.status();
  const NvmlLibrary& lib = **opened;

  if (nvml::nvmlReturn_t rc = lib.init(); rc != NVML_SUCCESS) {
    return absl::UnavailableError(absl::StrCat("nvmlInit_v2 failed: ", lib.ErrorString(rc)));
  }
  NvmlSession session(lib);

  NvmlSnapshot snap;
  snap.library = library;
  char version[nvml::NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  if (lib.driver_version(version, sizeof(version)) == NVML_SUCCESS) {
    snap.driver_version = FromBuffer(version, sizeof(version));
  }
  unsigned int count = 0;
  if (nvml::nvmlReturn_t rc = lib.device_count(&count); rc != NVML_SUCCESS) {
    return absl::UnavailableError(
        absl::StrCat("nvmlDeviceGetCount_v2 failed: ", lib.ErrorString(rc)));
  }
  if (!lib.missing_optional().empty()) {
    snap.evidence.push_back(
        absl::StrCat("NVML ", library, " lacks ", absl::StrJoin(lib.missing_optional(), ", "),
                     " (older driver): the features that need them are skipped"));
  }
  for (unsigned int i = 0; i < count; ++i) {
    nvml::nvmlDevice_t handle = nullptr;
    if (nvml::nvmlReturn_t rc = lib.handle_by_index(i, &handle); rc != NVML_SUCCESS) {
      // A GPU that fell off the bus or needs a reset: not schedulable, but its index stays taken.
      snap.warnings.push_back(
          absl::StrCat("NVML device ", i, " not usable: ", lib.ErrorString(rc), "; not counted"));
      continue;
    }
    NvmlGpu gpu;
    gpu.index = static_cast<int>(i);
    nvml::nvmlPciInfo_t pci{};
    if (nvml::nvmlReturn_t rc = lib.pci_info(handle, &pci); rc != NVML_SUCCESS) {
      snap.warnings.push_back(absl::StrCat("NVML device ", i, ": no PCI info (",
                                           lib.ErrorString(rc), "); not counted"));
      continue;
    }
    gpu.bus_id = NormalizeNvmlBusId(FromBuffer(pci.busId, sizeof(pci.busId)));
    gpu.pci_device_id = pci.pciDeviceId;
    char name[nvml::NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    if (lib.name(handle, name, sizeof(name)) == NVML_SUCCESS) {
      gpu.name = FromBuffer(name, sizeof(name));
    }
    char uuid[nvml::NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (lib.uuid(handle, uuid, sizeof(uuid)) == NVML_SUCCESS) {
      gpu.uuid = FromBuffer(uuid, sizeof(uuid));
    }
    nvml::nvmlMemory_t memory{};
    if (lib.memory_info(handle, &memory) == NVML_SUCCESS) gpu.memory_bytes = memory.total;
    ReadLinks(lib, handle, gpu);
    ReadFabric(lib, handle, gpu);
    snap.gpus.push_back(std::move(gpu));
  }
  return snap;
}

}  // namespace tessera
