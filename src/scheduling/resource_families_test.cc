#include "scheduling/resource_families.h"

#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(ResourceFamiliesTest, AcceleratorResourcesAreTheFamiliesAndTheTypeMarkers) {
  for (std::string_view resource :
       {"GPU", "TPU", "neuron_cores", "HPU", "accelerator_type:H100", "accelerator_type:TPU-V6E"}) {
    EXPECT_TRUE(IsAcceleratorResource(resource)) << resource;
  }
  for (std::string_view resource : {"CPU", "memory", "object_store_memory", "custom", "gpu",
                                    "accelerator_type", "my_accelerator_type:H100"}) {
    EXPECT_FALSE(IsAcceleratorResource(resource)) << resource;
  }
}

TEST(ResourceFamiliesTest, UnitInstanceResourcesAreCountedPerDevice) {
  EXPECT_TRUE(IsUnitInstanceResource("GPU"));
  EXPECT_FALSE(IsUnitInstanceResource("CPU"));
  EXPECT_FALSE(IsUnitInstanceResource("accelerator_type:H100"));
}

}  // namespace
}  // namespace tessera
