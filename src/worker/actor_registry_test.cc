// TESSERA_ACTOR / TESSERA_ACTOR_METHOD: the factory's invoker makes this process's instance, and
// method invokers run on it, found by name and by member pointer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tessera/actor.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

class Box {
 public:
  explicit Box(int v) : v_(v) {}
  int Add(int k) { return v_ += k; }
  int Get() const { return v_; }

 private:
  int v_;
};
Box MakeBox(int v) { return Box(v); }  // by value: the registry keeps a copy
TESSERA_ACTOR(MakeBox);
TESSERA_ACTOR_METHOD(&Box::Add);
TESSERA_ACTOR_METHOD(&Box::Get);

std::string Args(int v) { return SerializeValue(std::make_tuple(v)); }

TEST(ActorRegistryTest, MethodsAreNamedByClassAndMethod) {
  const std::string* add = internal::FindActorMethodName(internal::MethodKey(&Box::Add));
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(*add, "Box::Add");
  const std::string* get = internal::FindActorMethodName(internal::MethodKey(&Box::Get));
  ASSERT_NE(get, nullptr);
  EXPECT_EQ(*get, "Box::Get");
}

TEST(ActorRegistryTest, FactoryMakesTheInstanceMethodsRunOn) {
  const internal::Invoker* add = internal::FindInvoker("Box::Add");
  ASSERT_NE(add, nullptr);
  const std::string* factory_name =
      internal::FindFunctionName(reinterpret_cast<internal::AnyFunction>(&MakeBox));
  ASSERT_NE(factory_name, nullptr);
  const internal::Invoker* factory = internal::FindInvoker(*factory_name);
  ASSERT_NE(factory, nullptr);
  ASSERT_TRUE((*factory)(Args(10)).ok());
  auto out = (*add)(Args(5));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*Deserialize<int>(*out), 15);
  auto again = (*internal::FindInvoker("Box::Get"))(SerializeValue(std::make_tuple()));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*Deserialize<int>(*again), 15);
  // The constructor running again (a restart) starts the state over.
  ASSERT_TRUE((*factory)(Args(1)).ok());
  EXPECT_EQ(*Deserialize<int>(*(*add)(Args(1))), 2);
}

}  // namespace
}  // namespace tessera
