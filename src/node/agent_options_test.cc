#include "node/agent_options.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

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
    std::filesystem::permissions(dir_ / name, std::filesystem::perms::owner_read |
                                                  std::filesystem::perms::owner_write);
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
  options.environment = Environment(
      std::map<std::string, std::string, std::less<>>{{"TESSERA_TOKEN", "fromenv"}});
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

TEST_F(AgentOptionsTest, PrestartedWorkersAndTheLauncher) {
  AgentOptions options;
  options.state_dir = dir_.string();
  options.node_id = "n1";
  options.environment = Environment();
  EXPECT_EQ(options.prestarted_workers, 2);  // a pool by default
  options.prestarted_workers = -1;
  EXPECT_EQ(ResolveAgentOptions(options).status().message(), "prestarted workers -1 is outside [0, 64]");
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

TEST_F(AgentOptionsTest, DefaultLauncherIsBesideThisExecutable) {
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  EXPECT_EQ(DefaultLauncherPath(), (self.parent_path() / "tessera-launcher").string());
}

}  // namespace
}  // namespace tessera
