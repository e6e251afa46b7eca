// The small parsers and tables behind detection: NVML bus ids, /proc/driver/nvidia files, NVLink
// lane rates, PCI rejection lines.
#include <gtest/gtest.h>

#include "hardware/plugins/nvidia/nvidia_links.h"
#include "hardware/plugins/nvidia/nvidia_pci.h"
#include "hardware/plugins/nvidia/nvidia_sysfs.h"
#include "hardware/plugins/nvidia/nvml_probe.h"

namespace tessera {
namespace {

TEST(NormalizeNvmlBusIdTest, EightAndFourDigitDomains) {
  EXPECT_EQ(NormalizeNvmlBusId("00000000:1B:00.0"), "0000:1b:00.0");
  EXPECT_EQ(NormalizeNvmlBusId("0000:DF:00.0"), "0000:df:00.0");
  EXPECT_EQ(NormalizeNvmlBusId("00000001:05:1f.7"), "0001:05:1f.7");
}

TEST(NormalizeNvmlBusIdTest, GarbageIsEmpty) {
  for (const char* bad : {"", "1b:00.0", "0000:1b:00", "0000:1b:00.8", "0000:1b:20.0",
                          "0000:zz:00.0", "000000000:1b:00.0", "0000:1b:00.0.1"}) {
    EXPECT_EQ(NormalizeNvmlBusId(bad), "") << bad;
  }
}

TEST(ProcGpuInformationTest, ReadsModelUuidAndBus) {
  const ProcGpuInformation info = ParseProcGpuInformation(
      "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\n"
      "GPU UUID: \t GPU-5a1e0000-6c1d-4e3a-9b2f-8d1f00000000\n"
      "Bus Location: \t 0000:1B:00.0\nDevice Minor: \t 0\n");
  EXPECT_EQ(info.model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(info.uuid, "GPU-5a1e0000-6c1d-4e3a-9b2f-8d1f00000000");
  EXPECT_EQ(info.bus_location, "0000:1b:00.0");
  EXPECT_EQ(ParseProcGpuInformation("nothing here").model, "");
}

TEST(NvrmVersionTest, ProprietaryAndOpenModules) {
  EXPECT_EQ(ParseNvrmVersion("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.133.20  Fri "
                             "Mar 14 10:56:34 UTC 2025\nGCC version: gcc 12.2.0\n"),
            "570.133.20");
  EXPECT_EQ(ParseNvrmVersion("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "
                             "570.133.07  Release Build  (dvs-builder@U16)\n"),
            "570.133.07");
  EXPECT_EQ(ParseNvrmVersion("GCC version: 12.2.0\n"), "");
}

TEST(NvLinkRateTest, PerLanePerDirectionByNvmlVersion) {
  EXPECT_EQ(NvLinkLaneGigabytesPerSecond(1), 20);  // 1.0, P100
  EXPECT_EQ(NvLinkLaneGigabytesPerSecond(2), 25);  // 2.0, V100
  EXPECT_EQ(NvLinkLaneGigabytesPerSecond(4), 25);  // 3.0, A100
  EXPECT_EQ(NvLinkLaneGigabytesPerSecond(6), 25);  // 4.0, H100
  EXPECT_EQ(NvLinkLaneGigabytesPerSecond(7), 50);  // 5.0, B200
  EXPECT_EQ(NvLinkLaneGigabytesPerSecond(0), 0);
  EXPECT_EQ(NvLinkLaneGigabytesPerSecond(8), 0);  // 6.0: not in the table yet
}

TEST(RejectionWarningTest, NamesBusIdsIdsAndWhy) {
  const PciFunction nvswitch{.bus_id = "0000:05:00.0",
                             .vendor_id = 0x10de,
                             .device_id = 0x22a3,
                             .class_code = 0x068000,
                             .driver = "nvidia"};
  EXPECT_EQ(RejectionWarning(nvswitch, "unused"),
            "0000:05:00.0 (10de:22a3 class 0x068000 driver nvidia) is an NVSwitch, not a GPU; "
            "not counted");
  const PciFunction audio{.bus_id = "0000:01:00.1",
                          .vendor_id = 0x10de,
                          .device_id = 0x22ba,
                          .class_code = 0x040300,
                          .driver = "snd_hda_intel"};
  EXPECT_NE(RejectionWarning(audio, "").find("is an HD-audio function"), std::string::npos);
  const PciFunction vga{.bus_id = "0000:3b:00.0",
                        .vendor_id = 0x10de,
                        .device_id = 0x2330,
                        .class_code = 0x030200,
                        .driver = "vfio-pci"};
  EXPECT_EQ(RejectionWarning(vga, "is not bound to the nvidia driver"),
            "0000:3b:00.0 (10de:2330 class 0x030200 driver vfio-pci) is not bound to the nvidia "
            "driver; not counted");
  EXPECT_TRUE(IsNvidiaDisplayFunction(vga));
  EXPECT_FALSE(IsNvidiaDisplayFunction(nvswitch));
  EXPECT_TRUE(IsNvSwitchFunction(nvswitch));
}

}  // namespace
}  // namespace tessera
