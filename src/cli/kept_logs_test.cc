#include "cli/kept_logs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "absl/time/civil_time.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

absl::Time At(int hour, int minute, int second) {
  return absl::FromCivil(absl::CivilSecond(2026, 12, 3, hour, minute, second), absl::UTCTimeZone());
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

class KeptLogsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tessera-kept-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    state_.root = pattern;
    fs::create_directories(state_.LogsDir());
    fs::create_directories(state_.NodeDir("n1") + "/workers");
  }
  void TearDown() override { fs::remove_all(state_.root); }

  void Write(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
    ASSERT_EQ(::chmod(path.c_str(), 0644), 0) << path;  // widened, to see it narrowed
  }
  // A cluster's logs, as its processes leave them.
  void WriteClusterLogs(const std::string& tag) {
    Write(state_.HeadLogFile(), "head " + tag);
    Write(state_.AgentLogFile("n1"), "agent " + tag);
    Write(state_.NodeDir("n1") + "/workers/w-1.out", "out " + tag);
    Write(state_.NodeDir("n1") + "/workers/w-1.err", "err " + tag);
  }

  client::StateFolder state_;
};

TEST_F(KeptLogsTest, NamesAreUtcSecondsWithoutColons) {
  EXPECT_EQ(KeptLogsFolderName(At(14, 5, 9)), "2026-12-03T14-05-09Z");
  EXPECT_TRUE(IsKeptLogsFolderName("2026-12-03T14-05-09Z"));
  EXPECT_TRUE(IsKeptLogsFolderName("2026-12-03T14-05-09Z-12"));
  EXPECT_FALSE(IsKeptLogsFolderName("latest"));
  EXPECT_FALSE(IsKeptLogsFolderName("2026-12-03T14-05-09Z-"));
  EXPECT_FALSE(IsKeptLogsFolderName("2026-12-03T14:05:09Z"));
  EXPECT_FALSE(IsKeptLogsFolderName("my-2026-12-03T14-05-09Z"));
}

TEST_F(KeptLogsTest, MovesTheHeadAgentAndWorkerLogsIntoAPrivateFolderNamedLatest) {
  WriteClusterLogs("one");
  auto kept = KeepClusterLogs(state_, {.now = At(14, 5, 9), .keep = 10});
  ASSERT_TRUE(kept.ok()) << kept.status();
  const std::string folder = state_.LogsDir() + "/2026-12-03T14-05-09Z";
  EXPECT_EQ(kept->folder, folder);
  EXPECT_EQ(kept->files, 4u);
  EXPECT_THAT(kept->warnings, IsEmpty());
  EXPECT_EQ(Read(folder + "/head.log"), "head one");
  EXPECT_EQ(Read(folder + "/nodes/n1/agent.log"), "agent one");
  EXPECT_EQ(Read(folder + "/nodes/n1/workers/w-1.out"), "out one");
  EXPECT_EQ(Read(folder + "/nodes/n1/workers/w-1.err"), "err one");
  EXPECT_FALSE(fs::exists(state_.HeadLogFile()));
  EXPECT_FALSE(fs::exists(state_.AgentLogFile("n1")));
  for (const char* file : {"/head.log", "/nodes/n1/agent.log", "/nodes/n1/workers/w-1.out"}) {
    EXPECT_EQ(ModeOf(folder + file), 0600u) << file;
  }
  for (const char* dir : {"", "/nodes", "/nodes/n1", "/nodes/n1/workers"}) {
    EXPECT_EQ(ModeOf(folder + dir), 0700u) << dir;
  }
  const std::string latest = state_.LogsDir() + "/latest";
  ASSERT_TRUE(fs::is_symlink(latest));
  EXPECT_EQ(fs::read_symlink(latest), "2026-12-03T14-05-09Z");
  EXPECT_EQ(Read(latest + "/head.log"), "head one");
}

TEST_F(KeptLogsTest, NothingToKeepMakesNoFolder) {
  auto kept = KeepClusterLogs(state_, {.now = At(14, 5, 9)});
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->folder, "");
  EXPECT_TRUE(fs::is_empty(state_.LogsDir()));
}

TEST_F(KeptLogsTest, ASecondDownInTheSameSecondGetsItsOwnFolderAndLatestMoves) {
  WriteClusterLogs("one");
  ASSERT_TRUE(KeepClusterLogs(state_, {.now = At(14, 5, 9)}).ok());
  WriteClusterLogs("two");
  auto kept = KeepClusterLogs(state_, {.now = At(14, 5, 9)});
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->folder, state_.LogsDir() + "/2026-12-03T14-05-09Z-2");
  EXPECT_EQ(Read(state_.LogsDir() + "/2026-12-03T14-05-09Z/head.log"), "head one");
  EXPECT_EQ(Read(state_.LogsDir() + "/latest/head.log"), "head two");
}

