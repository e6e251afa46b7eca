#include "node/working_dir.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/time/clock.h"
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

TEST_F(WorkingDirTest, AFolderPackedUnderItsNameAndAFileAloneUnpackThere) {
  auto package = PackDirectory(base_ + "/src/pkg", 1 << 20, "py_modules", "pkg");
  ASSERT_TRUE(package.ok()) << package.status();
  auto dest = UnpackWorkingDir(base_ + "/out", "mods", package->archive);
  ASSERT_TRUE(dest.ok()) << dest.status();
  EXPECT_EQ(Read(*dest + "/pkg/util.py"), "X = 1\n");
  auto file = PackFile(base_ + "/src/train.py", 1 << 20, "py_modules");
  ASSERT_TRUE(file.ok()) << file.status();
  auto file_dest = UnpackWorkingDir(base_ + "/out", "file", file->archive);
  ASSERT_TRUE(file_dest.ok()) << file_dest.status();
  EXPECT_EQ(Read(*file_dest + "/train.py"), "print('hi')\n");
  // Refusals start with the label the caller gave.
  auto missing = PackFile(base_ + "/src/link", 1 << 20, "py_modules");
  EXPECT_THAT(missing.status().message(), HasSubstr("py_modules: "));
  EXPECT_THAT(missing.status().message(), HasSubstr("is not a regular file"));
  auto big = PackDirectory(base_ + "/src", 4, "runtime_env working_dir");
  EXPECT_THAT(big.status().message(), HasSubstr("runtime_env working_dir: "));
  EXPECT_THAT(PackDirectory(base_ + "/src", 1 << 20, "x", "a/b").status().message(),
              HasSubstr("not a plain name"));
}

TEST_F(WorkingDirTest, AContentIdNamesExactlyItsArchive) {
  auto packed = PackDirectory(base_ + "/src", 1 << 20);
  ASSERT_TRUE(packed.ok()) << packed.status();
  const std::string id = WorkingDirContentId(packed->archive);
  EXPECT_EQ(id.size(), 4u + 64u);
  EXPECT_EQ(id.rfind("env-", 0), 0u);
  EXPECT_TRUE(IsWorkingDirJobId(id));
  auto dest = UnpackWorkingDir(base_ + "/out", id, packed->archive);
  ASSERT_TRUE(dest.ok()) << dest.status();
  // A changed folder has another id; claiming an id that is not the archive's makes nothing.
  std::ofstream(base_ + "/src/train.py") << "print('changed')\n";
  auto changed = PackDirectory(base_ + "/src", 1 << 20);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_NE(WorkingDirContentId(changed->archive), id);
  const std::string claimed = "env-" + std::string(64, 'a');
  auto refused = UnpackWorkingDir(base_ + "/out", claimed, changed->archive);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("not this archive's"));
  EXPECT_FALSE(fs::exists(base_ + "/out/" + claimed));
  // Nor can the cached folder of an id be replaced by other content.
  auto replaced = UnpackWorkingDir(base_ + "/out", id, changed->archive);
  EXPECT_EQ(replaced.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Read(*dest + "/train.py"), "print('hi')\n");
}

TEST_F(WorkingDirTest, AnUnpackedFolderPacksAgainToTheSameArchive) {
  // A worker packs the working_dir it runs in again for the tasks it submits: the agent's
  // completion marker stays out, so the archive (and its id) is the original's.
  auto packed = PackDirectory(base_ + "/src", 1 << 20);
  ASSERT_TRUE(packed.ok()) << packed.status();
  const std::string id = WorkingDirContentId(packed->archive);
  auto dest = UnpackWorkingDir(base_ + "/out", id, packed->archive);
  ASSERT_TRUE(dest.ok()) << dest.status();
  auto again = PackDirectory(*dest, 1 << 20);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(WorkingDirContentId(again->archive), id);
}

TEST_F(WorkingDirTest, CallsForOneFolderAtOnceAllGetItWhole) {
  // Two workers of one environment starting together on a node ask for its folder at once.
  auto packed = PackDirectory(base_ + "/src", 1 << 20);
  ASSERT_TRUE(packed.ok()) << packed.status();
  const std::string id = WorkingDirContentId(packed->archive);
  std::vector<absl::StatusOr<std::string>> got(8, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back(
        [&, i] { got[i] = UnpackWorkingDir(base_ + "/out", id, packed->archive); });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& dest : got) {
    ASSERT_TRUE(dest.ok()) << dest.status();
    EXPECT_EQ(*dest, base_ + "/out/" + id);
  }
  EXPECT_EQ(Read(*got[0] + "/pkg/util.py"), "X = 1\n");
  // Only the folder itself is left: no call's own half-written one.
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(base_ + "/out")) {
    left.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(left, std::vector<std::string>{id});
}

