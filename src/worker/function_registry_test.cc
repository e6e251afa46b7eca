#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tessera/remote_function.h"
#include "tessera/serialization.h"

namespace tessera {
namespace {

int AddForRegistry(int a, int b) { return a + b; }
TESSERA_REMOTE(AddForRegistry);

void NothingForRegistry() {}
TESSERA_REMOTE(NothingForRegistry);

int NotRegistered(int a) { return a; }

using internal::AnyFunction;

TEST(FunctionRegistryTest, NameOfARegisteredPointer) {
  const std::string* name =
      internal::FindFunctionName(reinterpret_cast<AnyFunction>(&AddForRegistry));
  ASSERT_NE(name, nullptr);
  EXPECT_EQ(*name, "AddForRegistry");
  EXPECT_EQ(internal::FindFunctionName(reinterpret_cast<AnyFunction>(&NotRegistered)), nullptr);
}

TEST(FunctionRegistryTest, InvokerRunsOnSerializedArguments) {
  const internal::Invoker* invoker = internal::FindInvoker("AddForRegistry");
  ASSERT_NE(invoker, nullptr);
  auto result = (*invoker)(Serialize(2, 40));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*Deserialize<int>(*result), 42);
}

TEST(FunctionRegistryTest, WrongArgumentsAreOneLineErrors) {
  const internal::Invoker* invoker = internal::FindInvoker("AddForRegistry");
  ASSERT_NE(invoker, nullptr);
  auto result = (*invoker)(Serialize(std::string("x"), 1));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(result.status().message()), ::testing::HasSubstr("int32"));
  auto too_few = (*invoker)(Serialize(1));
  EXPECT_FALSE(too_few.ok());
}

TEST(FunctionRegistryTest, VoidFunctionsReturnNil) {
  const internal::Invoker* invoker = internal::FindInvoker("NothingForRegistry");
  ASSERT_NE(invoker, nullptr);
  auto result = (*invoker)(Serialize());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*result, SerializeValue(msgpack::type::nil_t()));
}

TEST(FunctionRegistryTest, UnknownNames) {
  EXPECT_EQ(internal::FindInvoker("NoSuchFunction"), nullptr);
  EXPECT_THAT(internal::RegisteredFunctionNames(), ::testing::HasSubstr("AddForRegistry"));
}

}  // namespace
}  // namespace tessera
