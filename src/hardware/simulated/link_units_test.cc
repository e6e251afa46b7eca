#include "hardware/simulated/link_units.h"

#include "gtest/gtest.h"

namespace tessera::simulated {
namespace {

TEST(LinkUnitsTest, SpeedsInEveryUnit) {
  EXPECT_EQ(*ParseLinkSpeedMbps("400Gbps"), 400000);
  EXPECT_EQ(*ParseLinkSpeedMbps("25000Mbps"), 25000);
  EXPECT_EQ(*ParseLinkSpeedMbps("1.6Tbps"), 1600000);
  EXPECT_EQ(*ParseLinkSpeedMbps("2.5Gbps"), 2500);
}

TEST(LinkUnitsTest, BadSpeeds) {
  EXPECT_EQ(ParseLinkSpeedMbps("400gbps").status().message(),
            "\"400gbps\" has no unit; write it as e.g. 400Gbps (units: Mbps, Gbps, Tbps)");
  EXPECT_EQ(ParseLinkSpeedMbps("0Gbps").status().message(), "\"0Gbps\" must be greater than 0");
  EXPECT_EQ(ParseLinkSpeedMbps("-1Gbps").status().message(),
            "\"-1Gbps\" is not a number with a unit, e.g. 400Gbps");
  EXPECT_EQ(ParseLinkSpeedMbps("0.5Mbps").status().message(),
            "\"0.5Mbps\" is not a whole number of Mbps");
  EXPECT_EQ(ParseLinkSpeedMbps("900000000000000Tbps").status().message(),
            "\"900000000000000Tbps\" is too large");
}

TEST(LinkUnitsTest, Bandwidth) {
  EXPECT_EQ(*ParseBandwidthGBps("450GB/s"), 450);
  EXPECT_EQ(*ParseBandwidthGBps("37.5GB/s"), 37.5);
  EXPECT_FALSE(ParseBandwidthGBps("450").ok());
  EXPECT_FALSE(ParseBandwidthGBps("0GB/s").ok());
}

}  // namespace
}  // namespace tessera::simulated
