#include "hardware/environment.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "hardware/sysroot.h"

namespace tessera {
namespace {

TEST(EnvironmentTest, FromProcessSeesSetVariables) {
  ::setenv("TESSERA_ENVIRONMENT_TEST", "a=b", 1);
  EXPECT_EQ(Environment::FromProcess().Get("TESSERA_ENVIRONMENT_TEST"), "a=b");
  ::unsetenv("TESSERA_ENVIRONMENT_TEST");
  EXPECT_FALSE(Environment::FromProcess().Has("TESSERA_ENVIRONMENT_TEST"));
}

TEST(EnvironmentTest, SetGetUnset) {
  Environment env;
  env.Set("A", "");
  EXPECT_TRUE(env.Has("A"));
  EXPECT_EQ(env.Get("A"), "");
  env.Unset("A");
  EXPECT_EQ(env.Get("A"), std::nullopt);
}

TEST(EnvironmentTest, FakeTreeEnvironmentComesFromProc1Environ) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / "environment_test_root";
  fs::remove_all(root);
  fs::create_directories(root / "proc/1");
  {
    std::ofstream out(root / "proc/1/environ", std::ios::binary);
    const char data[] = "TPU_NAME=my-slice\0TPU_WORKER_ID=2\0BROKEN\0EMPTY=\0";
    out.write(data, sizeof(data) - 1);
  }
  Environment env = Environment::ForSysroot(Sysroot(root.string()));
  EXPECT_EQ(env.Get("TPU_NAME"), "my-slice");
  EXPECT_EQ(env.Get("TPU_WORKER_ID"), "2");
  EXPECT_EQ(env.Get("EMPTY"), "");
  EXPECT_FALSE(env.Has("BROKEN"));
  EXPECT_FALSE(env.Has("PATH"));  // never the test process's own variables
  fs::remove_all(root);
  EXPECT_TRUE(Environment::ForSysroot(Sysroot(root.string())).vars().empty());
}

}  // namespace
}  // namespace tessera
