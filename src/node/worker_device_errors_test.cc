// WorkerDeviceErrors on the H100 fixture probed as a node (its kernel log a file the test
// writes records into): a failed worker hears of its own GPUs only, a worker that succeeded or
// held no GPU hears nothing, a simulated node reads nothing; and the one-line join's bounds.
#include "node/worker_device_errors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hardware/node_discovery.h"
#include "hardware/testing/fake_tree.h"
#include "node/agent_test_util.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Fixture(const std::string& machine) {
  return std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/hardware/" + machine;
}

void Append(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::app) << text;
}

Allocation Gpus(std::vector<int> instances) {
  Allocation allocation;
  allocation.devices.push_back(DeviceGrant{.resource = "GPU", .instances = std::move(instances)});
  return allocation;
}

class WorkerDeviceErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DiscoveryOptions options;
    options.sysroot = Fixture("h100-sxm-8");
    options.environment = Environment();
    auto node = DiscoverNode(options);
    ASSERT_TRUE(node.ok()) << node.status();
    hardware_ = *std::move(node);
    kmsg_ = scratch_.Write("/kmsg");
  }
  // The PCI address of GPU instance i, and how an Xid record names it.
  std::string BusId(size_t i) const { return hardware_.VisibleFamilies()[0].visible[i].pci_bus_id; }
  std::string XidRecord(int seq, size_t gpu, int code) const {
    const std::string bus = BusId(gpu);
    return absl::StrCat("3,", seq, ",1,-;NVRM: Xid (PCI:", bus.substr(0, bus.rfind('.')),
                        "): ", code, ", pid=9, name=python3, GPU has fallen off the bus.\n");
  }

  NodeHardware hardware_;
  testing::FakeTree scratch_;
  std::string kmsg_;
};

TEST_F(WorkerDeviceErrorsTest, AFailedWorkerHearsOfItsOwnGpusOnly) {
  WorkerDeviceErrors errors(hardware_, Sysroot(Fixture("h100-sxm-8")), {.kernel_log = kmsg_},
                            "node agent n1");
  errors.Started(WorkerId("w-0"), Gpus({0, 1}));
  errors.Started(WorkerId("w-2"), Gpus({2}));
  errors.Started(WorkerId("w-cpu"), Allocation{});
  Append(kmsg_, XidRecord(2, 1, 79) + XidRecord(3, 1, 79));
  EXPECT_EQ(errors.Exited(WorkerId("w-0"), /*failed=*/true),
            absl::StrCat("GPU 1 (", BusId(1), "): Xid 79, GPU has fallen off the bus (2 times)"));
  EXPECT_EQ(errors.Exited(WorkerId("w-2"), /*failed=*/true), "");
  EXPECT_EQ(errors.Exited(WorkerId("w-cpu"), /*failed=*/true), "");
  // Forgotten once exited.
  EXPECT_EQ(errors.Exited(WorkerId("w-0"), /*failed=*/true), "");
}

TEST_F(WorkerDeviceErrorsTest, AWorkerThatSucceededHearsNothing) {
  WorkerDeviceErrors errors(hardware_, Sysroot(Fixture("h100-sxm-8")), {.kernel_log = kmsg_},
                            "node agent n1");
  errors.Started(WorkerId("w-0"), Gpus({0}));
  Append(kmsg_, XidRecord(2, 0, 48));
  EXPECT_EQ(errors.Exited(WorkerId("w-0"), /*failed=*/false), "");
}

TEST_F(WorkerDeviceErrorsTest, ASimulatedNodeReadsNothing) {
  LoadedNode simulated = node_testing::LoadExample("h100-sxm-8.yaml");
  WorkerDeviceErrors errors(simulated.hardware, Sysroot("/"), {.kernel_log = kmsg_},
                            "node agent n1");
  errors.Started(WorkerId("w-0"), Gpus({0}));
  Append(kmsg_, "3,2,1,-;NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n");
  EXPECT_EQ(errors.Exited(WorkerId("w-0"), /*failed=*/true), "");
}

TEST(JoinDeviceMessagesTest, AtMostFiveMessagesAndOneKibibyte) {
  EXPECT_EQ(JoinDeviceMessages({}), "");
  EXPECT_EQ(JoinDeviceMessages({"a", "b", "a"}), "a (2 times); b");
  EXPECT_EQ(JoinDeviceMessages({"1", "2", "3", "4", "5", "6", "7"}), "1; 2; 3; 4; 5; and 2 more");
  const std::string long_line(600, 'x');
  const std::string joined = JoinDeviceMessages({long_line, long_line + "y", "z"});
  EXPECT_EQ(joined, long_line + "; and 2 more");
  const std::string huge(5000, 'h');
  const std::string cut = JoinDeviceMessages({huge});
  EXPECT_LE(cut.size(), kMaxDeviceMessageBytes);
  EXPECT_THAT(cut, HasSubstr("..."));
  EXPECT_THAT(cut, Not(HasSubstr("more")));
}

}  // namespace
}  // namespace tessera
