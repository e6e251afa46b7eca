#include "hardware/host/hwloc_reader.h"

#include <hwloc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"

namespace tessera {
namespace {

// hwloc 2.x takes a fake filesystem root only from the HWLOC_FSROOT environment variable (the
// hwloc_topology_set_fsroot() call of 1.x is gone), read when the Linux component is
// instantiated inside hwloc_topology_load(). The environment is process-wide, so every hwloc
// load in Tessera goes through this mutex: a fake-tree load never leaks its root into a
// concurrent live load. (Code outside this file must not read HWLOC_* variables meanwhile.)
// A root other than "/" also makes hwloc treat the topology as not this system, so no
// HWLOC_THISSYSTEM setting is needed (checked with lstopo on hwloc 2.9).
absl::Mutex hwloc_load_mutex(absl::kConstInit);

constexpr char kFsRootVariable[] = "HWLOC_FSROOT";

// Sets an environment variable for the lifetime of the object, then restores the old value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_.has_value()) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

struct BitmapDeleter {
  void operator()(hwloc_bitmap_s* b) const { hwloc_bitmap_free(b); }
};

std::string CpuList(hwloc_const_bitmap_t set) {
  if (set == nullptr || hwloc_bitmap_iszero(set)) return "";
  char* text = nullptr;
  if (hwloc_bitmap_list_asprintf(&text, set) < 0 || text == nullptr) return "";
  std::string out(text);
  std::free(text);
  return out;
}

void ReadNumaNodes(hwloc_topology_t topo, HostTopology& host) {
  const int count = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < count; ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
    NumaNode n;
    n.os_index = static_cast<int>(node->os_index);
    n.memory_bytes = node->attr != nullptr ? node->attr->numanode.local_memory : 0;
    n.cpulist = CpuList(node->cpuset);
    host.numa_nodes.push_back(std::move(n));
  }
  std::sort(host.numa_nodes.begin(), host.numa_nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.os_index < b.os_index; });

  // The OS-provided latency matrix (the kernel's nodeN/distance), when hwloc has one.
  unsigned nr = 1;
  hwloc_distances_s* distances = nullptr;
  if (hwloc_distances_get_by_type(topo, HWLOC_OBJ_NUMANODE, &nr, &distances,
                                  HWLOC_DISTANCES_KIND_FROM_OS | HWLOC_DISTANCES_KIND_MEANS_LATENCY,
                                  0) != 0 ||
      nr == 0) {
    return;
  }
  const unsigned n = distances->nbobjs;
  auto position = [&](unsigned os_index) -> int {
    for (size_t i = 0; i < host.numa_nodes.size(); ++i) {
      if (host.numa_nodes[i].os_index == static_cast<int>(os_index)) return static_cast<int>(i);
    }
    return -1;
  };
  if (n == host.numa_nodes.size()) {
    for (unsigned i = 0; i < n; ++i) {
      const int row = position(distances->objs[i]->os_index);
      if (row < 0) continue;
      std::vector<int>& out = host.numa_nodes[row].distances;
      out.assign(n, 0);
      for (unsigned j = 0; j < n; ++j) {
        const int column = position(distances->objs[j]->os_index);
        if (column >= 0) out[column] = static_cast<int>(distances->values[i * n + j]);
      }
    }
  }
  hwloc_distances_release(topo, distances);
}

// Each PCI function's NUMA node as hwloc places it: the nodeset of its nearest CPU-side ancestor,
// kept only when that is exactly one node. On Linux hwloc derives this from the function's
// local_cpus, which also covers functions whose numa_node attribute is -1.
void ReadPciLocality(hwloc_topology_t topo, HostTopology& host) {
  for (hwloc_obj_t dev = hwloc_get_next_pcidev(topo, nullptr); dev != nullptr;
       dev = hwloc_get_next_pcidev(topo, dev)) {
    hwloc_obj_t parent = hwloc_get_non_io_ancestor_obj(topo, dev);
    if (parent == nullptr || parent->nodeset == nullptr ||
        hwloc_bitmap_weight(parent->nodeset) != 1) {
      continue;
    }
    const auto& pci = dev->attr->pcidev;
    char bus_id[32];
    snprintf(bus_id, sizeof(bus_id), "%04x:%02x:%02x.%01x", pci.domain, pci.bus, pci.dev, pci.func);
    host.pci_numa_locality[bus_id] = hwloc_bitmap_first(parent->nodeset);
  }
}

