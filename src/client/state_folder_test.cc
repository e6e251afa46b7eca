#include "client/state_folder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "client/cluster_client.h"
#include "process/private_paths.h"

namespace tessera::client {
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
  // Per user, never in world-writable /tmp.
  EXPECT_EQ(ResolveStateDir(""), DefaultStateDirectory());
  EXPECT_THAT(ResolveStateDir(""), ::testing::Not(::testing::StartsWith("/tmp/")));
}

TEST_F(StateFolderTest, TrustsOnlyAFolderOfThisUserThatOthersCannotWrite) {
  auto absent = TrustedStateFolder(root_ + "/not-yet");
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_EQ(absent->root, root_ + "/not-yet");
  ASSERT_TRUE(TrustedStateFolder(root_).ok());
  ASSERT_EQ(::chmod(root_.c_str(), 0777), 0);
  EXPECT_EQ(TrustedStateFolder(root_).status().code(), absl::StatusCode::kPermissionDenied);
  ASSERT_EQ(::chmod(root_.c_str(), 0700), 0);
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the folder to another user";
  // Another local user pre-created the folder with a token of their own.
  const std::string theirs = root_ + "/theirs";
  ASSERT_EQ(::mkdir(theirs.c_str(), 0700), 0);
  ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
  auto refused = TrustedStateFolder(theirs);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::HasSubstr("belongs to uid 65534"));
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
  // the test binary is not `tessera start`
  EXPECT_FALSE(IsTesseraStartProcess(getpid(), StateFolder{root_}));
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  // The child is a zombie until it is collected: gone for ProcessAlive as soon as it exits.
  while (ProcessAlive(child)) usleep(1000);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_FALSE(ProcessAlive(child));
}

// A pid file is trusted only for a `tessera start` of that very folder: one copied from another
// cluster's folder names a process that is not ours to signal.
TEST_F(StateFolderTest, StartProcessMatchesOnlyItsOwnStateFolder) {
  const std::string mine = root_ + "/mine";
  const std::string other = root_ + "/other";
  fs::create_directories(mine);
  fs::create_directories(other);
  // A shell named `tessera` running the script `start` (which blocks reading its stdin) has
  // exactly the command line of a daemon: tessera start --state-dir <other>.
  std::ofstream(root_ + "/start") << "read line\n";
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  if (child == 0) {
    dup2(pipe_fds[0], 0);
    close(pipe_fds[1]);
    if (chdir(root_.c_str()) != 0) _exit(127);
    const std::string relative = "./other/../other";
    execl("/bin/sh", "tessera", "start", "--state-dir", relative.c_str(), nullptr);
    _exit(127);
  }
  ASSERT_GT(child, 0);
  close(pipe_fds[0]);
  // Until the shell has exec'd, its command line is the test's.
  for (int i = 0; i < 2000 && !IsTesseraStartProcess(child, StateFolder{root_ + "/other"}); ++i) {
    usleep(1000);
  }
  // A relative --state-dir is judged from the daemon's own folder, spelled any way.
  EXPECT_TRUE(IsTesseraStartProcess(child, StateFolder{other}));
  EXPECT_TRUE(IsTesseraStartProcess(child, StateFolder{other + "/"}));
  EXPECT_FALSE(IsTesseraStartProcess(child, StateFolder{mine}));
  close(pipe_fds[1]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
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
}  // namespace tessera::client
