#include "node/object_store_sizing.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/string_util.h"
#include "process/cgroup.h"
#include "resources/byte_size.h"

namespace tessera {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// The value of "<key>: <number> kB" in bytes; nullopt when the line is missing; an error when
// it is malformed.
absl::StatusOr<std::optional<uint64_t>> MeminfoValue(std::string_view text, std::string_view key,
                                                     std::string_view source) {
  for (absl::string_view line : absl::StrSplit(ToAbsl(text), '\n')) {
    if (!absl::ConsumePrefix(&line, ToAbsl(key)) || !absl::ConsumePrefix(&line, ":")) continue;
    absl::string_view value = absl::StripAsciiWhitespace(line);
    uint64_t kib = 0;
    if (!absl::ConsumeSuffix(&value, "kB") ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(value), &kib) ||
        kib > std::numeric_limits<uint64_t>::max() / 1024) {
      return absl::InvalidArgumentError(absl::StrCat(ToAbsl(source), ": ", ToAbsl(key), " is \"",
                                                     absl::StripAsciiWhitespace(line),
                                                     "\", not a number of kB"));
    }
    return std::optional<uint64_t>(kib * 1024);
  }
  return std::optional<uint64_t>();
}

uint64_t SaturatingSub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) {
    return std::numeric_limits<uint64_t>::max();
  }
  return a * b;
}

// What the host has, for every refusal: "this host has ..., ... available, and ... in shared
// memory (...)".
std::string DescribeHost(const HostMemory& memory) {
  std::string cgroup;
  if (!memory.cgroup.empty()) {
    cgroup = absl::StrCat(" (within memory cgroup ", memory.cgroup, ", limited to ",
                          FormatBytes(memory.cgroup_limit_bytes), " and using ",
                          FormatBytes(memory.cgroup_usage_bytes), ")");
  }
  return absl::StrCat("this host has ", FormatBytes(memory.total_bytes), " of memory, ",
                      FormatBytes(memory.available_bytes), " available", cgroup, ", and ",
                      FormatBytes(memory.shared_bytes),
                      " in shared memory (other object stores are part of it)");
}

// A number of bytes in a cgroup file ("max" and unreadable files: none).
std::optional<uint64_t> CgroupBytes(const Sysroot& root, const std::string& file) {
  auto text = root.ReadFile(file);
  if (!text.ok()) return std::nullopt;
  uint64_t bytes = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &bytes)) return std::nullopt;
  return bytes;
}

// Lowers `memory` to the tightest limit of the cgroup at `path` (under `mount`) and the ones
// above it.
void ApplyCgroupLimits(const Sysroot& root, const std::string& mount, std::string path,
                       const char* limit_file, const char* usage_file, HostMemory* memory) {
  while (!path.empty() && path != "/") {
    const std::string dir = absl::StrCat(mount, path);
    std::optional<uint64_t> limit = CgroupBytes(root, absl::StrCat(dir, "/", limit_file));
    // Unlimited v1 cgroups read as a huge page-rounded number: above the host, no limit.
    if (limit.has_value() && *limit < memory->total_bytes) {
      const uint64_t usage = CgroupBytes(root, absl::StrCat(dir, "/", usage_file)).value_or(0);
      const uint64_t left = SaturatingSub(*limit, usage);
      if (left < memory->available_bytes || memory->cgroup.empty()) {
        memory->cgroup = path;
        memory->cgroup_limit_bytes = *limit;
        memory->cgroup_usage_bytes = usage;
      }
      memory->total_bytes = std::min(memory->total_bytes, *limit);
      memory->available_bytes = std::min(memory->available_bytes, left);
    }
    const size_t slash = path.rfind('/');
    path = slash == 0 || slash == std::string::npos ? "" : path.substr(0, slash);
  }
}

void ApplyCgroup(const Sysroot& root, HostMemory* memory) {
  auto text = root.ReadFile("/proc/self/cgroup");
  if (!text.ok()) return;
  // cgroup v1's memory controller line ("N:...,memory,...:<path>") wins over the unified one.
  std::optional<std::string> v1;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3) continue;
    for (absl::string_view controller : absl::StrSplit(parts[1], ',')) {
      if (controller == "memory") v1 = parts[2];
    }
  }
  if (v1.has_value()) {
    ApplyCgroupLimits(root, "/sys/fs/cgroup/memory", *v1, "memory.limit_in_bytes",
                      "memory.usage_in_bytes", memory);
  } else if (absl::StatusOr<std::string> v2 = ParseCgroupV2Path(*text); v2.ok()) {
    ApplyCgroupLimits(root, "/sys/fs/cgroup", *v2, "memory.max", "memory.current", memory);
  }
}

