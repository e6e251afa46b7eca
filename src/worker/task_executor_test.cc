#include "worker/task_executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "tessera/object_id.h"
#include "tessera/remote_function.h"
#include "tessera/serialization.h"

namespace tessera::worker {
namespace {

using ::testing::HasSubstr;

int Twice(int x) { return 2 * x; }
TESSERA_REMOTE(Twice);

std::string Concat(std::string a, const std::string& b) { return a + b; }
TESSERA_REMOTE(Concat);

struct CustomError {};
int Throws(int kind) {
  if (kind == 0) throw std::out_of_range("index 7 is past the end");
  throw CustomError{};
}
TESSERA_REMOTE(Throws);

v1::TaskSpec Spec(const std::string& function) {
  v1::TaskSpec spec;
  spec.set_task_id(TaskId::FromRandom().Binary());
  spec.set_function(function);
  return spec;
}

void AddValue(v1::TaskSpec& spec, const std::string& bytes) { spec.add_args()->set_value(bytes); }

ArgumentFetcher NoFetch() {
  return [](const v1::ObjectRefProto&) -> absl::StatusOr<std::string> {
    return absl::InternalError("no fetch expected");
  };
}

TEST(TaskExecutorTest, RunsAndSerializesTheResult) {
  v1::TaskSpec spec = Spec("Twice");
  AddValue(spec, SerializeValue(21));
  v1::TaskResult result = ExecuteTask(spec, NoFetch());
  ASSERT_TRUE(result.has_value()) << result.DebugString();
  EXPECT_EQ(result.task_id(), spec.task_id());
  EXPECT_EQ(*Deserialize<int>(result.value()), 42);
}

TEST(TaskExecutorTest, RefArgumentsAreFetched) {
  v1::TaskSpec spec = Spec("Concat");
  AddValue(spec, SerializeValue(std::string("ab")));
  spec.add_args()->mutable_ref()->set_object_id("x");
  v1::TaskResult result = ExecuteTask(spec, [](const v1::ObjectRefProto& ref) {
    EXPECT_EQ(ref.object_id(), "x");
    return absl::StatusOr<std::string>(SerializeValue(std::string("cd")));
  });
  ASSERT_TRUE(result.has_value()) << result.DebugString();
  EXPECT_EQ(*Deserialize<std::string>(result.value()), "abcd");
}

TEST(TaskExecutorTest, ExceptionsNameTheirTypeAndMessage) {
  v1::TaskSpec spec = Spec("Throws");
  AddValue(spec, SerializeValue(0));
  v1::TaskResult result = ExecuteTask(spec, NoFetch());
  ASSERT_TRUE(result.has_error());
  EXPECT_EQ(result.error().kind(), "application");
  EXPECT_EQ(result.error().type(), "std::out_of_range");
  EXPECT_EQ(result.error().message(), "index 7 is past the end");

  v1::TaskSpec other = Spec("Throws");
  AddValue(other, SerializeValue(1));
  v1::TaskResult custom = ExecuteTask(other, NoFetch());
  ASSERT_TRUE(custom.has_error());
  EXPECT_THAT(custom.error().type(), HasSubstr("CustomError"));
}

TEST(TaskExecutorTest, UnknownFunctionAndBadArguments) {
  v1::TaskResult unknown = ExecuteTask(Spec("Missing"), NoFetch());
  ASSERT_TRUE(unknown.has_error());
  EXPECT_EQ(unknown.error().kind(), "invalid");
  EXPECT_THAT(unknown.error().message(), HasSubstr("Missing is not registered"));

  v1::TaskSpec spec = Spec("Twice");
  AddValue(spec, SerializeValue(std::string("no")));
  v1::TaskResult bad = ExecuteTask(spec, NoFetch());
  ASSERT_TRUE(bad.has_error());
  EXPECT_EQ(bad.error().kind(), "invalid");
  EXPECT_THAT(bad.error().message(), HasSubstr("arguments of Twice"));
}

TEST(TaskExecutorTest, ATaskOfAnotherLanguageIsRefusedWithoutRunning) {
  v1::TaskSpec spec = Spec("Twice");
  spec.set_language(v1::LANGUAGE_PYTHON);
  AddValue(spec, SerializeValue(21));
  v1::TaskResult result = ExecuteTask(spec, NoFetch());
  ASSERT_TRUE(result.has_error());
  EXPECT_EQ(result.error().kind(), "invalid");
  EXPECT_THAT(result.error().message(), HasSubstr("LANGUAGE_PYTHON and this is a C++ worker"));
}

TEST(TaskExecutorTest, RetryExceptionsMarksTheListedTypesRetryable) {
  v1::TaskSpec spec = Spec("Throws");
  AddValue(spec, SerializeValue(0));
  EXPECT_FALSE(ExecuteTask(spec, NoFetch()).error().retryable());  // not asked
  spec.set_retry_exceptions(true);
  EXPECT_TRUE(ExecuteTask(spec, NoFetch()).error().retryable());  // any exception
  spec.add_retry_exception_types("std::out_of_range");
  EXPECT_TRUE(ExecuteTask(spec, NoFetch()).error().retryable());
  spec.clear_retry_exception_types();
  spec.add_retry_exception_types("std::invalid_argument");
  EXPECT_FALSE(ExecuteTask(spec, NoFetch()).error().retryable());
}

}  // namespace
}  // namespace tessera::worker
