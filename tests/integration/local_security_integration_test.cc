// Local security end to end, as another user on the same machine would try it: a state folder
// they prepared, a permissive umask, copied pid files (docs/cluster-runtime.md, "Security model").
// Tests that need a second user run as root (they give files to uid 65534) and skip otherwise.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
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
  for (auto it = fs::recursive_directory_iterator(root, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
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
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"start", "--head", "--port", "0", "--state-dir", theirs},
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
  options.nodes.push_back(
      {.id = "n1", .hardware_yaml = CpuHost(2), .extra_args = {"--object-store-memory", "8MiB"}});
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
  options.nodes.push_back(
      {.id = "n1", .hardware_yaml = CpuHost(2), .extra_args = {"--object-store-memory", "8MiB"}});
  auto cluster = TestCluster::Start(options);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;
  const client::StateFolder state{c.state_dir()};
  // Open the way there, as a careless administrator might.
  for (const std::string& path :
       {state.root, state.NodesDir(), state.NodeDir("n1"), state.ObjectStoreSocket("n1")}) {
    ASSERT_EQ(::chmod(path.c_str(), 0777), 0) << path;
  }
  // As uid 65534: the store closes the connection without sending anything (no arena).
  EXPECT_EQ(ConnectAsOtherUser(state.ObjectStoreSocket("n1"), kNobody),
            OtherUserOutcome::kClosedWithoutAWord);
}

// Another local user binds the port of a head that died and listens for what the agents send
// it: before mutual TLS, every registration and heartbeat came with the cluster token. Now the
// agents send nothing but a TLS hello to a peer that cannot prove it holds the token, and say
// so in their logs.
TEST(LocalSecurityTest, AnotherUserOnADeadHeadsPortLearnsNothing) {
  ClusterOptions options;
  options.nodes.push_back({.id = "squatted-agent-node", .hardware_yaml = CpuHost(2)});
  auto cluster = TestCluster::Start(options);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;
  const std::string token = c.token();
  const std::string port = c.head_address().substr(c.head_address().rfind(':') + 1);
  ASSERT_OK(c.KillHead());

  // The squatter: a plain listener that answers as an HTTP/2 server would and prints, in hex,
  // every byte it receives in 4 seconds. As uid 65534 when this runs as root.
  const std::string squatter = absl::StrCat(
      "import socket, select, time, binascii\n"
      "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
      "s.bind((\"127.0.0.1\", ",
      port,
      ")); s.listen(16); s.setblocking(False)\n"
      "got = bytes(); conns = []; end = time.time() + 4\n"
      "while time.time() < end:\n"
      "  r, _, _ = select.select([s] + conns, [], [], 0.1)\n"
      "  for x in r:\n"
      "    if x is s:\n"
      "      c, _ = s.accept(); c.sendall(bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])); conns.append(c)\n"
      "    else:\n"
      "      d = x.recv(65536)\n"
      "      if d: got += d\n"
      "      else: conns.remove(x); x.close()\n"
      "print(len(conns) + 0, binascii.hexlify(got).decode())\n");
  std::string command = absl::StrCat("/usr/bin/python3 -c '", squatter, "'");
  if (::geteuid() == 0) {
    command = absl::StrCat("setpriv --reuid=65534 --regid=65534 --clear-groups ", command);
  } else {
    std::cout << "no second user without root: the squatter runs as this user, without the "
                 "token all the same\n";
  }
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[65536];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;) output.append(buffer, n);
  ASSERT_EQ(::pclose(pipe), 0) << output;
  const std::string received_hex = output.substr(output.find(' ') + 1);
  std::string received;
  for (size_t i = 0; i + 1 < received_hex.size(); i += 2) {
    received.push_back(static_cast<char>(std::stoi(received_hex.substr(i, 2), nullptr, 16)));
  }
  // The agent did knock (so the test saw something), and gave nothing away.
  EXPECT_FALSE(received.empty()) << output;
  EXPECT_EQ(received.find(token), std::string::npos);
  EXPECT_EQ(received.find("squatted-agent-node"), std::string::npos);
  EXPECT_EQ(received.find("RegisterNode"), std::string::npos);
  EXPECT_EQ(received.find("Heartbeat"), std::string::npos);
  // And it said why it would not talk to that peer.
  std::string logs;
  for (const auto& entry : fs::directory_iterator(c.state_dir() + "/test-logs")) {
    if (entry.path().extension() != ".log") continue;
    std::ifstream in(entry.path());
    logs.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  EXPECT_THAT(logs, HasSubstr("did not prove it holds the cluster token"));
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
