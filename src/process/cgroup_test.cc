#include "process/cgroup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <iostream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "process/test_support.h"

namespace tessera {
namespace {

using ::tessera::testing::FileExists;
using ::tessera::testing::ReadText;
using ::tessera::testing::TempDir;
using ::tessera::testing::WriteText;
using ::testing::HasSubstr;

TEST(CgroupTest, ParsesTheCgroupV2Line) {
  EXPECT_EQ(*ParseCgroupV2Path("4:memory:/x\n0::/system.slice/agent.service\n"),
            "/system.slice/agent.service");
  EXPECT_EQ(*ParseCgroupV2Path("0::/\n"), "/");
  EXPECT_EQ(ParseCgroupV2Path("4:memory:/x\n1:cpu:/\n").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(CgroupTest, FindsTheCgroup2MountPoint) {
  std::string hybrid =
      "tmpfs /sys/fs/cgroup tmpfs rw 0 0\n"
      "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n"
      "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";
  EXPECT_EQ(*ParseCgroup2MountPoint(hybrid), "/sys/fs/cgroup/unified");
  EXPECT_EQ(*ParseCgroup2MountPoint("cgroup2 /mnt/with\\040space cgroup2 rw 0 0\n"),
            "/mnt/with space");
  EXPECT_EQ(ParseCgroup2MountPoint("cgroup /sys/fs/cgroup/memory cgroup rw 0 0\n").status().code(),
            absl::StatusCode::kNotFound);
}

// A fake cgroup tree: the control files as plain files.
class FakeCgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::mkdir((dir_ / "proc").c_str(), 0755), 0);
    ASSERT_EQ(::mkdir((dir_ / "proc/self").c_str(), 0755), 0);
    ASSERT_EQ(::mkdir((dir_ / "cg").c_str(), 0755), 0);
    ASSERT_EQ(::mkdir((dir_ / "cg/agent").c_str(), 0755), 0);
    WriteText(dir_ / "proc/self/mounts", "cgroup2 " + (dir_ / "cg") + " cgroup2 rw 0 0\n");
    WriteText(dir_ / "proc/self/cgroup", "0::/agent\n");
    WriteText(dir_ / "cg/agent/cgroup.controllers", "cpu io memory pids\n");
    WriteText(dir_ / "cg/agent/cgroup.subtree_control", "");
  }
  CgroupDetectOptions Options() {
    CgroupDetectOptions options;
    options.proc_root = dir_ / "proc";
    return options;
  }
  TempDir dir_;
};

TEST_F(FakeCgroupTest, DetectsTheAgentsOwnCgroupAndEnablesMemory) {
  auto parent = FindWorkerCgroupParent(Options());
  ASSERT_TRUE(parent.ok()) << parent.status();
  EXPECT_EQ(parent->dir, dir_ / "cg/agent");
  EXPECT_TRUE(parent->memory);
  EXPECT_EQ(ReadText(dir_ / "cg/agent/cgroup.subtree_control"), "+memory");
}

TEST_F(FakeCgroupTest, WithoutTheMemoryControllerTheParentServesOnlyForGroupingAndSaysWhy) {
  WriteText(dir_ / "cg/agent/cgroup.controllers", "cpu pids\n");
  auto parent = FindWorkerCgroupParent(Options());
  ASSERT_TRUE(parent.ok()) << parent.status();
  EXPECT_FALSE(parent->memory);
  EXPECT_THAT(parent->no_memory_reason, HasSubstr("memory controller is not available"));
  EXPECT_THAT(parent->no_memory_reason, HasSubstr("\"cpu pids\""));
  auto limited = WorkerCgroup::Create(*parent, "tessera-worker-w", int64_t{1} << 30);
  EXPECT_EQ(limited.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(limited.status().message(),
              HasSubstr("a memory limit cannot be enforced: the memory controller"));
}

TEST_F(FakeCgroupTest, AControllerThatCannotBeEnabledIsExplained) {
  ::unlink((dir_ / "cg/agent/cgroup.subtree_control").c_str());
  ASSERT_EQ(::mkdir((dir_ / "cg/agent/cgroup.subtree_control").c_str(), 0755), 0);
  auto parent = FindWorkerCgroupParent(Options());
  ASSERT_TRUE(parent.ok()) << parent.status();
  EXPECT_FALSE(parent->memory);
  EXPECT_THAT(parent->no_memory_reason,
              HasSubstr("cannot enable the memory controller for the children of cgroup"));
  EXPECT_THAT(parent->no_memory_reason, HasSubstr("run the agent in a delegated cgroup"));
}

TEST_F(FakeCgroupTest, NoCgroup2MountIsExplained) {
  WriteText(dir_ / "proc/self/mounts", "proc /proc proc rw 0 0\n");
  EXPECT_EQ(FindWorkerCgroupParent(Options()).status().message(), "cgroup v2 is not mounted");
}

TEST_F(FakeCgroupTest, AnExplicitParentMustBeACgroupDirectory) {
  CgroupDetectOptions options = Options();
  options.parent_dir = dir_ / "cg/nowhere";
  EXPECT_THAT(FindWorkerCgroupParent(options).status().message(), HasSubstr("does not exist"));
  options.parent_dir = dir_.path();
  EXPECT_THAT(FindWorkerCgroupParent(options).status().message(),
              HasSubstr("is not a cgroup v2 directory"));
}

TEST_F(FakeCgroupTest, WorkerCgroupIsCreatedAndRemoved) {
  CgroupParent parent{dir_ / "cg/agent", true, ""};
  auto cgroup = WorkerCgroup::Create(parent, *WorkerCgroupName("w-1"), std::nullopt);
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  std::string dir = (*cgroup)->dir();
  EXPECT_EQ(dir, dir_ / "cg/agent/tessera-worker-w-1");
  EXPECT_TRUE(FileExists(dir));
  WriteText(dir + "/memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n");
  EXPECT_EQ(*(*cgroup)->OomKills(), 1);
  ::unlink((dir + "/memory.events").c_str());
  EXPECT_TRUE((*cgroup)->Remove(absl::Seconds(1)).ok());
  EXPECT_FALSE(FileExists(dir));
}

TEST(CgroupTest, WorkerCgroupNamesAreOnePathComponent) {
  EXPECT_EQ(*WorkerCgroupName("w-17"), "tessera-worker-w-17");
  EXPECT_EQ(WorkerCgroupName("../x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WorkerCgroupName("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WorkerCgroup::Create(CgroupParent{"/tmp"}, "a/b", std::nullopt).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// What this host offers: printed, so a CI log shows which OOM path workers get here.
TEST(CgroupTest, ReportsWhetherThisHostHasUsableCgroups) {
  auto parent = FindWorkerCgroupParent({});
  if (!parent.ok()) GTEST_SKIP() << "worker cgroups not usable here: " << parent.status().message();
  EXPECT_TRUE(FileExists(parent->dir + "/cgroup.procs"));
  std::cout << "worker cgroups under " << parent->dir
            << "; memory controller: " << (parent->memory ? "yes" : parent->no_memory_reason)
            << "\n";
}

}  // namespace
}  // namespace tessera
