// Per-worker resource figures: the CPU time and memory of one worker, for the node agent's
// per-worker-type metrics (process_cpu_seconds_total, process_resident_memory_bytes).
//
//   auto usage = ReadResourceUsage({.pid = child.pid(), .cgroup_dir = cgroup->dir()});
//
// With a cgroup v2 directory (WorkerCgroup::dir()) the cgroup's files count the worker and every
// process it started, living or exited:
//   cpu.stat usage_usec            -> cpu_seconds
//   memory.current (bytes)         -> memory_bytes (includes the page cache the cgroup is charged)
//   memory.peak (bytes; Linux 5.19+) -> peak_memory_bytes
// Without one (or for a figure the cgroup lacks: memory.* without the memory controller) the
// process's own /proc files:
//   <proc>/<pid>/stat utime + stime + cutime + cstime (clock ticks) -> cpu_seconds: the process
//       and its children it has waited for; running children are not counted
//   <proc>/<pid>/status VmRSS (kB), else stat's rss (pages) -> memory_bytes
// Thread-safe: a stateless function; a call reads three or four small files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {

struct ResourceUsageSource {
  int pid = 0;                      // the worker's process; 0 when only the cgroup is known
  std::string cgroup_dir;           // its cgroup v2 directory; "" when it has none
  std::string proc_root = "/proc";  // where /proc is (tests point it at a fake tree)
};

struct ResourceUsage {
  std::optional<double> cpu_seconds;
  std::optional<uint64_t> memory_bytes;
  std::optional<uint64_t> peak_memory_bytes;
  std::string cpu_source;     // "cgroup" or "proc"; "" when cpu_seconds is absent
  std::string memory_source;  // likewise for memory_bytes
  // Files that were there but could not be read or parsed (the figure then came from /proc, or
  // is absent).
  std::vector<std::string> warnings;
};

// InvalidArgument when `source` names neither a pid nor a cgroup; NotFound when nothing could be
// read (the process has exited and no cgroup was given).
absl::StatusOr<ResourceUsage> ReadResourceUsage(const ResourceUsageSource& source);

// The CPU seconds and resident bytes in the text of /proc/<pid>/stat and /proc/<pid>/status
// (status may be ""), given the clock tick and page size. InvalidArgument when stat is malformed.
struct ProcUsage {
  double cpu_seconds = 0;
  uint64_t memory_bytes = 0;
};
absl::StatusOr<ProcUsage> ParseProcUsage(std::string_view stat, std::string_view status,
                                         long clock_ticks_per_second, long page_size);

}  // namespace tessera
