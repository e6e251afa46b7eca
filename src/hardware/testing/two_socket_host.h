// The two-socket machine the host-topology tests share, built into a FakeTree:
//   2 sockets x 4 cores x 2 threads, NUMA 0 = cpus 0-3,8-11, NUMA 1 = 4-7,12-15, 64 GiB.
//   pci0000:15 (NUMA 0), root port 15:01.0:
//     switch A (16:00.0 -> 17:00.0, 17:01.0): GPU0 18:00.0, NIC ibp1 19:00.0 (400 Gb/s)
//     switch B (1a:00.0 -> 1b:00.0):          GPU1 1c:00.0
//   pci0000:2b (NUMA 0): NIC ibp0 2b:00.0 (200 Gb/s);  pci0000:3c (NUMA 0): GPU4 3c:00.0
//   pci0000:9a (NUMA 1): GPU2 9b:00.0 on root port 9a:01.0, no NIC
//   pci0000:ac, pci0000:ae (NUMA 1): NICs ibp2 ac:00.0, ibp4 ae:00.0 (400 Gb/s)
//   pci0000:c1: NIC eth1 c1:00.0 (25 Gb/s), numa_node -1 but local_cpus of NUMA 1
//   pci0000:c2: GPU3 c2:00.0, numa_node -1 and no local_cpus
//   software interfaces: lo, veth1a2b
// Not thread-safe (writes into the tree).
#pragma once

#include "hardware/testing/fake_tree.h"

namespace tessera::testing {

void BuildTwoSocketHost(FakeTree& tree);

}  // namespace tessera::testing
