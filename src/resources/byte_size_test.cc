#include "resources/byte_size.h"

#include <gtest/gtest.h>

#include <limits>

namespace tessera {
namespace {

uint64_t Bytes(std::string_view text) {
  auto b = ParseByteSize(text);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.value_or(0);
}

std::string ByteError(std::string_view text) {
  auto b = ParseByteSize(text);
  EXPECT_FALSE(b.ok()) << text << " parsed as " << *b;
  return b.ok() ? "" : std::string(b.status().message());
}

constexpr uint64_t kGiB = uint64_t{1} << 30;

TEST(ParseByteSizeTest, BinaryAndDecimalUnits) {
  EXPECT_EQ(Bytes("1B"), 1u);
  EXPECT_EQ(Bytes("1KiB"), 1024u);
  EXPECT_EQ(Bytes("1MiB"), 1024u * 1024);
  EXPECT_EQ(Bytes("64GiB"), 64 * kGiB);
  EXPECT_EQ(Bytes("2TiB"), 2 * 1024 * kGiB);
  EXPECT_EQ(Bytes("1PiB"), uint64_t{1} << 50);
  EXPECT_EQ(Bytes("1KB"), 1000u);
  EXPECT_EQ(Bytes("1MB"), 1000000u);
  EXPECT_EQ(Bytes("64GB"), 64000000000u);
  EXPECT_EQ(Bytes("1TB"), 1000000000000u);
  EXPECT_EQ(Bytes("1PB"), 1000000000000000u);
  EXPECT_EQ(Bytes("0GiB"), 0u);
}

TEST(ParseByteSizeTest, FractionsSpacesAndLeadingZeros) {
  EXPECT_EQ(Bytes("1.5GiB"), 3 * kGiB / 2);
  EXPECT_EQ(Bytes("0.5KiB"), 512u);
  EXPECT_EQ(Bytes("80 GiB"), 80 * kGiB);
  EXPECT_EQ(Bytes("  4 KiB "), 4096u);
  EXPECT_EQ(Bytes("0001.250KB"), 1250u);
  EXPECT_EQ(Bytes("0.000000000000001PB"), 1u);
  EXPECT_EQ(Bytes("15PiB"), 15 * (uint64_t{1} << 50));
}

TEST(ParseByteSizeTest, UnitsAreStrictWithHints) {
  const std::string units = " (units: B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB)";
  EXPECT_EQ(ByteError("64G"),
            "\"64G\": unknown byte unit \"G\"" + units + "; did you mean GiB or GB?");
  EXPECT_EQ(ByteError("64Gi"),
            "\"64Gi\": unknown byte unit \"Gi\"" + units + "; did you mean GiB?");
  EXPECT_EQ(ByteError("1kb"), "\"1kb\": unknown byte unit \"kb\"" + units + "; did you mean KB?");
  EXPECT_EQ(ByteError("1gib"),
            "\"1gib\": unknown byte unit \"gib\"" + units + "; did you mean GiB?");
  EXPECT_EQ(ByteError("1 bytes"), "\"1 bytes\": unknown byte unit \"bytes\"" + units);
  EXPECT_EQ(ByteError("64"), "\"64\" needs a byte unit, e.g. 64GiB" + units);
}

TEST(ParseByteSizeTest, NumberErrors) {
  EXPECT_EQ(ByteError("-1GiB"), "\"-1GiB\" is negative");
  EXPECT_EQ(ByteError(""), "\"\" is empty; expected a number like 2.5");
  EXPECT_EQ(ByteError("GiB"),
            "\"GiB\" is not a decimal number (expected digits with an "
            "optional fraction, like 2.5)");
  EXPECT_EQ(ByteError("1.2.3GiB"),
            "\"1.2.3GiB\" is not a decimal number (expected digits with "
            "an optional fraction, like 2.5)");
  EXPECT_EQ(ByteError("inf GiB"), "\"inf GiB\" is not a finite number");
  EXPECT_EQ(ByteError("NaN"), "\"NaN\" is not a finite number");
  EXPECT_EQ(ByteError("0.1KiB"), "\"0.1KiB\" is not a whole number of bytes (102.4 B)");
  EXPECT_EQ(ByteError("0.00001B"), "\"0.00001B\" is finer than 0.0001 byte");
  EXPECT_EQ(ByteError("16384PiB"), "\"16384PiB\" is too large (at most 16 EiB)");
  EXPECT_EQ(ByteError("99999999999999999999B"), "\"99999999999999999999B\" is too large");
  EXPECT_EQ(ByteError("1.0000000000000000001KiB"),
            "\"1.0000000000000000001KiB\" has more than 19 significant digits");
}

TEST(ParseByteQuantityTest, StoresBytesAsQuantity) {
  auto q = ParseByteQuantity("0.1KiB");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->ToString(), "102.4");
  auto max = ParseByteQuantity("922337203685477.5807B");
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_EQ(max->raw(), std::numeric_limits<int64_t>::max());
  auto too_big = ParseByteQuantity("1PiB");
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().message(),
            "\"1PiB\" is too large (at most 922337203685477.5807 bytes, about 838 TiB)");
}

TEST(FormatByteQuantityTest, ShortestExactSpelling) {
  auto bytes = [](uint64_t b) {
    return FormatByteQuantity(Quantity::FromInt(static_cast<int64_t>(b)));
  };
  EXPECT_EQ(bytes(64 * kGiB), "64GiB");
  EXPECT_EQ(bytes(3 * kGiB / 2), "1.5GiB");
  EXPECT_EQ(bytes(64000000000), "64GB");
  EXPECT_EQ(bytes(1000), "1KB");
  EXPECT_EQ(bytes(1500), "1.5KB");  // tie with "1500B" goes to the larger unit
  EXPECT_EQ(bytes(1023), "1023B");
  EXPECT_EQ(bytes(0), "0B");
  EXPECT_EQ(FormatByteQuantity(Quantity::FromRaw(5000)), "0.5B");
}

TEST(FormatByteQuantityTest, RoundTripsThroughParse) {
  for (int64_t raw :
       {int64_t{0}, int64_t{1}, int64_t{5000}, int64_t{10240000}, int64_t{123456789012345},
        std::numeric_limits<int64_t>::max(), int64_t{64} * (int64_t{1} << 30) * 10000}) {
    const Quantity q = Quantity::FromRaw(raw);
    auto parsed = ParseByteQuantity(FormatByteQuantity(q));
    ASSERT_TRUE(parsed.ok()) << FormatByteQuantity(q) << ": " << parsed.status();
    EXPECT_EQ(*parsed, q) << FormatByteQuantity(q);
  }
}

TEST(FormatBytesTest, HumanReadable) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1024), "1 KiB");
  EXPECT_EQ(FormatBytes(80 * kGiB), "80 GiB");
  EXPECT_EQ(FormatBytes(3 * 512 * kGiB), "1.5 TiB");
  EXPECT_EQ(FormatBytes(1234567), "1.18 MiB");
  EXPECT_EQ(FormatBytes(1024 * 1024 - 1), "1 MiB");  // rounds up into the next unit
  EXPECT_EQ(FormatBytes(std::numeric_limits<uint64_t>::max()), "16 EiB");
}

}  // namespace
}  // namespace tessera
