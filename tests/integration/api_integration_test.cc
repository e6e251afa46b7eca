// The C++ API end to end on a real cluster (a head and two node agents as processes): this test
// binary is both the driver and, started by the agents in worker mode, the workers that run its
// tasks (main calls tessera::Init first when it is a worker).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "api/foreign_calls.h"
#include "integration/api_test_cluster.h"
#include "integration/cluster_harness.h"
#include "tessera/tessera.h"

namespace tessera::testing {
namespace {

using ::testing::HasSubstr;

int AddOne(int x) { return x + 1; }
TESSERA_REMOTE(AddOne);

int Sum(std::vector<int> xs) {
  int total = 0;
  for (int x : xs) total += x;
  return total;
}
TESSERA_REMOTE(Sum);

std::string Greet(std::string name, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += "hi " + name + ";";
  return out;
}
TESSERA_REMOTE(Greet);

int Throws(int) { throw std::invalid_argument("negative input is not allowed"); }
TESSERA_REMOTE(Throws);

// Dies on its first run (the marker file tells later runs apart), then answers.
int DieOnce(std::string marker) {
  if (!std::filesystem::exists(marker)) {
    std::ofstream(marker) << "ran";
    raise(SIGKILL);
  }
  return 42;
}
TESSERA_REMOTE(DieOnce);

int AlwaysDie(int) {
  raise(SIGKILL);
  return 0;
}
TESSERA_REMOTE(AlwaysDie);

// What the task sees of its devices: the context's GPU ids and CUDA_VISIBLE_DEVICES.
std::vector<std::string> GpuView(int) {
  const RuntimeContext& context = GetRuntimeContext();
  auto it = context.accelerator_ids.find("GPU");
  std::string ids = it == context.accelerator_ids.end() ? "" : absl::StrJoin(it->second, ",");
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  return {ids, visible == nullptr ? "<unset>" : visible, context.node_id, context.worker_id};
}
TESSERA_REMOTE(GpuView);

// What a worker's environment says of the cluster token: never the token itself, only where a
// private file holds it.
std::vector<std::string> TokenView(int) {
  const char* token = std::getenv("TESSERA_TOKEN");
  const char* file = std::getenv("TESSERA_TOKEN_FILE");
  struct stat st {};
  const bool found = file != nullptr && ::stat(file, &st) == 0;
  return {token == nullptr ? "<unset>" : "set", file == nullptr ? "<unset>" : "set",
          found ? absl::StrFormat("%o", st.st_mode & 0777) : "<missing>"};
}
TESSERA_REMOTE(TokenView);

int NotRegistered(int x) { return x; }

class ApiIntegrationTest : public ApiClusterSuite<4> {};

TEST_F(ApiIntegrationTest, RemoteTaskRoundTrip) {
  ObjectRef<int> ref = Task(AddOne).Remote(41);
  auto value = Get(ref, kPatience);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, 42);
  auto greeting = Get(Task(Greet).Remote("ann", 2), kPatience);
  ASSERT_TRUE(greeting.ok()) << greeting.status();
  EXPECT_EQ(*greeting, "hi ann;hi ann;");
}

TEST_F(ApiIntegrationTest, WorkersReadTheTokenFromAPrivateFileNeverFromTheirEnvironment) {
  auto view = Get(Task(TokenView).Remote(0), kPatience);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_THAT(*view, ::testing::ElementsAre("<unset>", "set", "600"));
}

TEST_F(ApiIntegrationTest, ManyTasksEveryResultOnce) {
  const TaskStats before = GetTaskStats();
  constexpr int kTasks = 10000;
  std::vector<ObjectRef<int>> refs;
  refs.reserve(kTasks);
  for (int i = 0; i < kTasks; ++i) refs.push_back(Task(AddOne).Remote(i));
  auto values = Get(refs, absl::Seconds(120));
  ASSERT_TRUE(values.ok()) << values.status();
  for (int i = 0; i < kTasks; ++i) ASSERT_EQ((*values)[i], i + 1) << i;
  const TaskStats after = GetTaskStats();
  EXPECT_EQ(after.submitted - before.submitted, kTasks);
  EXPECT_EQ(after.succeeded - before.succeeded, kTasks);
  EXPECT_EQ(after.duplicate_results, before.duplicate_results);
}

TEST_F(ApiIntegrationTest, ObjectRefArgumentsAndPut) {
  ObjectRef<int> first = Task(AddOne).Remote(1);
  ObjectRef<int> second = Task(AddOne).Remote(first);  // waits for first, gets its value
  auto value = Get(second, kPatience);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, 3);

