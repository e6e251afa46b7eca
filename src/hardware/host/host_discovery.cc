// DiscoverHostTopology: hwloc for CPUs, memory, NUMA and PCI locality; sysfs for NICs.
#include "hardware/host/host_topology.h"
#include "hardware/host/hwloc_reader.h"
#include "hardware/host/nic_discovery.h"

namespace tessera {

absl::StatusOr<HostTopology> DiscoverHostTopology(const Sysroot& sysroot) {
  auto host = ReadHwlocTopology(sysroot);
  if (!host.ok()) return host.status();
  host->source = "hwloc";
  // hwloc's own network OS devices carry no PCI path, speed or sysfs NUMA node, so NICs are
  // read from sysfs; hwloc's PCI locality then fills a NUMA node the kernel left at -1.
  const PciInventory pci = PciInventory::Scan(sysroot, &host->warnings);
  host->nics = DiscoverNics(sysroot, pci, host->warnings);
  for (Nic& nic : host->nics) {
    if (nic.numa_node < 0) nic.numa_node = NearestNumaNode(*host, pci, nic.pci_bus_id);
  }
  return host;
}

}  // namespace tessera
