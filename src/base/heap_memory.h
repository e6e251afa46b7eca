// Returning freed heap memory to the system, and reading what the process holds resident.
//
// glibc's allocator keeps freed small blocks in its arenas (one per thread that allocated, up
// to 8 per core) and gives back only the top of each heap. A thread that once built a large
// answer out of many small blocks keeps that peak resident after everything is freed, as long
// as one live block sits above it. ReleaseFreeHeapMemory hands every whole free page of every
// arena back (malloc_trim(0)); the blocks in use are not moved. It costs about a millisecond
// per 100 MiB of heap: call it after a large piece of work, not on a hot path.
//
// Threading: both are thread-safe.
#pragma once

#include <cstdint>

namespace tessera {

// Gives free heap pages back to the system. No effect where the C library has no such call.
void ReleaseFreeHeapMemory();

// The process's resident set size in bytes (VmRSS in /proc/self/status); 0 when unreadable.
int64_t ResidentBytes();

}  // namespace tessera
