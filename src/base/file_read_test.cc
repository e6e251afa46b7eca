#include "base/file_read.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/time/clock.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

class FileReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("file-read-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(FileReadTest, AFileWithinTheLimitIsReadWhole) {
  std::ofstream(dir_ + "/small") << "nodes: []\n";
  auto text = ReadFileUpTo(dir_ + "/small", 10, "cluster file");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "nodes: []\n");
  auto over = ReadFileUpTo(dir_ + "/small", 9, "cluster file");
  EXPECT_TRUE(absl::IsInvalidArgument(over.status()));
  EXPECT_THAT(over.status().message(), HasSubstr("is 10 B; the limit is 9 B"));
}

// A 3 GiB sparse file takes no disk; it is refused from fstat alone, in milliseconds.
TEST_F(FileReadTest, AHugeSparseFileIsRefusedBeforeAnythingIsRead) {
  const std::string big = dir_ + "/requests.yaml";
  const int fd = ::open(big.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t{3} << 30), 0);
  ::close(fd);
  const absl::Time start = absl::Now();
  auto text = ReadFileUpTo(big, kMaxDescriptionFileBytes, "requests file");
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(500));
  ASSERT_TRUE(absl::IsInvalidArgument(text.status())) << text.status();
  EXPECT_EQ(text.status().message(),
            "requests file " + big + " is 3 GiB (3221225472 bytes); the limit is 64 MiB");
}

TEST_F(FileReadTest, MissingFilesAndFoldersAreOneLineErrors) {
  auto missing = ReadFileUpTo(dir_ + "/none", 100, "hardware file");
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_THAT(missing.status().message(),
              HasSubstr("hardware file " + dir_ + "/none: cannot read"));
  auto folder = ReadFileUpTo(dir_, 100, "hardware file");
  EXPECT_TRUE(absl::IsInvalidArgument(folder.status()));
  EXPECT_THAT(folder.status().message(), HasSubstr("is a folder"));
}

// A stream without a size (/dev/zero never ends) is read only up to the limit.
TEST_F(FileReadTest, AFileWithoutASizeIsReadOnlyUpToTheLimit) {
  auto endless = ReadFileUpTo("/dev/zero", 1 << 20, "requests file");
  EXPECT_TRUE(absl::IsInvalidArgument(endless.status()));
  EXPECT_EQ(endless.status().message(),
            "requests file /dev/zero holds more than the limit of 1 MiB");
}

}  // namespace
}  // namespace tessera