std::string CpuModel(hwloc_topology_t topo) {
  const int packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
  for (int i = 0; i < packages; ++i) {
    hwloc_obj_t p = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, i);
    if (const char* model = hwloc_obj_get_info_by_name(p, "CPUModel")) {
      std::string m(model);
      while (!m.empty() && m.back() == ' ') m.pop_back();  // cpuid pads the brand string
      if (!m.empty()) return m;
    }
  }
  if (const char* model = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topo), "CPUModel")) {
    return model;
  }
  return "";
}

absl::StatusOr<TopologyPtr> LoadTopology(const Sysroot& sysroot)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(hwloc_load_mutex) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return absl::InternalError("hwloc_topology_init failed");
  TopologyPtr topo(raw);
  // PCI functions are kept so hwloc computes their CPU locality; bridges and OS devices
  // (block, net, ...) are not needed: NICs are read from /sys/class/net, PCI paths from sysfs.
  hwloc_topology_set_type_filter(raw, HWLOC_OBJ_PCI_DEVICE, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_type_filter(raw, HWLOC_OBJ_BRIDGE, HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_type_filter(raw, HWLOC_OBJ_OS_DEVICE, HWLOC_TYPE_FILTER_KEEP_NONE);
  if (sysroot.is_live()) {
    if (hwloc_topology_load(raw) != 0) return absl::InternalError("hwloc_topology_load failed");
    return topo;
  }
  // A fake tree: only the Linux component may run. The x86 component would execute cpuid on
  // this machine and stamp its caches and CPU model onto the fake packages, and no_os would
  // fall back to this machine's processor count.
  hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
  hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "no_os");
  ScopedEnv fsroot(kFsRootVariable, sysroot.root());
  if (hwloc_topology_load(raw) != 0) {
    return absl::NotFoundError(absl::StrCat(
        "hwloc found no CPU topology under ", sysroot.root(),
        " (it reads /sys/devices/system/cpu/cpuN/topology/package_cpus and core_cpus, or the "
        "older core_siblings and thread_siblings masks)"));
  }
  return topo;
}

}  // namespace

namespace {

// MemTotal from /proc/meminfo, in bytes; nullopt when the file or the line is missing.
std::optional<uint64_t> MemTotalBytes(const Sysroot& sysroot) {
  auto meminfo = sysroot.ReadFile("/proc/meminfo");
  if (!meminfo.ok()) return std::nullopt;
  for (absl::string_view line : absl::StrSplit(*meminfo, '\n')) {
    if (!absl::ConsumePrefix(&line, "MemTotal:")) continue;
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumeSuffix(&line, "kB")) return std::nullopt;
    uint64_t kib = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kib)) return std::nullopt;
    return kib * 1024;
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<HostTopology> ReadHwlocTopology(const Sysroot& sysroot) {
  if (!sysroot.is_live() && !sysroot.IsDirectory("/sys/devices/system/cpu")) {
    return absl::NotFoundError(absl::StrCat("no /sys/devices/system/cpu under ", sysroot.root(),
                                            ": the tree describes no CPUs"));
  }
  absl::MutexLock lock(&hwloc_load_mutex);
  auto topo_or = LoadTopology(sysroot);
  if (!topo_or.ok()) return topo_or.status();
  hwloc_topology_t topo = topo_or->get();

  HostTopology host;
  host.sockets = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
  host.cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  host.pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  host.memory_bytes = hwloc_get_root_obj(topo)->total_memory;
  if (host.pus <= 0) {
    return absl::NotFoundError(absl::StrCat("hwloc found no CPUs under ", sysroot.root()));
  }
  // Some VMs and containers hide the package or core level; count what a scheduler can use.
  if (host.cores <= 0) {
    host.cores = host.pus;
    host.warnings.push_back("hwloc reported no cores; counting each hardware thread as a core");
  }
  if (host.sockets <= 0) {
    host.sockets = 1;
    host.warnings.push_back("hwloc reported no sockets; assuming 1");
  }
  host.cpu_model = CpuModel(topo);
  ReadNumaNodes(topo, host);
  ReadPciLocality(topo, host);
  // The kernel's MemTotal is what the node can use. hwloc adds up the NUMA nodes' memory, which
  // some VMs under-report (memory hot-added outside any node: seen on this project's CI VMs as
  // 8 GiB in node0 against 24 GiB MemTotal).
  if (auto meminfo = MemTotalBytes(sysroot); meminfo.has_value() && *meminfo > host.memory_bytes) {
    host.memory_bytes = *meminfo;
  }
  return host;
}

}  // namespace tessera