absl::StatusOr<uint64_t> DecideRequested(uint64_t requested, int agents, const HostMemory& memory) {
  const uint64_t margin = SafetyMarginBytes(memory);
  const uint64_t fits = SaturatingSub(memory.available_bytes, margin);
  const uint64_t total = SaturatingMul(requested, static_cast<uint64_t>(agents));
  if (total <= fits) return requested;
  std::string asked = absl::StrCat("--object-store-memory ", FormatBytes(requested));
  if (agents > 1) {
    absl::StrAppend(&asked, " for each of ", agents, " node agents (", FormatBytes(total),
                    " in all)");
  }
  std::string room;
  if (fits == 0) {
    room = "nothing fits";
  } else if (agents > 1) {
    room =
        absl::StrCat("at most ", FormatBytes(fits / static_cast<uint64_t>(agents)), " each fits");
  } else {
    room = absl::StrCat("at most ", FormatBytes(fits), " fits");
  }
  return absl::InvalidArgumentError(absl::StrCat(asked, " does not fit: ", DescribeHost(memory),
                                                 "; ", room, ", keeping ", FormatBytes(margin),
                                                 " free"));
}

absl::StatusOr<uint64_t> DecideDefault(int agents, const HostMemory& memory) {
  const uint64_t margin = SafetyMarginBytes(memory);
  const uint64_t fraction = memory.available_bytes / 100 * kDefaultStorePercentOfAvailable;
  const uint64_t total =
      std::min({fraction, kDefaultStoreCapBytes, SaturatingSub(memory.available_bytes, margin)});
  const uint64_t share = total / static_cast<uint64_t>(agents) / kMiB * kMiB;
  if (share >= kMinDefaultStoreShareBytes) return share;
  const std::string split =
      agents > 1 ? absl::StrCat(", split among ", agents, " node agents: ",
                                FormatBytes(total / static_cast<uint64_t>(agents)), " each")
                 : absl::StrCat(": ", FormatBytes(total));
  return absl::InvalidArgumentError(absl::StrCat(
      "the default object store (", kDefaultStorePercentOfAvailable,
      "% of the available memory, at most ", FormatBytes(kDefaultStoreCapBytes), ", keeping ",
      FormatBytes(margin), " free", split, ") is below ", FormatBytes(kMinDefaultStoreShareBytes),
      ": ", DescribeHost(memory), "; give --object-store-memory SIZE, or 0 for no store"));
}

}  // namespace

std::string ObjectStoreLabelValue(uint64_t store_bytes) {
  if (store_bytes == 0) return "none";
  auto quantity = Quantity::FromIntChecked(
      static_cast<int64_t>(std::min<uint64_t>(store_bytes, std::numeric_limits<int64_t>::max())));
  return quantity.ok() ? FormatByteQuantity(*quantity) : absl::StrCat(store_bytes, "B");
}

absl::StatusOr<uint64_t> ParseObjectStoreMemoryFlag(std::string_view text) {
  const absl::string_view trimmed = absl::StripAsciiWhitespace(ToAbsl(text));
  // A bare zero needs no unit: it turns the store off.
  if (!trimmed.empty() && trimmed.find_first_not_of('0') == absl::string_view::npos) return 0;
  auto bytes = ParseByteSize(text);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--object-store-memory: ", bytes.status().message(), "; 0 turns the store off"));
  }
  return *bytes;
}

absl::StatusOr<HostMemory> ParseMeminfo(std::string_view text, std::string_view source) {
  HostMemory memory;
  for (auto [key, field] : {std::pair{"MemTotal", &memory.total_bytes},
                            {"MemAvailable", &memory.available_bytes},
                            {"Shmem", &memory.shared_bytes}}) {
    auto value = MeminfoValue(text, key, source);
    if (!value.ok()) return value.status();
    if (!value->has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(ToAbsl(source), " has no ", key,
                       " line, so the object store cannot be sized against this host's "
                       "memory"));
    }
    *field = **value;
  }
  return memory;
}

absl::StatusOr<HostMemory> ReadHostMemory(const Sysroot& root) {
  constexpr std::string_view kMeminfo = "/proc/meminfo";
  auto text = root.ReadFile(kMeminfo);
  if (!text.ok()) {
    // Sysroot names the Linux path; a fake tree's error says which tree too.
    return absl::Status(
        text.status().code(),
        absl::StrCat("sizing the object store: ", text.status().message(),
                     root.is_live() ? "" : absl::StrCat(" (under ", root.root(), ")")));
  }
  auto memory = ParseMeminfo(*text, root.HostPath(kMeminfo));
  if (memory.ok()) ApplyCgroup(root, &*memory);
  return memory;
}

uint64_t SafetyMarginBytes(const HostMemory& memory) {
  return std::max(memory.total_bytes / 100 * kSafetyMarginPercentOfTotal, kMinSafetyMarginBytes);
}

absl::StatusOr<uint64_t> DecideObjectStoreSize(const ObjectStoreSizeRequest& request,
                                               const HostMemory& memory) {
  if (request.agents < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("object stores are sized for at least 1 agent, not ", request.agents));
  }
  if (!request.requested_bytes.has_value()) return DecideDefault(request.agents, memory);
  if (*request.requested_bytes == 0) return 0;
  return DecideRequested(*request.requested_bytes, request.agents, memory);
}

}  // namespace tessera
