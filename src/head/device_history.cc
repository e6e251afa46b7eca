#include "head/device_history.h"

namespace tessera {

void DeviceHistory::Record(const std::string& node_id,
                           const google::protobuf::RepeatedPtrField<v1::DeviceSample>& samples) {
  if (samples.empty()) return;
  absl::MutexLock lock(&mu_);
  auto& devices = nodes_[node_id];
  for (const v1::DeviceSample& sample : samples) {
    const Key key{sample.resource(), sample.index()};
    auto it = devices.find(key);
    if (it == devices.end()) {
      if (devices.size() >= max_devices_per_node_) continue;
      it = devices.emplace(key, std::deque<v1::DeviceSample>()).first;
    }
    std::deque<v1::DeviceSample>& history = it->second;
    if (!history.empty() && sample.time_ms() <= history.back().time_ms()) continue;
    history.push_back(sample);
    while (history.size() > max_samples_) history.pop_front();
  }
}

void DeviceHistory::RecordUsage(const std::string& node_id, const v1::NodeUsage& usage) {
  absl::MutexLock lock(&mu_);
  v1::NodeUsage& kept = usage_[node_id];
  if (usage.time_ms() >= kept.time_ms()) kept = usage;
}

void DeviceHistory::Forget(const std::string& node_id) {
  absl::MutexLock lock(&mu_);
  nodes_.erase(node_id);
  usage_.erase(node_id);
}

std::optional<v1::NodeUsage> DeviceHistory::Usage(const std::string& node_id) const {
  absl::MutexLock lock(&mu_);
  auto it = usage_.find(node_id);
  if (it == usage_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::pair<DeviceHistory::Key, std::vector<v1::DeviceSample>>> DeviceHistory::Get(
    const std::string& node_id) const {
  std::vector<std::pair<Key, std::vector<v1::DeviceSample>>> out;
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return out;
  for (const auto& [key, history] : it->second) {
    out.emplace_back(key, std::vector<v1::DeviceSample>(history.begin(), history.end()));
  }
  return out;
}

std::map<std::string, std::vector<v1::DeviceSample>> DeviceHistory::Latest() const {
  std::map<std::string, std::vector<v1::DeviceSample>> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [node, devices] : nodes_) {
    for (const auto& [key, history] : devices) {
      if (!history.empty()) out[node].push_back(history.back());
    }
  }
  return out;
}

}  // namespace tessera
