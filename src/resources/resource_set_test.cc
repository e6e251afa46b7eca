#include "resources/resource_set.h"

#include <gtest/gtest.h>

#include <limits>

namespace tessera {
namespace {

ResourceSet R(std::string_view text) {
  auto r = ParseResourceSet(text);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.value_or(ResourceSet());
}

std::string ParseError(std::string_view text) {
  auto r = ParseResourceSet(text);
  EXPECT_FALSE(r.ok()) << text << " parsed as " << r->ToString();
  return r.ok() ? "" : std::string(r.status().message());
}

Quantity Q(std::string_view text) { return *Quantity::Parse(text); }

TEST(ParseResourceSetTest, ParsesEveryKindOfValue) {
  const ResourceSet r = R("CPU=8, GPU = 4,memory=64GiB,my_res=2.5,accelerator_type:H100=1");
  EXPECT_EQ(r.Get("CPU"), Quantity::FromInt(8));
  EXPECT_EQ(r.Get("GPU"), Quantity::FromInt(4));
  EXPECT_EQ(r.Get("memory"), Quantity::FromInt(int64_t{64} << 30));
  EXPECT_EQ(r.Get("my_res"), Q("2.5"));
  EXPECT_EQ(r.Get("accelerator_type:H100"), Quantity::FromInt(1));
  EXPECT_EQ(r.Get("TPU"), Quantity());
  EXPECT_EQ(r.size(), 5u);
  EXPECT_EQ(R("object_store_memory=1.5GB").Get("object_store_memory"),
            Quantity::FromInt(1500000000));
}

TEST(ParseResourceSetTest, EmptyTextIsEmptySetAndZerosAreDropped) {
  EXPECT_TRUE(R("").empty());
  EXPECT_TRUE(R("   ").empty());
  const ResourceSet r = R("CPU=0,GPU=1");
  EXPECT_EQ(r.size(), 1u);
  EXPECT_EQ(r.ToString(), "GPU=1");
}

TEST(ParseResourceSetTest, ErrorsNameTheOffendingToken) {
  EXPECT_EQ(ParseError("GPU=-1"), "resource \"GPU\": \"-1\" is negative");
  EXPECT_EQ(ParseError("memory=64"),
            "resource \"memory\": \"64\" needs a byte unit, e.g. 64GiB (units: B, KB, MB, GB, "
            "TB, PB, KiB, MiB, GiB, TiB, PiB)");
  EXPECT_EQ(ParseError("object_store_memory=1G"),
            "resource \"object_store_memory\": \"1G\": unknown byte unit \"G\" (units: B, KB, "
            "MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB); did you mean GiB or GB?");
  EXPECT_EQ(ParseError("CPU=8GiB"),
            "resource \"CPU\": \"8GiB\" has a unit, but CPU takes a plain number (only memory "
            "and object_store_memory take byte units)");
  EXPECT_EQ(ParseError("CPU=0.00001"),
            "resource \"CPU\": \"0.00001\" has more than 4 decimal places (the smallest quantity "
            "is 0.0001)");
  EXPECT_EQ(ParseError("CPU="), "resource \"CPU\": \"\" is empty; expected a number like 2.5");
  EXPECT_EQ(ParseError("CPU=abc"),
            "resource \"CPU\": \"abc\" is not a decimal number (expected digits with an optional "
            "fraction, like 2.5)");
  EXPECT_EQ(ParseError("CPU=1,CPU=2"), "resource \"CPU\" is given twice");
  EXPECT_EQ(ParseError("CPU=0,CPU=2"), "resource \"CPU\" is given twice");
  EXPECT_EQ(ParseError("CPU=1,,GPU=1"), "resource set \"CPU=1,,GPU=1\": entry 2 is empty");
  EXPECT_EQ(ParseError("CPU=1,"), "resource set \"CPU=1,\": entry 2 is empty");
  EXPECT_EQ(ParseError("CPU"),
            "resource entry \"CPU\" has no '=' (expected name=value, e.g. CPU=8)");
  EXPECT_EQ(ParseError("=8"), "resource entry \"=8\" has an empty name");
  EXPECT_EQ(ParseError("8CPU=1"), "resource name \"8CPU\" must start with a letter");
  EXPECT_EQ(ParseError("my res=1"),
            "resource name \"my res\" has an invalid character \" \" at position 3 (allowed: "
            "letters, digits and _ - . : /)");
  EXPECT_EQ(ParseError("CPU=1=2"),
            "resource \"CPU\": \"1=2\" is not a decimal number (expected digits with an "
            "optional fraction, like 2.5)");
}

TEST(ValidateResourceNameTest, AcceptsDocumentedCharacters) {
  EXPECT_TRUE(ValidateResourceName("accelerator_type:H100").ok());
  EXPECT_TRUE(ValidateResourceName("vendor.com/fpga-x").ok());
  EXPECT_TRUE(ValidateResourceName("neuron_cores").ok());
  EXPECT_EQ(ValidateResourceName("").message(), "resource name is empty");
  EXPECT_EQ(ValidateResourceName(std::string(257, 'a')).message(),
            "resource name \"" + std::string(32, 'a') + "\"... is longer than 256 characters");
}

TEST(ResourceSetTest, ToStringRoundTrips) {
  const ResourceSet r = R("memory=64GiB,GPU=4,CPU=8,my_res=2.5,object_store_memory=1.5GB");
  EXPECT_EQ(r.ToString(), "CPU=8,GPU=4,memory=64GiB,my_res=2.5,object_store_memory=1.5GB");
  EXPECT_EQ(R(r.ToString()), r);
  ResourceSet odd;
  odd.Set("memory", Quantity::FromRaw(5000));  // half a byte, only possible programmatically
  EXPECT_EQ(odd.ToString(), "memory=0.5B");
  EXPECT_EQ(R(odd.ToString()), odd);
  EXPECT_EQ(ResourceSet().ToString(), "");
}

TEST(ResourceSetTest, SetZeroRemovesAndIterationIsSorted) {
  ResourceSet r;
  r.Set("b", Quantity::FromInt(1));
  r.Set("a", Quantity::FromInt(2));
  r.Set("C", Quantity::FromInt(3));
  std::vector<std::string> names;
  for (const auto& [name, q] : r) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"C", "a", "b"}));
  r.Set("a", Quantity());
  EXPECT_EQ(r.size(), 2u);
  EXPECT_EQ(r, R("C=3,b=1"));
}

