// How big a node agent's shared-memory object store may be on this host, decided before any of
// its memory is allocated. The store's pages are allocated when it starts (src/objects/
// shared_memory.h), as shared memory the kernel cannot reclaim, so a store that does not fit
// leaves the machine-wide OOM killer to pick victims among everything else on the host.
//
//   auto memory = ReadHostMemory(Sysroot("/"));
//   auto bytes = DecideObjectStoreSize({.requested_bytes = 30ull << 30}, *memory);
//   // on a 24 GiB host: InvalidArgument, "--object-store-memory 30 GiB does not fit: this host
//   // has 23.54 GiB of memory, 19.1 GiB available, and 1.28 GiB in shared memory (other
//   // object stores are part of it); at most 17.92 GiB fits, keeping 1.18 GiB free"
//
// The rule (docs/objects.md):
// - Other stores already on the host are judged from MemAvailable: their pages are shared memory
//   (Shmem), which is not available. The error names Shmem so a reader sees where memory went.
// - Every store, together with the others starting with it, leaves a safety margin available:
//   5% of MemTotal, at least 256 MiB (kernel watermarks, page cache the host needs to make
//   progress, and the agent's own workers starting next).
// - Without a requested size, the stores starting together share 30% of MemAvailable, at most
//   2 GiB in all (a store this size costs its allocation at every start; more is asked for),
//   split evenly and rounded down to whole MiB; a share below 4 MiB holds too few large values
//   to be worth having and is refused, naming the flags that choose instead.
// Thread-safe: pure functions, except ReadHostMemory, which reads one file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "hardware/sysroot.h"

namespace tessera {

// The numbers of /proc/meminfo the rule reads, in bytes, lowered to the agent's memory cgroup
// when that has a limit (the store's pages are charged to the cgroup of the agent that touches
// them first, so the cgroup's limit binds before the host's memory does).
struct HostMemory {
  uint64_t total_bytes = 0;      // MemTotal, or the cgroup's limit when lower
  uint64_t available_bytes = 0;  // MemAvailable (what can be allocated without swapping), or
                                 // what the cgroup's limit leaves when lower
  uint64_t shared_bytes = 0;     // Shmem: shared memory and tmpfs, object stores among it
  // The memory cgroup whose limit lowered the figures above ("" when none did), its limit and
  // what it uses.
  std::string cgroup;
  uint64_t cgroup_limit_bytes = 0;
  uint64_t cgroup_usage_bytes = 0;
};

// Parses /proc/meminfo's text; `source` names it in errors. InvalidArgument when MemTotal,
// MemAvailable or Shmem is missing or is not "<number> kB".
absl::StatusOr<HostMemory> ParseMeminfo(std::string_view text, std::string_view source);
// /proc/meminfo under `root`: its read error (NotFound when missing, naming the file and, for a
// fake tree, the tree) or ParseMeminfo's; then the memory cgroup of this process
// (/proc/self/cgroup: cgroup v1's memory controller, else v2's unified one) and every cgroup
// above it: the tightest limit (memory.limit_in_bytes or memory.max, less what that cgroup uses
// now) lowers the figures. Cgroup files that are missing or unreadable set no limit.
absl::StatusOr<HostMemory> ReadHostMemory(const Sysroot& root);

// The default's parts, for the docs and the help texts that name them.
inline constexpr uint64_t kDefaultStorePercentOfAvailable = 30;
inline constexpr uint64_t kDefaultStoreCapBytes = uint64_t{2} << 30;
inline constexpr uint64_t kMinDefaultStoreShareBytes = uint64_t{4} << 20;
inline constexpr uint64_t kMinSafetyMarginBytes = uint64_t{256} << 20;
inline constexpr uint64_t kSafetyMarginPercentOfTotal = 5;

// Memory that stays available after every store: 5% of MemTotal, at least 256 MiB.
uint64_t SafetyMarginBytes(const HostMemory& memory);

// The node label that says what object store a node's agent hosts: its size as
// FormatByteQuantity writes it ("2GiB", "682MiB"), or "none" (`--object-store-memory 0`), so
// `tessera list nodes` and `tessera status` show a node without a store, and a selector can
// avoid one (`tessera.io/object-store=!none`).
inline constexpr std::string_view kObjectStoreLabel = "tessera.io/object-store";
std::string ObjectStoreLabelValue(uint64_t store_bytes);

// The value of `--object-store-memory` (tessera start, tessera up): a size with its byte unit
// ("2GiB", "512 MiB"), or 0, with or without a unit, for no store (docs/objects.md).
// InvalidArgument, one line starting "--object-store-memory: ", for a negative, malformed or
// unitless value.
absl::StatusOr<uint64_t> ParseObjectStoreMemoryFlag(std::string_view text);

struct ObjectStoreSizeRequest {
  // The size of each store (`--object-store-memory`); 0: no store, nothing to check; nullopt:
  // the default share.
  std::optional<uint64_t> requested_bytes;
  // How many agents on this host start a store of this request together (`tessera up` starts
  // one per node of its cluster file). At least 1.
  int agents = 1;
};

// The size of each store, or InvalidArgument, one line, naming the requested size (or the
// default's share), the host's memory, what is available, what shared memory holds, and what
// would fit. A requested size fits when `agents` stores of it, plus the safety margin, are at
// most MemAvailable.
absl::StatusOr<uint64_t> DecideObjectStoreSize(const ObjectStoreSizeRequest& request,
                                               const HostMemory& memory);

}  // namespace tessera
