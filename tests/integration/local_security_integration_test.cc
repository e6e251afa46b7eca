// Local security end to end, as another user on the same machine would try it: a state folder
// they prepared, a permissive umask, copied pid files (docs/cluster-runtime.md, "Security model").
// Tests that need a second user run as root (they give files to uid 65534) and skip otherwise.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/state_folder.h"
#include "integration/cluster_harness.h"
#include "objects/other_user_probe.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr uid_t kNobody = 65534;

// Every folder, file and socket under `root` that group or others may read, write or enter
// (the harness's own test-logs folder aside: the test writes it, not the cluster).
std::vector<std::string> OpenToOthers(const std::string& root) {
  std::vector<std::string> open;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (ec) break;
    if (it->path().filename() == "test-logs") {
      it.disable_recursion_pending();
      continue;
    }
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || S_ISLNK(st.st_mode)) continue;
    if ((st.st_mode & 077) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
      open.push_back(absl::StrCat(it->path().string(), " ", mode));
    }
  }
  return open;
}

TEST(LocalSecurityTest, AStateFolderAnotherUserPreparedIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to prepare a folder as another user";
  auto empty = TestCluster::Empty();
  ASSERT_OK(empty.status());
  TestCluster& c = **empty;
  // The attacker's folder, with a token of their own and a head address they control.
  const std::string theirs = absl::StrCat(c.state_dir(), "/theirs");
  ASSERT_EQ(::mkdir(theirs.c_str(), 0700), 0);
  std::ofstream(theirs + "/token") << "attacker-token\n";
  std::ofstream(theirs + "/head.address") << "127.0.0.1:1\n";
  ASSERT_EQ(::chmod((theirs + "/token").c_str(), 0600), 0);
  for (const std::string& path : {theirs, theirs + "/token", theirs + "/head.address"}) {
    ASSERT_EQ(::chown(path.c_str(), kNobody, kNobody), 0);
  }
  const std::string refusal =
      absl::StrCat("refusing ", theirs, ": it belongs to uid 65534, not to you (uid 0)");
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"start", "--head", "--port", "0", "--state-dir", theirs},
                                             {"status", "--state-dir", theirs},
                                             {"run", "--state-dir", theirs, "--", "id"},
                                             {"down", "--state-dir", theirs}}) {
    const CliResult r = c.Cli(args);
    EXPECT_EQ(r.exit_code, 1) << args[0] << ": " << Describe(r);
    EXPECT_THAT(r.err, HasSubstr(refusal)) << args[0] << ": " << Describe(r);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
  }
  // Nothing was started there and nothing in it was changed.
  EXPECT_FALSE(fs::exists(theirs + "/head.pid"));
  EXPECT_EQ(client::ReadFirstLine(theirs + "/token").value_or(""), "attacker-token");
  EXPECT_THAT(c.ProcessesOfThisCluster(), IsEmpty());
}

TEST(LocalSecurityTest, AFolderOthersCanWriteIsRefused) {
  auto empty = TestCluster::Empty();
  ASSERT_OK(empty.status());
  TestCluster& c = **empty;
  const std::string shared = absl::StrCat(c.state_dir(), "/shared");
  ASSERT_EQ(::mkdir(shared.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);
  const CliResult r = c.Cli({"start", "--head", "--port", "0", "--state-dir", shared});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("writable by group or others; chmod 700 " + shared));
  EXPECT_FALSE(fs::exists(shared + "/token"));
}

TEST(LocalSecurityTest, EverythingTheClusterWritesIsPrivateWhateverTheUmask) {
  // Every process the cluster starts inherits this umask.
  const mode_t saved = ::umask(0);
  ClusterOptions options;
  options.nodes.push_back({.id = "n1",
                           .hardware_yaml = CpuHost(2),
                           .extra_args = {"--object-store-memory", "8MiB"}});
  auto cluster = TestCluster::Start(options);
  ::umask(saved);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;
  const CliResult run = c.Cli({"run", "--", "sh", "-c", "echo private-output"});
  ASSERT_EQ(run.exit_code, 0) << Describe(run);
  EXPECT_EQ(run.out, "private-output\n");
  const client::StateFolder state{c.state_dir()};
  ASSERT_TRUE(fs::exists(state.ObjectStoreSocket("n1")));
  ASSERT_FALSE(fs::is_empty(state.NodeDir("n1") + "/workers"));
  EXPECT_THAT(OpenToOthers(c.state_dir()), IsEmpty());
}

TEST(LocalSecurityTest, TheObjectStoreRefusesAnotherUserEvenThroughAnOpenSocketFile) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to connect as another user";
  ClusterOptions options;
  options.nodes.push_back({.id = "n1",
                           .hardware_yaml = CpuHost(2),
                           .extra_args = {"--object-store-memory", "8MiB"}});
  auto cluster = TestCluster::Start(options);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;
  const client::StateFolder state{c.state_dir()};
  // Open the way there, as a careless administrator might.
  for (const std::string& path : {state.root, state.NodesDir(), state.NodeDir("n1"),
                                  state.ObjectStoreSocket("n1")}) {
    ASSERT_EQ(::chmod(path.c_str(), 0777), 0) << path;
  }
  // As uid 65534: the store closes the connection without sending anything (no arena).
  EXPECT_EQ(ConnectAsOtherUser(state.ObjectStoreSocket("n1"), kNobody),
            OtherUserOutcome::kClosedWithoutAWord);
}

TEST(LocalSecurityTest, DownSignalsOnlyTheProcessesOfItsOwnFolder) {
  auto cluster = TestCluster::Start(ClusterOptions{});
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;
  const client::StateFolder state{c.state_dir()};
  const auto head_pid = client::ReadPidFile(state.HeadPidFile());
  ASSERT_TRUE(head_pid.has_value());
  // Another folder holding copies of this cluster's pid and address files.
  const std::string copy = absl::StrCat(c.state_dir(), "/test-logs/copy");
  ASSERT_EQ(::mkdir(copy.c_str(), 0700), 0);
  for (const char* name : {"head.pid", "head.address", "token"}) {
    fs::copy_file(absl::StrCat(c.state_dir(), "/", name), absl::StrCat(copy, "/", name));
  }
  const CliResult down = c.Cli({"down", "--state-dir", copy});
  EXPECT_EQ(down.exit_code, 0) << Describe(down);
  EXPECT_THAT(down.out, HasSubstr("Nothing was running")) << Describe(down);
  EXPECT_EQ(::kill(*head_pid, 0), 0) << "the other cluster's head was signalled";
  const CliResult status = c.Cli({"status"});
  EXPECT_EQ(status.exit_code, 0) << Describe(status);
}

}  // namespace
}  // namespace tessera::testing
