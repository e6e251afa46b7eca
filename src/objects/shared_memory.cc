#include "objects/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace tessera {
namespace {

absl::Status Errno(std::string_view what) {
  return absl::InternalError(
      absl::StrCat(absl::string_view(what.data(), what.size()), ": ", std::strerror(errno)));
}

absl::StatusOr<uint8_t*> MapFd(int fd, uint64_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    return Errno(absl::StrCat("mmap of the object store arena (", size, " bytes)"));
  return static_cast<uint8_t*>(p);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SharedMemoryArena>> SharedMemoryArena::Create(
    uint64_t size, ArenaCreateOptions options) {
  if (size == 0) return absl::InvalidArgumentError("object store arena size must be positive");
  const int fd = memfd_create("tessera-object-store", MFD_CLOEXEC);
  if (fd < 0) return Errno("memfd_create for the object store arena");
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    absl::Status s = Errno(absl::StrCat("sizing the object store arena to ", size, " bytes"));
    close(fd);
    return s;
  }
  if (options.allocate_pages) {
    const int rc = fallocate(fd, 0, 0, static_cast<off_t>(size));
    if (rc != 0) {
      absl::Status s = absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", size,
                       " bytes of shared memory for the object store: ", std::strerror(errno)));
      close(fd);
      return s;
    }
  }
  absl::StatusOr<uint8_t*> base = MapFd(fd, size);
  if (!base.ok()) {
    close(fd);
    return base.status();
  }
  return std::unique_ptr<SharedMemoryArena>(new SharedMemoryArena(fd, *base, size));
}

absl::StatusOr<std::unique_ptr<SharedMemoryArena>> SharedMemoryArena::Map(int fd, uint64_t size) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    absl::Status s = Errno("fstat of the received object store arena");
    close(fd);
    return s;
  }
  if (static_cast<uint64_t>(st.st_size) < size) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("received object store arena has ", st.st_size,
                                                   " bytes, the store announced ", size));
  }
  absl::StatusOr<uint8_t*> base = MapFd(fd, size);
  if (!base.ok()) {
    close(fd);
    return base.status();
  }
  return std::unique_ptr<SharedMemoryArena>(new SharedMemoryArena(fd, *base, size));
}

SharedMemoryArena::~SharedMemoryArena() {
  munmap(base_, size_);
  close(fd_);
}

void SharedMemoryArena::PopulateForWrite(uint64_t offset, uint64_t size) const {
  if (size == 0 || offset >= size_) return;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  const uint64_t end = std::min(size_, offset + size);
  (void)madvise(base_ + start, end - start, MADV_POPULATE_WRITE);
}

void SharedMemoryArena::PopulateForRead(uint64_t offset, uint64_t size) const {
  if (size == 0 || offset >= size_) return;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  const uint64_t end = std::min(size_, offset + size);
  (void)madvise(base_ + start, end - start, MADV_POPULATE_READ);
}

}  // namespace tessera
