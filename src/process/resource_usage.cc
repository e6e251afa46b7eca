#include "process/resource_usage.h"

#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/string_util.h"
#include "process/file_util.h"

namespace tessera {
namespace {

// Fields of /proc/<pid>/stat after the command's closing ')': index 0 is field 3 (state).
constexpr size_t kUtime = 14 - 3;
constexpr size_t kStime = 15 - 3;
constexpr size_t kCutime = 16 - 3;
constexpr size_t kCstime = 17 - 3;
constexpr size_t kRss = 24 - 3;

// The kB of "VmRSS:   1234 kB" in /proc/<pid>/status, nullopt when there is no such line
// (kernel threads, zombies).
std::optional<uint64_t> VmRssKib(std::string_view status) {
  for (absl::string_view line : absl::StrSplit(ToAbsl(status), '\n')) {
    if (!absl::ConsumePrefix(&line, "VmRSS:")) continue;
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    uint64_t kib = 0;
    if (words.size() == 2 && words[1] == "kB" && absl::SimpleAtoi(words[0], &kib)) return kib;
    return std::nullopt;
  }
  return std::nullopt;
}

// A cgroup file's single number ("max" is no number).
absl::StatusOr<uint64_t> ReadCgroupNumber(const std::string& path) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  uint64_t value = 0;
  if (!absl::SimpleAtoi(ToAbsl(Trim(*text)), &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", Quote(Trim(*text)), " is not a byte count"));
  }
  return value;
}

void ReadCgroup(const std::string& dir, ResourceUsage& usage) {
  const std::string cpu_stat = dir + "/cpu.stat";
  absl::StatusOr<std::string> text = ReadWholeFile(cpu_stat);
  absl::StatusOr<int64_t> usec =
      text.ok() ? FindKeyedCounter(*text, "usage_usec") : absl::StatusOr<int64_t>(text.status());
  if (usec.ok() && *usec >= 0) {
    usage.cpu_seconds = static_cast<double>(*usec) / 1e6;
    usage.cpu_source = "cgroup";
  } else {
    usage.warnings.push_back(
        absl::StrCat(cpu_stat, ": ", usec.ok() ? "negative usage_usec" : usec.status().message()));
  }
  // memory.current exists only with the memory controller; its absence is no warning.
  absl::StatusOr<uint64_t> current = ReadCgroupNumber(dir + "/memory.current");
  if (current.ok()) {
    usage.memory_bytes = *current;
    usage.memory_source = "cgroup";
    if (absl::StatusOr<uint64_t> peak = ReadCgroupNumber(dir + "/memory.peak"); peak.ok()) {
      usage.peak_memory_bytes = *peak;
    }
  } else if (!absl::IsNotFound(current.status())) {
    usage.warnings.push_back(std::string(current.status().message()));
  }
}

}  // namespace

absl::StatusOr<ProcUsage> ParseProcUsage(std::string_view stat, std::string_view status,
                                         long clock_ticks_per_second, long page_size) {
  // The command (field 2) may hold spaces and parentheses: fields resume after the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos) {
    return absl::InvalidArgumentError("stat has no ')' closing the command");
  }
  std::vector<absl::string_view> fields =
      absl::StrSplit(ToAbsl(stat.substr(close + 1)), ' ', absl::SkipWhitespace());
  if (fields.size() <= kRss) {
    return absl::InvalidArgumentError(
        absl::StrCat("stat has ", fields.size() + 2, " fields, fewer than ", kRss + 3));
  }
  uint64_t ticks = 0;
  for (size_t i : {kUtime, kStime, kCutime, kCstime}) {
    int64_t t = 0;  // cutime and cstime are signed in the kernel's format
    if (!absl::SimpleAtoi(fields[i], &t) || t < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("stat field ", i + 3, " \"", fields[i], "\" is not a tick count"));
    }
    ticks += static_cast<uint64_t>(t);
  }
  ProcUsage usage;
  usage.cpu_seconds = static_cast<double>(ticks) / static_cast<double>(clock_ticks_per_second);
  if (std::optional<uint64_t> kib = VmRssKib(status)) {
    usage.memory_bytes = *kib * 1024;
  } else {
    int64_t pages = 0;
    if (!absl::SimpleAtoi(fields[kRss], &pages) || pages < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("stat field 24 \"", fields[kRss], "\" is not a page count"));
    }
    usage.memory_bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  }
  return usage;
}

absl::StatusOr<ResourceUsage> ReadResourceUsage(const ResourceUsageSource& source) {
  if (source.pid <= 0 && source.cgroup_dir.empty()) {
    return absl::InvalidArgumentError("resource usage needs a pid or a cgroup directory");
  }
  ResourceUsage usage;
  if (!source.cgroup_dir.empty()) ReadCgroup(source.cgroup_dir, usage);
  const bool need_proc = !usage.cpu_seconds || !usage.memory_bytes;
  if (need_proc && source.pid > 0) {
    const std::string dir = absl::StrCat(source.proc_root, "/", source.pid);
    absl::StatusOr<std::string> stat = ReadWholeFile(dir + "/stat");
    absl::StatusOr<std::string> status = ReadWholeFile(dir + "/status");
    absl::StatusOr<ProcUsage> proc =
        stat.ok() ? ParseProcUsage(*stat, status.ok() ? *status : "", ::sysconf(_SC_CLK_TCK),
                                   ::sysconf(_SC_PAGESIZE))
                  : absl::StatusOr<ProcUsage>(stat.status());
    if (proc.ok()) {
      if (!usage.cpu_seconds) {
        usage.cpu_seconds = proc->cpu_seconds;
        usage.cpu_source = "proc";
      }
      if (!usage.memory_bytes) {
        usage.memory_bytes = proc->memory_bytes;
        usage.memory_source = "proc";
      }
    } else if (!absl::IsNotFound(proc.status()) || !source.cgroup_dir.empty()) {
      usage.warnings.push_back(absl::StrCat(dir, "/stat: ", proc.status().message()));
    } else {
      return absl::NotFoundError(
          absl::StrCat("process ", source.pid, " is gone (", proc.status().message(), ")"));
    }
  }
  if (!usage.cpu_seconds && !usage.memory_bytes) {
    return absl::NotFoundError(
        absl::StrCat("no resource figures for ",
                     source.pid > 0 ? absl::StrCat("process ", source.pid) : source.cgroup_dir,
                     ": ", absl::StrJoin(usage.warnings, "; ")));
  }
  return usage;
}

}  // namespace tessera