TEST(ResourceSetTest, ContainsChecksEveryDemand) {
  const ResourceSet node = R("CPU=8,GPU=4,memory=64GiB");
  EXPECT_TRUE(node.Contains(R("CPU=8,GPU=0.5")));
  EXPECT_TRUE(node.Contains(ResourceSet()));
  EXPECT_FALSE(node.Contains(R("CPU=8.0001")));
  EXPECT_FALSE(node.Contains(R("TPU=1")));
  EXPECT_FALSE(node.Contains(R("memory=65GiB")));
  EXPECT_TRUE(ResourceSet().Contains(ResourceSet()));
}

TEST(ResourceSetTest, PlusAndMinusAreExact) {
  auto sum = R("CPU=0.1").Plus(R("CPU=0.2,GPU=1"));
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(*sum, R("CPU=0.3,GPU=1"));
  auto rest = R("CPU=8,GPU=4").Minus(R("CPU=8,GPU=0.25"));
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest->ToString(), "GPU=3.75");  // CPU reached zero and is gone
}

TEST(ResourceSetTest, MinusBelowZeroNamesTheResource) {
  auto rest = R("CPU=8,GPU=1").Minus(R("GPU=2"));
  ASSERT_FALSE(rest.ok());
  EXPECT_EQ(rest.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(rest.status().message(),
            "resource \"GPU\": cannot subtract 2 from 1 (the result would be negative)");
  auto absent = R("CPU=8").Minus(R("TPU=4"));
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.status().message(),
            "resource \"TPU\": cannot subtract 4 from 0 (the result would be negative)");
}

TEST(ResourceSetTest, PlusOverflowNamesTheResource) {
  ResourceSet big;
  big.Set("CPU", Quantity::FromRaw(std::numeric_limits<int64_t>::max()));
  auto sum = big.Plus(R("CPU=0.0001"));
  ASSERT_FALSE(sum.ok());
  EXPECT_EQ(sum.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(sum.status().message(),
            "resource \"CPU\": quantity overflow: 922337203685477.5807 + 0.0001");
}

TEST(ResourceSetTest, ByteResourcesAreListedOnce) {
  EXPECT_TRUE(IsByteResource("memory"));
  EXPECT_TRUE(IsByteResource("object_store_memory"));
  EXPECT_FALSE(IsByteResource("Memory"));
  EXPECT_FALSE(IsByteResource("GPU"));
}

TEST(ResourceSetDeathTest, NegativeSetAborts) {
  ResourceSet r;
  EXPECT_DEATH(r.Set("CPU", Quantity::FromRaw(-1)), "negative quantity");
}

TEST(ResourceSetTest, FromAmountsTakesNumbersAsAProgramWritesThem) {
  auto set = ResourceSet::FromAmounts({{"CPU", 1}, {"GPU", 0.5}, {"memory", 2e9}, {"none", 0}});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(*set, ParseResourceSet("CPU=1,GPU=0.5,memory=2000000000B").value());

  auto negative = ResourceSet::FromAmounts({{"GPU", -1}});
  EXPECT_EQ(negative.status().message(), "resource \"GPU\": quantity -1 is negative");
  auto half_byte = ResourceSet::FromAmounts({{"memory", 1.5}});
  EXPECT_EQ(half_byte.status().message(),
            "resource \"memory\": 1.5 is not a whole number of bytes");
  EXPECT_FALSE(ResourceSet::FromAmounts({{"bad name", 1}}).ok());
  EXPECT_FALSE(ResourceSet::FromAmounts({{"GPU", 0.00001}}).ok());
}

TEST(ResourceSetTest, OrdersForKeysByNameThenAmount) {
  const ResourceSet one = ParseResourceSet("CPU=1").value();
  const ResourceSet two = ParseResourceSet("CPU=2").value();
  const ResourceSet gpu = ParseResourceSet("CPU=1,GPU=1").value();
  EXPECT_LT(one, two);
  EXPECT_LT(one, gpu);
  EXPECT_FALSE(two < two);
}

}  // namespace
}  // namespace tessera