  ObjectRef<std::vector<int>> put = Put(std::vector<int>{1, 2, 3, 4});
  auto back = Get(put);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, (std::vector<int>{1, 2, 3, 4}));
  auto sum = Get(Task(Sum).Remote(put), kPatience);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(*sum, 10);
}

TEST_F(ApiIntegrationTest, WaitReturnsReadyRefs) {
  std::vector<ObjectRef<int>> refs = {Task(AddOne).Remote(1), Task(AddOne).Remote(2),
                                      Task(AddOne).Remote(3)};
  WaitResult<int> all = Wait(refs, 3, kPatience);
  EXPECT_EQ(all.ready.size(), 3u);
  EXPECT_TRUE(all.not_ready.empty());
  EXPECT_EQ(*Get(all.ready[2]), 4);
}

TEST_F(ApiIntegrationTest, WhenReadyTellsOnceAResultIsHereAndItIsReadWithoutWaiting) {
  ObjectRef<int> ref = Task(AddOne).Remote(9);
  absl::Notification ready;
  ASSERT_OK(internal::WhenReady(ref, [&ready] { ready.Notify(); }));
  ASSERT_TRUE(ready.WaitForNotificationWithTimeout(kPatience));
  EXPECT_EQ(*Get(ref, absl::ZeroDuration()), 10);
  // Done already: at once, on this thread.
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  ASSERT_OK(internal::WhenReady(ref, [&ran_on] { ran_on = std::this_thread::get_id(); }));
  EXPECT_EQ(ran_on, caller);
  // Nothing this process owns: the caller waits with Get instead.
  bool ran = false;
  EXPECT_EQ(internal::WhenReady(ObjectRefBase(), [&ran] { ran = true; }).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(ran);
}

TEST_F(ApiIntegrationTest, UserExceptionReachesGetWithTypeAndMessage) {
  auto value = Get(Task(Throws).Remote(-1), kPatience);
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.status().code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(value.status().message(),
            "task Throws failed: std::invalid_argument: negative input is not allowed");
}

TEST_F(ApiIntegrationTest, KilledWorkerIsRetriedOnANewWorker) {
  const std::string marker = cluster_->state_dir() + "/die-once-marker";
  const TaskStats before = GetTaskStats();
  auto value = Get(Task(DieOnce).Remote(marker), kPatience);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, 42);
  const TaskStats after = GetTaskStats();
  EXPECT_EQ(after.retries - before.retries, 1);
  EXPECT_EQ(after.succeeded - before.succeeded, 1);
}

TEST_F(ApiIntegrationTest, AlwaysDyingTaskFailsWithTheCauseAfterMaxRetries) {
  auto value = Get(Task(AlwaysDie).MaxRetries(1).Remote(0), kPatience);
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(value.status().message()), HasSubstr("SIGKILL"));
  EXPECT_THAT(std::string(value.status().message()), HasSubstr("each of 2 attempts"));
}

TEST_F(ApiIntegrationTest, GpuTaskSeesExactlyItsDevices) {
  auto view = Get(Task(GpuView).Resources({{"CPU", 1}, {"GPU", 1}}).Remote(0), kPatience);
  ASSERT_TRUE(view.ok()) << view.status();
  ASSERT_EQ(view->size(), 4u);
  EXPECT_FALSE((*view)[0].empty());
  EXPECT_EQ((*view)[0], (*view)[1]);  // the context's ids are what CUDA_VISIBLE_DEVICES shows
  EXPECT_EQ((*view)[2], "gpu1");
  EXPECT_FALSE((*view)[3].empty());
}

TEST_F(ApiIntegrationTest, BadCallsAreOneLineErrors) {
  auto unregistered = Get(Task(NotRegistered).Remote(1));
  ASSERT_FALSE(unregistered.ok());
  EXPECT_EQ(unregistered.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unregistered.status().message()), HasSubstr("TESSERA_REMOTE"));

  auto bad = Get(Task(AddOne).Resources({{"CPU", 0.00001}}).Remote(1));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("resource \"CPU\": quantity 1e-05 has more than 4 decimal places"));
  EXPECT_EQ(std::string(bad.status().message()).find('\n'), std::string::npos);

  auto infeasible = Get(Task(AddOne).Resources({{"CPU", 1}, {"GPU", 64}}).Remote(1), kPatience);
  ASSERT_FALSE(infeasible.ok());
  EXPECT_THAT(std::string(infeasible.status().message()), HasSubstr("infeasible"));
}

}  // namespace
}  // namespace tessera::testing
