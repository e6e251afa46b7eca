// tessera-cuda-probe: prints, one JSON object per line, every CUDA device this process can see
// (ordinal, name, PCI bus id, UUID), or {"error": ...} when the CUDA driver cannot be used.
// Used to check on real GPUs that the isolation environment Tessera writes
// (CUDA_VISIBLE_DEVICES with CUDA_DEVICE_ORDER=PCI_BUS_ID) shows a worker exactly its devices.
#include <cuda_runtime.h>

#include <cstdio>

namespace {

void PrintUuid(const cudaUUID_t& uuid) {
  const unsigned char* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  std::printf("GPU-");
  for (int i = 0; i < 16; ++i) {
    std::printf("%02x", b[i]);
    if (i == 3 || i == 5 || i == 7 || i == 9) std::printf("-");
  }
}

}  // namespace

int main() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    std::printf("{\"error\": \"%s\"}\n", cudaGetErrorString(err));
    return 3;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    char bus_id[32] = {0};
    cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), i);
    std::printf("{\"ordinal\": %d, \"name\": \"%s\", \"pci_bus_id\": \"%s\", \"uuid\": \"", i,
                prop.name, bus_id);
    PrintUuid(prop.uuid);
    std::printf("\", \"memory_bytes\": %zu}\n", prop.totalGlobalMem);
  }
  return 0;
}
