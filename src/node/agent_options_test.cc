#include "node/agent_options.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "node/object_store_sizing.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

class AgentOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("agent_options_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    std::filesystem::permissions(
        dir_ / name, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  }
  std::filesystem::path dir_;
};

TEST_F(AgentOptionsTest, ReadsHeadAddressAndTokenFromTheStateFolder) {
  Write("head.address", "127.0.0.1:4567\n");
  Write("token", "abcdef\n");
  AgentOptions options;
  options.state_dir = dir_.string();
  options.node_id = "n1";
  options.environment = Environment();
  auto resolved = ResolveAgentOptions(options);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->head_address, "127.0.0.1:4567");
  EXPECT_EQ(resolved->token, "abcdef");
}

TEST_F(AgentOptionsTest, SeveralHeadAddressesAndFollowingTheFolderOfTheHead) {
  Write("token", "abcdef\n");
  AgentOptions options;
  options.state_dir = dir_.string();
  options.node_id = "n1";
  options.environment = Environment();
  // No head of this folder yet: the addresses given, in order; nothing to follow.
  options.head_address = "10.0.0.1:7000, 10.0.0.2:7000,";
  auto resolved = ResolveAgentOptions(options);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->head_address, "10.0.0.1:7000");
  EXPECT_EQ(resolved->head_fallbacks, std::vector<std::string>{"10.0.0.2:7000"});
  EXPECT_EQ(resolved->head_address_file, "");
  // The folder's head publishes one of them: the agent follows what it publishes.
  Write("head.address", "10.0.0.2:7000\n");
  resolved = ResolveAgentOptions(options);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->head_address_file, (dir_ / "head.address").string());
  // A head found through the folder is followed too; another cluster's head is not.
  options.head_address = "";
  resolved = ResolveAgentOptions(options);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->head_address, "10.0.0.2:7000");
  EXPECT_EQ(resolved->head_address_file, (dir_ / "head.address").string());
  options.head_address = "10.9.9.9:7000";
  resolved = ResolveAgentOptions(options);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->head_address_file, "");
}

TEST_F(AgentOptionsTest, EnvironmentTokenAndStateDir) {
  Write("token", "fromfile");
  AgentOptions options;
  options.environment =
      Environment({{"TESSERA_STATE_DIR", dir_.string()}, {"TESSERA_TOKEN", "fromenv"}});
  options.head_address = "h:1";
  auto resolved = ResolveAgentOptions(options);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->state_dir, dir_.string());
  EXPECT_EQ(resolved->token, "fromenv");
  EXPECT_FALSE(resolved->node_id.empty());  // the host name
}

