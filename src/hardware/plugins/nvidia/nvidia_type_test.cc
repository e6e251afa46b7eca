#include "hardware/plugins/nvidia/nvidia_type.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(NvidiaTypeStringTest, RealNvmlNames) {
  const std::pair<const char*, const char*> cases[] = {
      // Data-center parts: the constants users already write.
      {"NVIDIA H100 80GB HBM3", "H100"},
      {"NVIDIA H100 PCIe", "H100"},
      {"NVIDIA H100 NVL", "H100"},
      {"NVIDIA H200", "H200"},
      {"NVIDIA H20", "H20"},
      {"NVIDIA B200", "B200"},
      {"NVIDIA GH200 480GB", "GH200"},
      {"NVIDIA A100-SXM4-80GB", "A100"},
      {"NVIDIA A100-SXM4-40GB", "A100"},
      {"NVIDIA A100 80GB PCIe", "A100"},
      {"Tesla V100-SXM2-16GB", "V100"},
      {"Tesla V100-PCIE-32GB", "V100"},
      {"Tesla P100-PCIE-16GB", "P100"},
      {"Tesla T4", "T4"},
      {"Tesla K80", "K80"},
      {"Tesla P4", "P4"},
      {"NVIDIA L4", "L4"},
      {"NVIDIA L40S", "L40S"},
      {"NVIDIA A10G", "A10G"},
      {"NVIDIA A10", "A10"},
      {"Quadro P4000", "P4000"},
      // Consumer and workstation parts: series word + model number (+ variant words).
      {"NVIDIA GeForce RTX 4090", "RTX-4090"},
      {"NVIDIA GeForce RTX 3090 Ti", "RTX-3090-Ti"},
      {"NVIDIA GeForce RTX 4070 Ti SUPER", "RTX-4070-Ti-SUPER"},
      {"NVIDIA GeForce GTX 1080 Ti", "GTX-1080-Ti"},
      {"GeForce GTX 1080", "GTX-1080"},
      {"NVIDIA RTX A6000", "RTX-A6000"},
      {"NVIDIA RTX 6000 Ada Generation", "RTX-6000-Ada"},
      {"Quadro RTX 8000", "RTX-8000"},
      {"NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000"},
      {"NVIDIA TITAN RTX", "TITAN-RTX"},
      {"NVIDIA TITAN V", "TITAN-V"},
  };
  for (const auto& [name, type] : cases) EXPECT_EQ(NvidiaTypeString(name), type) << name;
}

TEST(NvidiaTypeStringTest, EmptyOrVendorOnlyNamesGiveNothing) {
  EXPECT_EQ(NvidiaTypeString(""), "");
  EXPECT_EQ(NvidiaTypeString("NVIDIA"), "");
  EXPECT_EQ(NvidiaTypeString("   "), "");
}

TEST(NvidiaTypeStringTest, ResultIsAlwaysALabelValue) {
  EXPECT_EQ(NvidiaTypeString("NVIDIA H100/80GB"), "H10080GB");
  EXPECT_EQ(NvidiaTypeString("NVIDIA -X1-"), "");
}

}  // namespace
}  // namespace tessera
