#include "head/device_history.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

v1::DeviceSample Sample(const std::string& resource, int index, int64_t time_ms, double util) {
  v1::DeviceSample sample;
  sample.set_resource(resource);
  sample.set_index(index);
  sample.set_time_ms(time_ms);
  sample.set_utilization(util);
  return sample;
}

google::protobuf::RepeatedPtrField<v1::DeviceSample> Beat(std::vector<v1::DeviceSample> samples) {
  google::protobuf::RepeatedPtrField<v1::DeviceSample> out;
  for (auto& s : samples) *out.Add() = std::move(s);
  return out;
}

TEST(DeviceHistoryTest, KeepsTheNewestReadingsOfEachDeviceOldestFirst) {
  DeviceHistory history(/*max_samples=*/2);
  history.Record("n1", Beat({Sample("GPU", 0, 1000, 0.1), Sample("GPU", 1, 1000, 0.5)}));
  history.Record("n1", Beat({Sample("GPU", 0, 2000, 0.2)}));
  history.Record("n1", Beat({Sample("GPU", 0, 3000, 0.3)}));
  history.Record("n1", Beat({Sample("GPU", 0, 2500, 0.9)}));  // older than the newest: ignored
  const auto devices = history.Get("n1");
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].first, (DeviceHistory::Key{"GPU", 0}));
  ASSERT_EQ(devices[0].second.size(), 2u);
  EXPECT_EQ(devices[0].second[0].time_ms(), 2000);
  EXPECT_EQ(devices[0].second[1].time_ms(), 3000);
  EXPECT_EQ(history.Latest().at("n1").size(), 2u);
  EXPECT_TRUE(history.Get("n2").empty());
  history.Forget("n1");
  EXPECT_TRUE(history.Get("n1").empty());
}

TEST(DeviceHistoryTest, ANodeCannotGrowPastItsDeviceBound) {
  DeviceHistory history(/*max_samples=*/4, /*max_devices_per_node=*/2);
  history.Record("n1",
                 Beat({Sample("GPU", 0, 1, 0), Sample("GPU", 1, 1, 0), Sample("GPU", 2, 1, 0)}));
  EXPECT_EQ(history.Get("n1").size(), 2u);
}

}  // namespace
}  // namespace tessera
