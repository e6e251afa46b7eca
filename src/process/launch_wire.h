// The wire format between the node agent and tessera-launcher (a prestarted process that turns
// into one worker): the launch spec the agent sends, and the failure report the launcher sends
// back when it cannot reach exec. A successful exec sends nothing: the launcher's end of the
// channel is close-on-exec, so the agent reads EOF.
//
// Launch spec, version 2. Every integer is a little-endian u32; a string is its length (u32),
// its bytes (no NUL among them), then one NUL byte (so the launcher points into the buffer):
//
//   header: magic "TSLS", version (1), body size (bytes after the header, at most kMaxSpecBytes)
//   body:   argc, argc strings (argv; argc >= 1, argv[0] not empty)
//           envc, envc strings ("KEY=VALUE", KEY not empty: the complete environment)
//           cwd ("": the launcher's own), stdout path, stderr path, stdin path ("": /dev/null)
//   nothing after the last string.
//
// Failure report: magic "TSLR", stage (u32, a LaunchStage), errno (u32), detail size (u32,
// at most kMaxDetailBytes), detail bytes (what was tried: the program, the PATH searched, or why
// the spec was refused).
//
// Libc only, no allocation but the argv/envp arrays of a parsed spec: this file is compiled
// into tessera-launcher, which links nothing but libc. Thread-safe: stateless functions.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace tessera::launch_wire {

inline constexpr uint32_t kSpecMagic = 0x534c5354;    // "TSLS" in little-endian byte order
inline constexpr uint32_t kReportMagic = 0x524c5354;  // "TSLR"
inline constexpr uint32_t kSpecVersion = 2;
inline constexpr size_t kSpecHeaderBytes = 12;
inline constexpr size_t kReportHeaderBytes = 16;
// Far above what execve accepts (argv + env are limited to a quarter of the stack limit).
inline constexpr uint32_t kMaxSpecBytes = 16u << 20;
inline constexpr uint32_t kMaxDetailBytes = 64u << 10;
// The launcher's end of its channel (a stream socket) is this descriptor.
inline constexpr int kLauncherChannelFd = 3;

// Where a launch stopped before exec. The direct spawn path (fork in the agent) reports the same
// stages, so both paths give the same errors.
enum LaunchStage : uint32_t {
  kStageSpec = 1,          // the spec was malformed (detail: why)
  kStageResolve = 2,       // argv[0] is not an executable in PATH (detail: the PATH searched)
  kStageStdoutFolder = 3,  // creating the stdout log's parent folder
  kStageStdoutOpen = 4,
  kStageStderrFolder = 5,
  kStageStderrOpen = 6,
  kStageStdin = 7,   // opening the stdin path (/dev/null by default)
  kStageCgroup = 8,  // moving into the worker's cgroup
  kStageChdir = 9,
  kStageStdio = 10,  // dup2 onto 0, 1, 2
  kStageExec = 11,   // execve (detail: the program)
};

// A parsed spec: pointers into the buffer given to ParseSpecBody, which must outlive it.
struct SpecView {
  uint32_t argc = 0;
  char** argv = nullptr;  // argc entries, then nullptr (malloc'd; FreeSpecView)
  uint32_t envc = 0;
  char** envp = nullptr;  // envc entries, then nullptr (malloc'd; FreeSpecView)
  const char* cwd = nullptr;
  const char* stdout_path = nullptr;
  const char* stderr_path = nullptr;
  const char* stdin_path = nullptr;
};

struct Report {
  uint32_t stage = 0;
  uint32_t err = 0;
  const char* detail = nullptr;  // points into the parsed buffer; not NUL-terminated
  uint32_t detail_size = 0;
};

// Little-endian u32 access, independent of the host's byte order.
inline uint32_t LoadU32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}
inline void StoreU32(unsigned char* p, uint32_t v) {
  p[0] = static_cast<unsigned char>(v);
  p[1] = static_cast<unsigned char>(v >> 8);
  p[2] = static_cast<unsigned char>(v >> 16);
  p[3] = static_cast<unsigned char>(v >> 24);
}

// The spec's header: sets the body size. False with a one-line reason in `error` (always
// NUL-terminated) for a wrong magic, an unknown version or a body over kMaxSpecBytes.
bool ParseSpecHeader(const unsigned char* header, uint32_t* body_size, char* error,
                     size_t error_size);

// The spec's body, `size` bytes, parsed in place. False with a one-line reason (and nothing to
// free) for anything malformed: truncated, a count larger than the bytes left, a string without
// its NUL or with a NUL inside, no program, an environment entry without "KEY=", bytes left over.
bool ParseSpecBody(char* body, size_t size, SpecView* spec, char* error, size_t error_size);

// Header and body together (tests and the fuzzer).
bool ParseSpec(char* data, size_t size, SpecView* spec, char* error, size_t error_size);

// Frees what a successful parse allocated; the view is left empty. Safe on an empty view.
void FreeSpecView(SpecView* spec);

// Writes a report into `out` (capacity kReportHeaderBytes + kMaxDetailBytes at least; longer
// details are cut); returns its size.
size_t WriteReport(unsigned char* out, uint32_t stage, uint32_t err, const char* detail,
                   size_t detail_size);

// A whole report, exactly `size` bytes. False with a one-line reason when malformed.
bool ParseReport(const unsigned char* data, size_t size, Report* report, char* error,
                 size_t error_size);

}  // namespace tessera::launch_wire