TEST_F(WorkingDirTest, AFolderLeftUnfinishedIsReplaced) {
  auto packed = PackDirectory(base_ + "/src", 1 << 20);
  ASSERT_TRUE(packed.ok()) << packed.status();
  fs::create_directories(base_ + "/out/job-2/pkg");
  std::ofstream(base_ + "/out/job-2/pkg/util.py") << "half";
  ::chmod((base_ + "/out").c_str(), 0700);
  auto dest = UnpackWorkingDir(base_ + "/out", "job-2", packed->archive);
  ASSERT_TRUE(dest.ok()) << dest.status();
  EXPECT_EQ(Read(*dest + "/pkg/util.py"), "X = 1\n");
  EXPECT_EQ(Read(*dest + "/train.py"), "print('hi')\n");
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

// A 3 GiB file that takes no disk: refused from its size alone, in milliseconds, naming the
// file, its size and the limit.
TEST_F(WorkingDirTest, AHugeSparseFileIsRefusedBeforeAnythingIsRead) {
  const std::string big = base_ + "/src/data.bin";
  const int fd = ::open(big.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t{3} << 30), 0);
  ::close(fd);
  const absl::Time start = absl::Now();
  auto packed = PackDirectory(base_ + "/src", kWorkingDirMaxFileBytes);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  ASSERT_TRUE(absl::IsInvalidArgument(packed.status())) << packed.status();
  EXPECT_THAT(packed.status().message(), HasSubstr(big + " is 3 GiB (3221225472 bytes)"));
  EXPECT_THAT(packed.status().message(), HasSubstr("at most 3 MiB"));
  EXPECT_EQ(packed.status().message().find('\n'), std::string::npos);
}

TEST_F(WorkingDirTest, AFolderWithTooManyEntriesIsRefusedNamingTheLimit) {
  for (int i = 0; i <= kWorkingDirMaxEntries; ++i) {
    ASSERT_EQ(::mkdir((base_ + "/src/pkg/d" + std::to_string(i)).c_str(), 0700), 0);
  }
  auto packed = PackDirectory(base_ + "/src", kWorkingDirMaxFileBytes);
  ASSERT_TRUE(absl::IsInvalidArgument(packed.status())) << packed.status();
  EXPECT_THAT(packed.status().message(),
              HasSubstr("more than the limit of 10000 files and folders"));
}

// Every archive the agents would refuse is refused by the same check at submission
// (ValidateWorkingDirArchive), naming the entry or the limit, and unpacking makes nothing.
TEST_F(WorkingDirTest, ArchivesOverALimitOrWithBadEntriesAreRefusedNamingIt) {
  auto with = [](std::vector<std::pair<std::string, std::string>> files) {
    v1::DirectoryArchive archive;
    for (auto& [path, data] : files) {
      auto* entry = archive.add_entries();
      entry->set_path(path);
      entry->set_data(data);
    }
    return archive.SerializeAsString();
  };
  v1::DirectoryArchive many;
  for (int i = 0; i <= kWorkingDirMaxEntries; ++i) {
    auto* entry = many.add_entries();
    entry->set_path("d" + std::to_string(i));
    entry->set_directory(true);
  }
  const std::string big(13 << 17, 'x');  // 1.625 MiB: two pass the files' limit, not the archive's
  const std::vector<std::pair<std::string, std::string>> cases = {
      {std::string(4 << 20, 'x'), "more than the limit of 3.5 MiB"},
      {many.SerializeAsString(), "10001 entries, more than the limit of 10000"},
      {with({{"a", big}, {"b", big}}), "its files hold more than the limit of 3 MiB"},
      {with({{std::string(5000, 'p'), ""}}), "more than the limit of 4096"},
      {with({{"a", "1"}, {"a", "2"}}), "entry \"a\" appears twice"},
      {with({{"a", "1"}, {"a/b", "2"}}), "entry \"a/b\" lies under the file \"a\""},
      {with({{"../x", "1"}}), "entry \"../x\" has a part"},
  };
  for (const auto& [archive, why] : cases) {
    absl::Status refused = ValidateWorkingDirArchive(archive);
    EXPECT_TRUE(absl::IsInvalidArgument(refused)) << why;
    const std::string message(refused.message());
    EXPECT_THAT(message, HasSubstr("working dir archive: ")) << why;
    EXPECT_THAT(message, HasSubstr(why));
    EXPECT_EQ(message.find('\n'), std::string::npos) << why;
    auto dest = UnpackWorkingDir(base_ + "/out", "job-5", archive);
    EXPECT_EQ(dest.status(), refused) << why;
    EXPECT_FALSE(fs::exists(base_ + "/out/job-5")) << why;
  }
  EXPECT_TRUE(ValidateWorkingDirArchive(with({{"a/b", "1"}, {"a/c", "2"}})).ok());
}

}  // namespace
}  // namespace tessera