TEST_F(KeptLogsTest, OnlyTheNewestFoldersStay) {
  for (int minute = 0; minute < 4; ++minute) {
    WriteClusterLogs("run");
    auto kept = KeepClusterLogs(state_, {.now = At(14, minute, 0), .keep = 3});
    ASSERT_TRUE(kept.ok()) << kept.status();
    if (minute == 3) {
      EXPECT_THAT(kept->pruned, ElementsAre("2026-12-03T14-00-00Z"));
    }
  }
  // A folder of the user's that is not a kept folder's name is never pruned.
  fs::create_directories(state_.LogsDir() + "/mine");
  WriteClusterLogs("last");
  // A clock set back: the new folder sorts oldest but is the one kept first.
  auto kept = KeepClusterLogs(state_, {.now = At(9, 0, 0), .keep = 3});
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_THAT(kept->pruned, ElementsAre("2026-12-03T14-01-00Z"));
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(state_.LogsDir())) {
    left.push_back(entry.path().filename().string());
  }
  std::sort(left.begin(), left.end());
  EXPECT_THAT(left, ElementsAre("2026-12-03T09-00-00Z", "2026-12-03T14-02-00Z",
                                "2026-12-03T14-03-00Z", "latest", "mine"));
  EXPECT_EQ(Read(state_.LogsDir() + "/latest/head.log"), "head last");
}

TEST_F(KeptLogsTest, LinksFifosAndSocketsAreNeverFollowedOrMoved) {
  const std::string outside = state_.root + "-outside";
  fs::create_directories(outside);
  std::ofstream(outside + "/secret.log") << "not the cluster's";
  WriteClusterLogs("one");
  // A link in the workers' folder, a FIFO (a worker's stdin), and a node folder that is a link.
  fs::create_symlink(outside + "/secret.log", state_.NodeDir("n1") + "/workers/w-2.out");
  ASSERT_EQ(::mkfifo((state_.NodeDir("n1") + "/workers/w-1.in").c_str(), 0600), 0);
  fs::create_symlink(outside, state_.NodeDir("n2"));
  auto kept = KeepClusterLogs(state_, {.now = At(14, 5, 9)});
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->files, 4u);
  EXPECT_FALSE(fs::exists(kept->folder + "/nodes/n1/workers/w-2.out"));
  EXPECT_FALSE(fs::exists(kept->folder + "/nodes/n1/workers/w-1.in"));
  EXPECT_FALSE(fs::exists(kept->folder + "/nodes/n2"));
  EXPECT_EQ(Read(outside + "/secret.log"), "not the cluster's");
  fs::remove_all(outside);
}

TEST_F(KeptLogsTest, ALogsLinkIsReplacedNotFollowed) {
  const std::string outside = state_.root + "-outside";
  fs::create_directories(outside);
  std::ofstream(outside + "/head.log") << "elsewhere";
  fs::remove_all(state_.LogsDir());
  fs::create_symlink(outside, state_.LogsDir());
  Write(state_.AgentLogFile("n1"), "agent");
  auto kept = KeepClusterLogs(state_, {.now = At(14, 5, 9)});
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_FALSE(fs::is_symlink(state_.LogsDir()));
  EXPECT_EQ(kept->files, 1u);
  // The link's target is untouched: nothing moved out of it, nothing written into it.
  EXPECT_EQ(Read(outside + "/head.log"), "elsewhere");
  EXPECT_EQ(std::distance(fs::directory_iterator(outside), fs::directory_iterator()), 1);
  fs::remove_all(outside);
}

TEST_F(KeptLogsTest, ALatestFolderIsLeftAndSaidSo) {
  fs::create_directories(state_.LogsDir() + "/latest");
  WriteClusterLogs("one");
  auto kept = KeepClusterLogs(state_, {.now = At(14, 5, 9)});
  ASSERT_TRUE(kept.ok()) << kept.status();
  ASSERT_EQ(kept->warnings.size(), 1u);
  EXPECT_THAT(kept->warnings[0], HasSubstr("is a folder"));
  EXPECT_TRUE(fs::is_directory(fs::symlink_status(state_.LogsDir() + "/latest")));
}

}  // namespace
}  // namespace tessera::cli
