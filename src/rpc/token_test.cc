#include "rpc/token.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace tessera::rpc {
namespace {

class TokenFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/tessera-token-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  std::string dir_;
};

TEST(TokenTest, GeneratesDistinctHexTokens) {
  auto a = GenerateToken();
  auto b = GenerateToken();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->size(), 2u * kTokenBytes);
  EXPECT_NE(*a, *b);
  for (char c : *a) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << c;
}

TEST_F(TokenFileTest, WritesMode0600AndReadsBack) {
  std::string path = Path("token");
  ASSERT_TRUE(WriteTokenFile(path, "deadbeef").ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto token = ReadTokenFile(path);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "deadbeef");
  // No temporary left behind.
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 1);
}

TEST_F(TokenFileTest, ReplacesAnExistingFile) {
  std::string path = Path("token");
  ASSERT_TRUE(WriteTokenFile(path, "first").ok());
  ASSERT_TRUE(WriteTokenFile(path, "second").ok());
  EXPECT_EQ(*ReadTokenFile(path), "second");
}

TEST_F(TokenFileTest, RefusesGroupOrWorldReadableFile) {
  std::string path = Path("token");
  ASSERT_TRUE(WriteTokenFile(path, "secret").ok());
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  auto token = ReadTokenFile(path);
  ASSERT_FALSE(token.ok());
  EXPECT_EQ(token.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(token.status().message().find("0644"), absl::string_view::npos);
  EXPECT_NE(token.status().message().find("chmod 600"), absl::string_view::npos);
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  EXPECT_EQ(ReadTokenFile(path).status().code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(TokenFileTest, RefusesATokenFileAnotherUserOwns) {
  // Another local user who wrote a token file of their own must not get it accepted.
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the file to another user";
  std::string path = Path("token");
  ASSERT_TRUE(WriteTokenFile(path, "attacker").ok());
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
  auto token = ReadTokenFile(path);
  EXPECT_EQ(token.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(token.status().message().find("belongs to uid 65534"), absl::string_view::npos)
      << token.status();
  // ReadOrCreate neither accepts it nor replaces it silently.
  EXPECT_EQ(ReadOrCreateTokenFile(path).status().code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(TokenFileTest, NeverFollowsALinkAtTheTokenPath) {
  std::string real = Path("real");
  ASSERT_TRUE(WriteTokenFile(real, "secret").ok());
  std::string link = Path("token");
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  EXPECT_FALSE(ReadTokenFile(link).ok());
}

TEST_F(TokenFileTest, WrittenFileIs0600UnderAnOpenUmask) {
  const mode_t saved = ::umask(0);
  std::string path = Path("token");
  const absl::Status written = WriteTokenFile(path, "secret");
  ::umask(saved);
  ASSERT_TRUE(written.ok()) << written;
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(TokenFileTest, MissingEmptyAndMalformedFiles) {
  EXPECT_EQ(ReadTokenFile(Path("absent")).status().code(), absl::StatusCode::kNotFound);
  std::string empty = Path("empty");
  ASSERT_TRUE(WriteTokenFile(empty, "  ").ok());
  EXPECT_EQ(ReadTokenFile(empty).status().code(), absl::StatusCode::kInvalidArgument);
  std::string spaced = Path("spaced");
  ASSERT_TRUE(WriteTokenFile(spaced, "two words").ok());
  EXPECT_EQ(ReadTokenFile(spaced).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TokenFileTest, AHugeFileIsRefusedAfterAtMostItsLimitIsRead) {
  // 3 GiB, sparse: no disk used, and read for no more than the limit.
  const std::string path = Path("huge");
  { std::ofstream(path) << ""; }
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  ASSERT_EQ(::truncate(path.c_str(), int64_t{3} << 30), 0);
  auto token = ReadTokenFile(path);
  EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(token.status().message().find("is larger than 4096 bytes"), std::string::npos)
      << token.status();
}

TEST_F(TokenFileTest, ReadOrCreateCreatesOnceThenReads) {
  std::string path = Path("token");
  auto first = ReadOrCreateTokenFile(path);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = ReadOrCreateTokenFile(path);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*first, *second);
  EXPECT_EQ(first->size(), 2u * kTokenBytes);
}

TEST_F(TokenFileTest, WriteIntoMissingFolderFails) {
  EXPECT_FALSE(WriteTokenFile(Path("no/such/dir/token"), "x").ok());
}

}  // namespace
}  // namespace tessera::rpc
