#include "hardware/sysroot.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace tessera {
namespace {

namespace fs = std::filesystem;

class SysrootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("sysroot_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
             "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "sys/devices/pci0000:00/0000:00:01.0");
    fs::create_directories(root_ / "sys/bus/pci/devices");
    Write("sys/devices/pci0000:00/0000:00:01.0/vendor", "0x10de\n");
    Write("sys/devices/pci0000:00/0000:00:01.0/numa_node", "1\n");
    Write("sys/devices/pci0000:00/0000:00:01.0/bad", "0xZZ\n");
    fs::create_directory_symlink("../../../devices/pci0000:00/0000:00:01.0",
                                 root_ / "sys/bus/pci/devices/0000:00:01.0");
    fs::create_directory_symlink("/etc", root_ / "escape");
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& rel, const std::string& text) {
    std::ofstream(root_ / rel) << text;
  }
  fs::path root_;
};

TEST_F(SysrootTest, ReadsAttributesThroughTheRoot) {
  Sysroot s(root_.string());
  EXPECT_FALSE(s.is_live());
  EXPECT_EQ(*s.ReadAttribute("/sys/bus/pci/devices/0000:00:01.0/vendor"), "0x10de");
  EXPECT_EQ(*s.ReadInteger("/sys/bus/pci/devices/0000:00:01.0/vendor"), 0x10de);
  EXPECT_EQ(*s.ReadInteger("/sys/bus/pci/devices/0000:00:01.0/numa_node"), 1);
}

TEST_F(SysrootTest, MalformedNumbersAndMissingFilesAreErrors) {
  Sysroot s(root_.string());
  auto bad = s.ReadInteger("/sys/devices/pci0000:00/0000:00:01.0/bad");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("0xZZ"), absl::string_view::npos);
  EXPECT_EQ(s.ReadFile("/nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SysrootTest, ResolvesLinksRelativeToTheRoot) {
  Sysroot s(root_.string() + "/");
  EXPECT_EQ(*s.Resolve("/sys/bus/pci/devices/0000:00:01.0"),
            "/sys/devices/pci0000:00/0000:00:01.0");
  EXPECT_EQ(*s.ReadLink("/sys/bus/pci/devices/0000:00:01.0"),
            "../../../devices/pci0000:00/0000:00:01.0");
  // A link that leaves the fake tree is refused rather than read from the real machine.
  EXPECT_EQ(s.Resolve("/escape").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SysrootTest, ListsDirectoriesSortedAndTellsFilesFromDirectories) {
  Sysroot s(root_.string());
  auto names = s.ListDirectory("/sys/devices/pci0000:00/0000:00:01.0");
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"bad", "numa_node", "vendor"}));
  EXPECT_TRUE(s.IsDirectory("/sys/bus"));
  EXPECT_FALSE(s.IsFileLike("/sys/bus"));
  EXPECT_TRUE(s.IsFileLike("/sys/devices/pci0000:00/0000:00:01.0/vendor"));
  EXPECT_FALSE(s.Exists("/dev/nvidia0"));
}

TEST(SysrootLiveTest, EmptyAndSlashMeanTheLiveMachine) {
  EXPECT_TRUE(Sysroot("").is_live());
  EXPECT_TRUE(Sysroot("/").is_live());
  EXPECT_EQ(Sysroot("/").HostPath("/proc/meminfo"), "/proc/meminfo");
  EXPECT_EQ(Sysroot("/x/").HostPath("/proc/meminfo"), "/x/proc/meminfo");
}

}  // namespace
}  // namespace tessera
