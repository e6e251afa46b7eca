#include "cli/state_folder_removal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::Time Minute(int minute) {
  return absl::FromCivil(absl::CivilSecond(2026, 12, 3, 14, minute, 0), absl::UTCTimeZone());
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> Names(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class StateFolderRemovalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tessera-down-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    state_.root = pattern;
  }
  void TearDown() override { fs::remove_all(state_.root); }

  // What a stopped cluster of one node leaves: markers, a socket-less node folder, logs, a job.
  void WriteStoppedCluster(const std::string& tag) {
    fs::create_directories(state_.LogsDir());
    fs::create_directories(state_.NodeDir("n1") + "/workers");
    fs::create_directories(state_.NodeDir("n1") + "/jobs/j-1");
    fs::create_directories(state_.JobsDir() + "/j-" + tag);
    std::ofstream(state_.TokenFile()) << "secret";
    std::ofstream(state_.HeadAddressFile()) << "127.0.0.1:1";
    std::ofstream(state_.AgentPidFile("n1")) << "1234";
    std::ofstream(state_.HeadLogFile()) << "head " << tag;
    std::ofstream(state_.AgentLogFile("n1")) << "agent " << tag;
    std::ofstream(state_.NodeDir("n1") + "/workers/w-1.out") << "worker " << tag;
    std::ofstream(state_.JobsDir() + "/j-" + tag + "/job.log") << "job " << tag;
  }

  client::StateFolder state_;
};

TEST_F(StateFolderRemovalTest, DownKeepsTheJobsAndTheClusterLogsAndRemovesTheRest) {
  WriteStoppedCluster("1");
  auto report = RemoveStateFolder(state_, {.now = Minute(0), .keep_logs = 10});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->removed_folder);
  EXPECT_TRUE(report->kept_jobs);
  EXPECT_EQ(report->logs.folder, state_.LogsDir() + "/2026-12-03T14-00-00Z");
  EXPECT_THAT(Names(state_.root), ElementsAre("jobs", "logs"));
  EXPECT_EQ(Read(state_.JobsDir() + "/j-1/job.log"), "job 1");
  const std::string latest = state_.LogsDir() + "/latest";
  EXPECT_EQ(Read(latest + "/head.log"), "head 1");
  EXPECT_EQ(Read(latest + "/nodes/n1/agent.log"), "agent 1");
  EXPECT_EQ(Read(latest + "/nodes/n1/workers/w-1.out"), "worker 1");
  // Not logs: the node's pid file and a job's unpacked working directory are gone.
  EXPECT_FALSE(fs::exists(latest + "/nodes/n1/agent.pid"));
  EXPECT_FALSE(fs::exists(latest + "/nodes/n1/jobs"));
}

TEST_F(StateFolderRemovalTest, ClustersAfterClustersKeepOnlyTheNewestLogs) {
  for (int run = 0; run < 4; ++run) {
    WriteStoppedCluster(absl::StrCat(run));
    auto report = RemoveStateFolder(state_, {.now = Minute(run), .keep_logs = 2});
    ASSERT_TRUE(report.ok()) << report.status();
  }
  EXPECT_THAT(Names(state_.LogsDir()),
              ElementsAre("2026-12-03T14-02-00Z", "2026-12-03T14-03-00Z", "latest"));
  EXPECT_EQ(Read(state_.LogsDir() + "/latest/head.log"), "head 3");
  EXPECT_EQ(Read(state_.LogsDir() + "/2026-12-03T14-02-00Z/nodes/n1/agent.log"), "agent 2");
  // Every job's logs are still there: they are pruned by nobody.
  EXPECT_THAT(Names(state_.JobsDir()), ElementsAre("j-0", "j-1", "j-2", "j-3"));
}

TEST_F(StateFolderRemovalTest, WhatAnEarlierDownKeptIsLeftAsItIs) {
  WriteStoppedCluster("1");
  ASSERT_TRUE(RemoveStateFolder(state_, {.now = Minute(0)}).ok());
  auto again = RemoveStateFolder(state_, {.now = Minute(1)});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->nothing_to_remove);
  EXPECT_THAT(Names(state_.LogsDir()), ElementsAre("2026-12-03T14-00-00Z", "latest"));
}

TEST_F(StateFolderRemovalTest, AClusterWithoutLogsOrJobsLeavesNothing) {
  fs::create_directories(state_.LogsDir());
  std::ofstream(state_.TokenFile()) << "secret";
  auto report = RemoveStateFolder(state_, {.now = Minute(0)});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->removed_folder);
  EXPECT_FALSE(fs::exists(state_.root));
}

TEST_F(StateFolderRemovalTest, AFolderAClusterDidNotWriteIsNotTouched) {
  std::ofstream(state_.root + "/thesis.tex") << "mine";
  fs::create_directories(state_.LogsDir());
  std::ofstream(state_.HeadLogFile()) << "my own head.log";
  auto report = RemoveStateFolder(state_, {.now = Minute(0)});
  EXPECT_EQ(report.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(report.status().message()), HasSubstr("not removing it"));
  EXPECT_EQ(Read(state_.root + "/thesis.tex"), "mine");
  EXPECT_EQ(Read(state_.HeadLogFile()), "my own head.log");
}

TEST_F(StateFolderRemovalTest, TheHomeFolderIsNeverRemoved) {
  WriteStoppedCluster("1");
  const char* saved = std::getenv("HOME");
  const std::string home = saved == nullptr ? "" : saved;
  ::setenv("HOME", state_.root.c_str(), 1);
  auto report = RemoveStateFolder(state_, {.now = Minute(0)});
  if (home.empty()) {
    ::unsetenv("HOME");
  } else {
    ::setenv("HOME", home.c_str(), 1);
  }
  EXPECT_EQ(report.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(fs::exists(state_.TokenFile()));
  EXPECT_TRUE(fs::exists(state_.HeadLogFile()));
}

}  // namespace
}  // namespace tessera::cli
