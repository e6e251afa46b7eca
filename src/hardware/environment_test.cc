#include "hardware/environment.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "hardware/sysroot.h"
#include "hardware/testing/fake_tree.h"

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
  testing::FakeTree tree;
  const char data[] = "TPU_NAME=my-slice\0TPU_WORKER_ID=2\0BROKEN\0EMPTY=\0";
  tree.Write("/proc/1/environ", std::string_view(data, sizeof(data) - 1));
  Environment env = Environment::ForSysroot(Sysroot(tree.root()));
  EXPECT_EQ(env.Get("TPU_NAME"), "my-slice");
  EXPECT_EQ(env.Get("TPU_WORKER_ID"), "2");
  EXPECT_EQ(env.Get("EMPTY"), "");
  EXPECT_FALSE(env.Has("BROKEN"));
  EXPECT_FALSE(env.Has("PATH"));  // never the test process's own variables
  testing::FakeTree empty;
  EXPECT_TRUE(Environment::ForSysroot(Sysroot(empty.root())).vars().empty());
}

}  // namespace
}  // namespace tessera
