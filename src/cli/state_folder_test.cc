#include "cli/state_folder.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/cluster_client.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;

class StateFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tessera-state-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string root_;
};

TEST_F(StateFolderTest, FlagBeatsEnvironmentBeatsDefault) {
  setenv("TESSERA_STATE_DIR", "/from/env", 1);
  EXPECT_EQ(ResolveStateDir("/from/flag"), "/from/flag");
  EXPECT_EQ(ResolveStateDir(""), "/from/env");
  unsetenv("TESSERA_STATE_DIR");
  EXPECT_EQ(ResolveStateDir(""), "/tmp/tessera");
}

TEST_F(StateFolderTest, ListsNodeFoldersAndReadsPidFiles) {
  const StateFolder state{root_};
  fs::create_directories(state.NodeDir("b"));
  fs::create_directories(state.NodeDir("a"));
  std::ofstream(state.NodesDir() + "/stray-file") << "x";
  EXPECT_THAT(NodeIdsInStateFolder(state), ::testing::ElementsAre("a", "b"));

  std::ofstream(state.AgentPidFile("a")) << " 1234\n";
  EXPECT_EQ(ReadPidFile(state.AgentPidFile("a")), 1234);
  std::ofstream(state.AgentPidFile("b")) << "not a pid\n";
  EXPECT_EQ(ReadPidFile(state.AgentPidFile("b")), std::nullopt);
  EXPECT_EQ(ReadPidFile(state.HeadPidFile()), std::nullopt);
}

TEST_F(StateFolderTest, ZombieCountsAsGoneAndOnlyStartProcessesMatch) {
  EXPECT_TRUE(ProcessAlive(getpid()));
  EXPECT_FALSE(IsTesseraStartProcess(getpid()));  // the test binary is not `tessera start`
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  // The child is a zombie until it is collected: gone for ProcessAlive as soon as it exits.
  while (ProcessAlive(child)) usleep(1000);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_FALSE(ProcessAlive(child));
}

TEST_F(StateFolderTest, TokenFromEnvironmentOrFile) {
  const StateFolder state{root_};
  unsetenv("TESSERA_TOKEN");
  const auto missing = FindToken(state, "");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), ::testing::HasSubstr(state.TokenFile()));

  setenv("TESSERA_TOKEN", " secret \n", 1);
  EXPECT_EQ(*FindToken(state, ""), "secret");
  unsetenv("TESSERA_TOKEN");
}

TEST_F(StateFolderTest, ConnectWithoutAHeadSaysHowToStartOne) {
  ClusterClientOptions options;
  options.state_dir = root_;
  const auto client = ClusterClient::Connect(options);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(client.status().message()), ::testing::HasSubstr("tessera up"));
  options.head = HeadRequirement::kOptional;
  EXPECT_TRUE(ClusterClient::Connect(options).ok());
}

}  // namespace
}  // namespace tessera::cli
