#include "process/private_paths.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uid_t kNobody = 65534;

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Sets the umask for one test and restores it.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : saved_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(saved_); }

 private:
  mode_t saved_;
};

class PrivatePathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tessera-private-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string root_;
};

TEST_F(PrivatePathsTest, CreatesEveryMissingFolder0700WhateverTheUmask) {
  for (mode_t mask : {mode_t{0000}, mode_t{0777}}) {
    ScopedUmask umask(mask);
    const std::string top = root_ + "/umask" + std::to_string(mask);
    const std::string path = top + "/nodes/n1";
    ASSERT_TRUE(EnsurePrivateDirectory(path).ok()) << EnsurePrivateDirectory(path);
    EXPECT_EQ(ModeOf(top), 0700u);
    EXPECT_EQ(ModeOf(top + "/nodes"), 0700u);
    EXPECT_EQ(ModeOf(path), 0700u);
  }
}

TEST_F(PrivatePathsTest, AcceptsAnExistingPrivateFolderAndLeavesItsMode) {
  const std::string path = root_ + "/mine";
  ASSERT_EQ(::mkdir(path.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(path.c_str(), 0755), 0);
  EXPECT_TRUE(EnsurePrivateDirectory(path).ok());
  EXPECT_EQ(ModeOf(path), 0755u);
}

TEST_F(PrivatePathsTest, RefusesAFolderOthersCanWrite) {
  const std::string path = root_ + "/shared";
  ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(path.c_str(), 0777), 0);
  absl::Status status = EnsurePrivateDirectory(path);
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(status.message(), "refusing " + path +
                                  ": it has mode 0777 (writable by group or others; chmod 700 " +
                                  path + ")");
  ASSERT_EQ(::chmod(path.c_str(), 0770), 0);
  EXPECT_EQ(CheckPrivateDirectory(path).code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(PrivatePathsTest, RefusesAFolderUnderAWorldWritableFolderThatIsNotSticky) {
  const std::string open = root_ + "/open";
  ASSERT_EQ(::mkdir(open.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);
  absl::Status status = EnsurePrivateDirectory(open + "/state");
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(status.message(), HasSubstr("the folder above it, " + open +
                                          ", has mode 0777 (writable by others and not sticky)"));
  // Sticky, as /tmp is: others may create beside it but not rename or replace it.
  ASSERT_EQ(::chmod(open.c_str(), 01777), 0);
  EXPECT_TRUE(CheckPrivateDirectory(open + "/state").ok());
}

TEST_F(PrivatePathsTest, JudgesTheRealFolderBehindALink) {
  const std::string shared = root_ + "/shared";
  ASSERT_EQ(::mkdir(shared.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);
  const std::string link = root_ + "/link";
  ASSERT_EQ(::symlink(shared.c_str(), link.c_str()), 0);
  EXPECT_EQ(CheckPrivateDirectory(link).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(CheckPrivateDirectory(root_ + "/absent").code(), absl::StatusCode::kNotFound);
  const std::string file = root_ + "/file";
  std::ofstream(file) << "x";
  EXPECT_THAT(CheckPrivateDirectory(file).message(), HasSubstr("it is not a folder"));
}

TEST_F(PrivatePathsTest, RefusesAFolderAnotherUserOwns) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a folder to another user";
  const std::string theirs = root_ + "/theirs";
  ASSERT_EQ(::mkdir(theirs.c_str(), 0700), 0);
  ASSERT_EQ(::chown(theirs.c_str(), kNobody, kNobody), 0);
  absl::Status status = EnsurePrivateDirectory(theirs);
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(status.message(),
            "refusing " + theirs + ": it belongs to uid 65534, not to you (uid 0)");
  // Nor is anything below a folder another user owns trusted: they could swap it.
  const std::string below = theirs + "/mine";
  ASSERT_EQ(::mkdir(below.c_str(), 0700), 0);
  EXPECT_THAT(CheckPrivateDirectory(below).message(),
              HasSubstr("the folder above it, " + theirs + ", belongs to uid 65534"));
}

TEST_F(PrivatePathsTest, PrivateFileMustBeOwnedAndClosedToOthers) {
  const std::string path = root_ + "/token";
  std::ofstream(path) << "secret\n";
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  UniqueFd fd(::open(path.c_str(), O_RDONLY));
  EXPECT_TRUE(CheckPrivateFile(fd.get(), path).ok());
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  EXPECT_EQ(CheckPrivateFile(fd.get(), path).message(),
            "refusing " + path +
                ": it has mode 0640 (it must not be readable or writable by group or others; "
                "chmod 600 " +
                path + ")");
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  ASSERT_EQ(::chown(path.c_str(), kNobody, kNobody), 0);
  EXPECT_THAT(CheckPrivateFile(fd.get(), path).message(), HasSubstr("belongs to uid 65534"));
}

TEST_F(PrivatePathsTest, AtomicWriteIs0600WhateverTheUmaskAndLeavesNoTemporary) {
  ScopedUmask umask(0000);
  const std::string path = root_ + "/head.address";
  ASSERT_TRUE(WritePrivateFileAtomically(path, "127.0.0.1:1\n").ok());
  EXPECT_EQ(ModeOf(path), 0600u);
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  ASSERT_TRUE(WritePrivateFileAtomically(path, "127.0.0.1:2\n").ok());
  EXPECT_EQ(ModeOf(path), 0600u);
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "127.0.0.1:2");
  int entries = 0;
  for (const auto& entry : fs::directory_iterator(root_)) {
    (void)entry;
    ++entries;
  }
  EXPECT_EQ(entries, 1);
}

TEST_F(PrivatePathsTest, AppendFileIs0600NarrowsAnOldOneAndNeverFollowsALink) {
  ScopedUmask umask(0000);
  const std::string path = root_ + "/agent.log";
  {
    auto fd = OpenPrivateFileForAppend(path);
    ASSERT_TRUE(fd.ok()) << fd.status();
    ASSERT_EQ(::write(fd->get(), "a", 1), 1);
  }
  EXPECT_EQ(ModeOf(path), 0600u);
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  {
    auto fd = OpenPrivateFileForAppend(path);
    ASSERT_TRUE(fd.ok()) << fd.status();
    ASSERT_EQ(::write(fd->get(), "b", 1), 1);
  }
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(fs::file_size(path), 2u);
  const std::string link = root_ + "/link.log";
  ASSERT_EQ(::symlink(path.c_str(), link.c_str()), 0);
  EXPECT_FALSE(OpenPrivateFileForAppend(link).ok());
}

TEST(DefaultStateDirectoryTest, PerUserAndNeverInAWorldWritableFolder) {
  EXPECT_EQ(DefaultStateDirectory("/x/state", "/home/ada"), "/x/state/tessera");
  // A relative XDG_STATE_HOME is ignored, as the XDG rules say.
  EXPECT_EQ(DefaultStateDirectory("relative", "/home/ada"), "/home/ada/.local/state/tessera");
  EXPECT_EQ(DefaultStateDirectory(nullptr, "/home/ada"), "/home/ada/.local/state/tessera");
  // Without $HOME the password database names the home folder.
  const std::string fallback = DefaultStateDirectory(nullptr, nullptr);
  EXPECT_THAT(fallback, ::testing::EndsWith("tessera"));
  EXPECT_THAT(fallback, ::testing::Not(StartsWith("/tmp/tessera/")));
  EXPECT_NE(fallback, "/tmp/tessera");
}

}  // namespace
}  // namespace tessera
