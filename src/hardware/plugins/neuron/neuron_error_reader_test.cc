// AWS Neuron device messages from the driver's error counters: the trn1.32xlarge fixture's
// counts as a snapshot takes them, a rise of a core's and of its chip's reported (the chip's
// once), and a counter cleared since reporting nothing.
#include "hardware/plugins/neuron/neuron_error_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hardware/plugins/neuron/neuron_plugin.h"
#include "hardware/testing/fake_tree.h"
#include "hardware/testing/plugin_test_support.h"

namespace tessera::testing {
namespace {

using ::testing::Pair;

std::unique_ptr<DeviceErrorReader> ReaderOn(const std::string& root) {
  return MakeNeuronPlugin()->OpenErrorWatch(DeviceErrorContext{Sysroot(root), {}});
}

TEST(NeuronErrorReaderTest, Trn1CountersAreTheFixturesAndARiseIsReported) {
  const std::vector<Device> all = DetectOnFixture(*MakeNeuronPlugin(), "trn1-32xlarge");
  ASSERT_EQ(all.size(), 32u);
  const std::vector<Device> chip2(all.begin() + 4, all.begin() + 6);  // NeuronCores 4 and 5
  auto reader = ReaderOn(FixturePath("trn1-32xlarge"));
  const DeviceErrorSnapshot start = reader->Snapshot(chip2, kFirstReading);
  EXPECT_THAT(start.marks, ElementsAre(Pair("4/hw_error", 0u), Pair("5/hw_error", 1u),
                                       Pair("chip2/mem_ecc_repairable_uncorrected", 0u),
                                       Pair("chip2/mem_ecc_uncorrected", 1u),
                                       Pair("chip2/sram_ecc_uncorrected", 0u)));
  EXPECT_THAT(reader->MessagesSince(start, chip2, kFirstReading).messages, IsEmpty());
  DeviceErrorSnapshot earlier = start;
  earlier.marks["5/hw_error"] = 0;
  earlier.marks["chip2/mem_ecc_uncorrected"] = 0;
  EXPECT_THAT(reader->MessagesSince(earlier, chip2, kFirstReading).messages,
              // The chip's with its first core (4), then core 5's.
              ElementsAre("Neuron device 2: uncorrected device-memory ECC errors rose by 1",
                          "NeuronCore 5: hardware errors (NRT_HW_ERROR) rose by 1"));
}

TEST(NeuronErrorReaderTest, AChipsCountersAreSaidOnceAndAClearedCounterSaysNothing) {
  FakeTree tree;
  const std::string chip = "/sys/devices/virtual/neuron_device/neuron0";
  tree.Write(chip + "/neuron_core0/stats/status/hw_error/total", "0\n");
  tree.Write(chip + "/neuron_core1/stats/status/hw_error/total", "7\n");
  tree.Write(chip + "/stats/hardware/sram_ecc_uncorrected/total", "0\n");
  const std::vector<Device> cores = {
      {.family = "neuron", .index = 0, .attributes = {{"chip", "0"}, {"core_in_chip", "0"}}},
      {.family = "neuron", .index = 1, .attributes = {{"chip", "0"}, {"core_in_chip", "1"}}}};
  auto reader = ReaderOn(tree.root());
  const DeviceErrorSnapshot start = reader->Snapshot(cores, kFirstReading);
  tree.Write(chip + "/neuron_core1/stats/status/hw_error/total", "0\n");  // written to: cleared
  tree.Write(chip + "/stats/hardware/sram_ecc_uncorrected/total", "2\n");
  EXPECT_THAT(reader->MessagesSince(start, cores, kFirstReading).messages,
              ElementsAre("Neuron device 0: uncorrected SRAM ECC errors rose by 2"));
}

}  // namespace
}  // namespace tessera::testing