TEST_F(AgentOptionsTest, TokenFileBeatsEverythingAndMustBePrivate) {
  Write("mytoken", "secret-token\n");
  AgentOptions options;
  options.state_dir = dir_.string();
  options.token_file = (dir_ / "mytoken").string();
  options.environment =
      Environment(std::map<std::string, std::string, std::less<>>{{"TESSERA_TOKEN", "fromenv"}});
  auto resolved = ResolveAgentOptions(options);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->token, "secret-token");

  std::filesystem::permissions(dir_ / "mytoken", std::filesystem::perms::others_read,
                               std::filesystem::perm_options::add);
  EXPECT_EQ(ResolveAgentOptions(options).status().code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(AgentOptionsTest, HeadWithoutTokenIsAnError) {
  AgentOptions options;
  options.state_dir = dir_.string();
  options.head_address = "h:1";
  options.environment = Environment();
  auto resolved = ResolveAgentOptions(options);
  EXPECT_EQ(resolved.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(resolved.status().message(), HasSubstr("token"));
}

TEST_F(AgentOptionsTest, AloneWithoutHeadOrToken) {
  AgentOptions options;
  options.state_dir = dir_.string();
  options.node_id = "n1";
  options.environment = Environment();
  auto resolved = ResolveAgentOptions(options);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_TRUE(resolved->head_address.empty());
}

TEST_F(AgentOptionsTest, BadValues) {
  AgentOptions options;
  options.state_dir = dir_.string();
  options.environment = Environment();
  options.port = 70000;
  EXPECT_THAT(ResolveAgentOptions(options).status().message(), HasSubstr("port"));
  options.port = 0;
  options.cluster_file = "c.yaml";
  EXPECT_THAT(ResolveAgentOptions(options).status().message(), HasSubstr("node id"));
  options.hardware_file = "h.yaml";
  EXPECT_THAT(ResolveAgentOptions(options).status().message(), HasSubstr("not both"));
  options.hardware_file.reset();
  options.cluster_file.reset();
  options.bind = "";
  EXPECT_THAT(ResolveAgentOptions(options).status().message(), HasSubstr("bind"));
}

TEST_F(AgentOptionsTest, TheHttpPortIsAPortOrMinusOneForNone) {
  AgentOptions options;
  options.state_dir = dir_.string();
  options.node_id = "n1";
  options.environment = Environment();
  EXPECT_EQ(options.http_port, 0);  // an endpoint on any free port by default
  for (int port : {-1, 0, 65535}) {
    options.http_port = port;
    EXPECT_TRUE(ResolveAgentOptions(options).ok()) << port;
  }
  options.http_port = -2;
  EXPECT_EQ(ResolveAgentOptions(options).status().message(),
            "HTTP port -2 is out of range (-1 for none, 0 for any free port)");
  options.http_port = 0;
  options.telemetry_interval_ms = 0;
  EXPECT_EQ(ResolveAgentOptions(options).status().message(),
            "telemetry interval 0 ms is not positive");
}

TEST_F(AgentOptionsTest, PrestartedWorkersAndTheLauncher) {
  AgentOptions options;
  options.state_dir = dir_.string();
  options.node_id = "n1";
  options.environment = Environment();
  EXPECT_EQ(options.prestarted_workers, 2);  // a pool by default
  options.prestarted_workers = -1;
  EXPECT_EQ(ResolveAgentOptions(options).status().message(),
            "prestarted workers -1 is outside [0, 64]");
  options.prestarted_workers = kMaxPrestartedWorkers + 1;
  EXPECT_EQ(ResolveAgentOptions(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.prestarted_workers = 2;
  options.launcher = (dir_ / "no-such-launcher").string();
  EXPECT_EQ(ResolveAgentOptions(options).status().message(),
            "launcher " + options.launcher + " is not an executable file");
  // Without a pool, the launcher is not used, so it is not checked.
  options.prestarted_workers = 0;
  EXPECT_TRUE(ResolveAgentOptions(options).ok());
  options.prestarted_workers = 2;
  options.launcher = "/bin/true";
  EXPECT_TRUE(ResolveAgentOptions(options).ok());
}

// A fake /proc/meminfo under dir_/host: 24 GiB, 19.1 GiB available, 1.28 GiB of other stores.
class AgentObjectStoreSizeTest : public AgentOptionsTest {
 protected:
  void SetUp() override {
    AgentOptionsTest::SetUp();
    std::filesystem::create_directories(dir_ / "host/proc");
    std::ofstream(dir_ / "host/proc/meminfo")
        << "MemTotal:       24684092 kB\nMemFree:        19365168 kB\n"
           "MemAvailable:   20027802 kB\nShmem:           1342177 kB\n";
    options_.state_dir = dir_.string();
    options_.node_id = "n1";
    options_.environment = Environment();
    options_.memory_sysroot = (dir_ / "host").string();
  }
  AgentOptions options_;
};

TEST_F(AgentObjectStoreSizeTest, AStoreTooBigForTheHostIsRefusedBeforeItIsAllocated) {
  options_.object_store_bytes = uint64_t{30} << 30;
  auto resolved = ResolveAgentOptions(options_);
  EXPECT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(resolved.status().message(),
            "--object-store-memory 30 GiB does not fit: this host has 23.54 GiB of memory, "
            "19.1 GiB available, and 1.28 GiB in shared memory (other object stores are part of "
            "it); at most 17.92 GiB fits, keeping 1.18 GiB free");
}

TEST_F(AgentObjectStoreSizeTest, AStoreThatFitsKeepsItsSize) {
  options_.object_store_bytes = uint64_t{8} << 30;
  auto resolved = ResolveAgentOptions(options_);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->object_store_bytes, uint64_t{8} << 30);
}

TEST_F(AgentObjectStoreSizeTest, WithoutASizeTheStoreGetsTheDefaultShareOfTheHost) {
  options_.object_store_bytes = std::nullopt;
  auto resolved = ResolveAgentOptions(options_);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->object_store_bytes, kDefaultStoreCapBytes);  // 30% of 19.1 GiB is more

  // A host with little available gets 30% of it.
  std::ofstream(dir_ / "host/proc/meminfo")
      << "MemTotal: 4194304 kB\nMemAvailable: 1048576 kB\nShmem: 0 kB\n";
  resolved = ResolveAgentOptions(options_);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->object_store_bytes, uint64_t{307} << 20);
}

TEST_F(AgentObjectStoreSizeTest, TheStoreIsSizedAgainstTheMemoryRootNotTheDiscoveryRoot) {
  // Discovery may read a fake machine with a terabyte; the store's pages are still this host's.
  options_.sysroot = std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/hardware/gaudi2-8";
  options_.object_store_bytes = uint64_t{30} << 30;
  EXPECT_THAT(ResolveAgentOptions(options_).status().message(), HasSubstr("does not fit"));
}

TEST_F(AgentObjectStoreSizeTest, WithoutMeminfoOnlyANoStoreAgentResolves) {
  std::filesystem::remove(dir_ / "host/proc/meminfo");
  options_.object_store_bytes = uint64_t{4} << 20;
  auto resolved = ResolveAgentOptions(options_);
  EXPECT_EQ(resolved.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(resolved.status().message(), HasSubstr("/proc/meminfo"));
  EXPECT_THAT(resolved.status().message(), HasSubstr((dir_ / "host").string()));
  options_.object_store_bytes = 0;
  resolved = ResolveAgentOptions(options_);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->object_store_bytes, 0u);
}

TEST_F(AgentOptionsTest, DefaultLauncherIsBesideThisExecutable) {
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  EXPECT_EQ(DefaultLauncherPath(), (self.parent_path() / "tessera-launcher").string());
}

}  // namespace
}  // namespace tessera
