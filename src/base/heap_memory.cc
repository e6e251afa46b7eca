#include "base/heap_memory.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <fstream>
#include <string>

namespace tessera {

void ReleaseFreeHeapMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

int64_t ResidentBytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      int64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    status.ignore(4096, '\n');
  }
  return 0;
}

}  // namespace tessera
