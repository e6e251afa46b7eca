// DeviceHistory: the latest readings of every node, as agents send them in heartbeats: its
// devices' (HeartbeatRequest.device_samples), kept per device for the dashboard's time series
// (the newest max_samples per device, the oldest dropped), and what its workers use
// (HeartbeatRequest.usage, the newest only); both are `tessera status`'s use beside
// reservation. A node's readings go when the node is forgotten.
//
// Thread-safety: one mutex of its own (a leaf lock). Cost: Record O(samples), Get O(history of
// the node).
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "tessera/v1/common.pb.h"

namespace tessera {

class DeviceHistory {
 public:
  explicit DeviceHistory(size_t max_samples = 120, size_t max_devices_per_node = 256)
      : max_samples_(max_samples), max_devices_per_node_(max_devices_per_node) {}

  // Appends one heartbeat's readings of `node_id`'s devices (a device past the per-node bound,
  // or a reading older than the device's newest, is ignored).
  void Record(const std::string& node_id,
              const google::protobuf::RepeatedPtrField<v1::DeviceSample>& samples)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The node's workers' use, replacing an older one.
  void RecordUsage(const std::string& node_id, const v1::NodeUsage& usage) ABSL_LOCKS_EXCLUDED(mu_);
  void Forget(const std::string& node_id) ABSL_LOCKS_EXCLUDED(mu_);

  // Each device of the node that sent readings, by (resource, index), oldest reading first.
  using Key = std::pair<std::string, int>;
  std::vector<std::pair<Key, std::vector<v1::DeviceSample>>> Get(const std::string& node_id) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The newest reading of each device of every node, by node id.
  std::map<std::string, std::vector<v1::DeviceSample>> Latest() const ABSL_LOCKS_EXCLUDED(mu_);
  // The newest use of the node's workers; nullopt when its agent sent none.
  std::optional<v1::NodeUsage> Usage(const std::string& node_id) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const size_t max_samples_;
  const size_t max_devices_per_node_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::map<Key, std::deque<v1::DeviceSample>>> nodes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, v1::NodeUsage> usage_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera
