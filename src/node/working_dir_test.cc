#include "node/working_dir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tessera/v1/jobs.pb.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class WorkingDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / ("working-dir-test-" + std::to_string(::getpid()));
    fs::remove_all(base_);
    fs::create_directories(base_ + "/src/pkg");
    std::ofstream(base_ + "/src/train.py") << "print('hi')\n";
    std::ofstream(base_ + "/src/pkg/util.py") << "X = 1\n";
    ::chmod((base_ + "/src/train.py").c_str(), 0755);
    fs::create_symlink("/etc/passwd", base_ + "/src/link");
  }
  void TearDown() override { fs::remove_all(base_); }
  std::string base_;
};

TEST_F(WorkingDirTest, APackedFolderUnpacksWithItsFilesAndModesAndWithoutLinks) {
  auto packed = PackDirectory(base_ + "/src", 1 << 20);
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(packed->skipped, std::vector<std::string>{"link"});
  auto dest = UnpackWorkingDir(base_ + "/out", "job-1", packed->archive);
  ASSERT_TRUE(dest.ok()) << dest.status();
  EXPECT_EQ(Read(*dest + "/train.py"), "print('hi')\n");
  EXPECT_EQ(Read(*dest + "/pkg/util.py"), "X = 1\n");
  EXPECT_FALSE(fs::exists(fs::symlink_status(*dest + "/link")));
  struct stat st {};
  ASSERT_EQ(::stat((*dest + "/train.py").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  ASSERT_EQ(::stat((base_ + "/out").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // A second unpack of the same job reuses the first.
  auto again = UnpackWorkingDir(base_ + "/out", "job-1", packed->archive);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *dest);
}

TEST_F(WorkingDirTest, AFolderOverTheLimitIsRefusedNamingIt) {
  auto packed = PackDirectory(base_ + "/src", 4);
  ASSERT_FALSE(packed.ok());
  EXPECT_THAT(packed.status().message(), HasSubstr("--working-dir"));
  EXPECT_FALSE(PackDirectory(base_ + "/missing", 100).ok());
}

TEST_F(WorkingDirTest, UnsafePathsAreRefusedAndLeaveNothing) {
  for (const std::string bad : {"../escape", "/abs", "a/../../b", "a//b", "./x", ""}) {
    v1::DirectoryArchive archive;
    auto* entry = archive.add_entries();
    entry->set_path(bad);
    entry->set_data("x");
    auto dest = UnpackWorkingDir(base_ + "/out", "job-2", archive.SerializeAsString());
    EXPECT_TRUE(absl::IsInvalidArgument(dest.status())) << bad;
    EXPECT_FALSE(fs::exists(base_ + "/out/job-2")) << bad;
  }
  EXPECT_FALSE(fs::exists(base_ + "/escape"));
}

TEST_F(WorkingDirTest, BadJobIdsAndGarbageAreOneLineErrors) {
  EXPECT_TRUE(absl::IsInvalidArgument(UnpackWorkingDir(base_ + "/out", "../x", "").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(UnpackWorkingDir(base_ + "/out", "", "").status()));
  auto garbage = UnpackWorkingDir(base_ + "/out", "job-3", std::string("\xff\xff\xff", 3));
  EXPECT_TRUE(absl::IsInvalidArgument(garbage.status()));
}

TEST_F(WorkingDirTest, SetIdBitsAreDropped) {
  v1::DirectoryArchive archive;
  auto* entry = archive.add_entries();
  entry->set_path("tool");
  entry->set_mode(04755);
  entry->set_data("#!/bin/sh\n");
  auto dest = UnpackWorkingDir(base_ + "/out", "job-4", archive.SerializeAsString());
  ASSERT_TRUE(dest.ok()) << dest.status();
  struct stat st {};
  ASSERT_EQ(::stat((*dest + "/tool").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
}

}  // namespace
}  // namespace tessera
