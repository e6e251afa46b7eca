// Helpers for the scheduling tests: nodes with chosen resources, labels and device links.
// Thread-compatible test code.
#pragma once

#include <memory>
#include <sstream>
#include <string>
#include <string_view>

#include "gtest/gtest.h"
#include "hardware/node_label_keys.h"
#include "labels/label.h"
#include "resources/resource_set.h"
#include "scheduling/cluster_view.h"
#include "vocabulary/slice_shape.h"

namespace tessera::testing_util {

inline ResourceSet Res(std::string_view text) { return *ParseResourceSet(text); }

// A valid slice shape, as the edges parse it: Shape("v6e", "4x4").
inline SliceShape Shape(std::string_view accelerator, std::string_view topology) {
  return *ParseSliceShape(accelerator, topology, std::nullopt);
}

// n devices, every pair linked at `kind` / `cls` (an NVSwitch fabric by default).
inline DeviceTopologyPtr FullyLinked(int n, LinkKind kind = LinkKind::kNvSwitch,
                                     BandwidthClass cls = BandwidthClass::kHigh) {
  auto t = std::make_shared<DeviceTopology>();
  t->count = n;
  t->numa_node.assign(n, -1);
  t->nearest_nic.assign(n, "");
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) t->links.push_back(DeviceLink{a, b, kind, 18, 450, cls});
  }
  return t;
}

// 8 devices in two NVLink islands {0..3} and {4..7}, nothing across; NUMA node 0 and 1.
inline DeviceTopologyPtr TwoIslands() {
  auto t = std::make_shared<DeviceTopology>();
  t->count = 8;
  for (int i = 0; i < 8; ++i) {
    t->numa_node.push_back(i / 4);
    t->nearest_nic.push_back(i < 4 ? "nic0" : "nic1");
  }
  for (int base : {0, 4}) {
    for (int a = base; a < base + 4; ++a) {
      for (int b = a + 1; b < base + 4; ++b) {
        t->links.push_back(DeviceLink{a, b, LinkKind::kNvLink, 4, 400, BandwidthClass::kHigh});
      }
    }
  }
  return t;
}

inline NodeSpec Spec(std::string id, std::string_view resources, LabelSet labels = {},
                     DeviceTopologyPtr gpus = nullptr) {
  NodeSpec spec;
  spec.id = NodeId(std::move(id));
  spec.resources = Res(resources);
  spec.labels = std::move(labels);
  if (gpus != nullptr) spec.devices.emplace("GPU", std::move(gpus));
  return spec;
}

inline NodeIndex MustAdd(ClusterView& cluster, NodeSpec spec) {
  absl::StatusOr<NodeIndex> index = cluster.AddNode(std::move(spec));
  EXPECT_TRUE(index.ok()) << index.status();
  return index.value_or(-1);
}

// The hosts of one TPU slice, "<name>-w<worker>", with the slice labels.
struct SliceOptions {
  std::string pod_type = "v6e-16";
  std::string topology = "4x4";
  int hosts = 4;
  std::string resources = "CPU=8,TPU=4";
  int skip_worker = -1;  // leave this worker out (a slice that is not intact)
};

inline void AddSlice(ClusterView& cluster, const std::string& name, const SliceOptions& o = {}) {
  for (int w = 0; w < o.hosts; ++w) {
    if (w == o.skip_worker) continue;
    LabelSet labels{{std::string(labels::kTpuSliceName), name},
                    {std::string(labels::kTpuWorkerId), std::to_string(w)},
                    {std::string(labels::kTpuTopology), o.topology},
                    {std::string(labels::kTpuPodType), o.pod_type}};
    MustAdd(cluster, Spec(name + "-w" + std::to_string(w), o.resources, labels));
  }
}

// Every node's state, totals, free amounts (per device instance too), number of allocations and
// utilization, one line per node: two views that decide alike have the same digest.
inline std::string ViewDigest(const ClusterView& cluster) {
  std::ostringstream out;
  for (NodeIndex n = 0; n < cluster.slot_count(); ++n) {
    const NodeRecord& r = cluster.node(n);
    out << r.id << " " << NodeStateName(r.state) << " total " << r.total.ToString() << " free "
        << r.available.ToString() << " held " << r.allocations.size();
    // The pack/spread key; not kept up to date on a dead node (it is in no order).
    if (r.state != NodeState::kDead) out << " util " << r.utilization_ppm;
    for (const DeviceInstances& d : r.devices) {
      out << " " << d.resource << "[";
      for (Quantity q : d.available) out << q << " ";
      out << "]";
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace tessera::testing_util
