// tessera-launcher [--log-dir DIR]: a prestarted process that becomes one worker. The node agent
// starts it ahead of time (LauncherPool), with its channel (a stream socket) on fd 3,
// stdin/stdout/stderr on /dev/null, its own session and default signal handling. It waits for
// ONE launch spec
// (launch_wire.h), then does what ChildProcess's forked child does: stdin from its path (else
// /dev/null), stdout
// and stderr appended to their log files (created 0600 with their parent folders 0700), the spec's
// directory, every other descriptor closed, argv[0] looked up in the spec's PATH, execve with
// exactly the spec's environment. A failure before exec is reported on the channel (stage,
// errno, detail) and the launcher exits 127; a successful exec closes the channel
// (close-on-exec), which the agent reads as EOF. When the channel closes before a whole spec
// arrived (the agent died or dropped this launcher), it exits 0 at once.
//
// With --log-dir, while it waits it also creates two unnamed files (O_TMPFILE) in DIR: creating
// an inode costs ~0.3 ms on some file systems (ext4 on this project's VMs), twice per worker, so
// a log file that is new and directly in DIR is that inode linked in under its name (a few µs)
// instead. A log that exists already is appended to, as always; one elsewhere is created.
//
// It dies with its agent: PR_SET_PDEATHSIG (SIGKILL), set first thing and kept through exec, so
// the worker it becomes never outlives the agent that started it (an orphan would keep its
// devices and its lease's resources, with no agent to account for them).
//
// Single-threaded, libc only (no C++ runtime: it links as C), so it starts fast and small.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "process/launch_wire.h"

namespace {

namespace wire = tessera::launch_wire;

constexpr int kChannel = wire::kLauncherChannelFd;
constexpr char kDefaultPath[] = "/usr/local/bin:/usr/bin:/bin";

// Log files made ahead of time (--log-dir): unnamed, linked in by name at launch.
struct SpareLogs {
  bool ready = false;
  dev_t dir_dev = 0;
  ino_t dir_ino = 0;
  int fds[2] = {-1, -1};
  int used = 0;
};
SpareLogs spares;

void PrepareSpareLogs(const char* dir) {
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return;
  for (int& fd : spares.fds) {
    fd = open(dir, O_TMPFILE | O_WRONLY | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return;  // not supported here: logs are created at launch
    // A worker's output is its owner's alone, whatever the umask.
    fchmod(fd, 0600);
  }
  spares.dir_dev = st.st_dev;
  spares.dir_ino = st.st_ino;
  spares.ready = true;
}

// A spare file linked in as `path` when `path` is directly in the spare folder and does not
// exist yet; -1 otherwise (the caller opens or creates it the usual way).
int LinkSpare(const char* path) {
  if (!spares.ready || spares.used == 2) return -1;
  const char* slash = strrchr(path, '/');
  if (slash == nullptr || slash[1] == '\0') return -1;
  char* dir = slash == path ? strdup("/") : strndup(path, static_cast<size_t>(slash - path));
  if (dir == nullptr) return -1;
  struct stat st;
  const bool same =
      stat(dir, &st) == 0 && st.st_dev == spares.dir_dev && st.st_ino == spares.dir_ino;
  free(dir);
  if (!same) return -1;
  const int fd = spares.fds[spares.used];
  char proc[64];
  snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
  if (linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) != 0) return -1;
  ++spares.used;
  return fd;
}

void CloseFrom(int low) {
  if (syscall(SYS_close_range, static_cast<unsigned>(low), ~0u, 0u) == 0) return;
  // Kernels before 5.9: close what /proc lists would need allocation-free directory reading;
  // a bounded loop over the descriptor limit is simpler and only runs there.
  long max_fd = sysconf(_SC_OPEN_MAX);
  if (max_fd < 0 || max_fd > (1 << 20)) max_fd = 1 << 20;
  for (int fd = low; fd < max_fd; ++fd) close(fd);
}

// True once `size` bytes are read; false on EOF or an error (the agent is gone).
bool ReadFully(void* buffer, size_t size) {
  auto* at = static_cast<char*>(buffer);
  while (size > 0) {
    ssize_t n = read(kChannel, at, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

[[noreturn]] void Fail(uint32_t stage, int err, const char* detail, size_t detail_size) {
  static unsigned char report[wire::kReportHeaderBytes + wire::kMaxDetailBytes];
  size_t size = wire::WriteReport(report, stage, static_cast<uint32_t>(err), detail, detail_size);
  const unsigned char* at = report;
  while (size > 0) {
    ssize_t n = send(kChannel, at, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    at += n;
    size -= static_cast<size_t>(n);
  }
  _exit(127);
}

[[noreturn]] void Fail(uint32_t stage, int err, const char* detail = "") {
  Fail(stage, err, detail, strlen(detail));
}

// a + "/" + b (+ "/" + c), malloc'd; exits on allocation failure (reported as ENOMEM).
char* Join(const char* a, const char* b, const char* c = nullptr) {
  size_t size = strlen(a) + 1 + strlen(b) + (c != nullptr ? 1 + strlen(c) : 0) + 1;
  char* out = static_cast<char*>(malloc(size));
  if (out == nullptr) Fail(wire::kStageResolve, ENOMEM);
  strcpy(out, a);
  strcat(out, "/");
  strcat(out, b);
  if (c != nullptr) {
    strcat(out, "/");
    strcat(out, c);
  }
  return out;
}

bool IsExecutableFile(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

const char* FindPath(char* const* envp) {
  for (; *envp != nullptr; ++envp) {
    if (strncmp(*envp, "PATH=", 5) == 0) return *envp + 5;
  }
  return kDefaultPath;
}

// The program to exec, exactly as ChildProcess resolves it: argv[0] when it holds a '/' (from
// `cwd` when relative), else the first executable match in the spec's PATH, where an empty
// entry is the current directory and relative entries are taken from `cwd`.
char* Resolve(const wire::SpecView& spec) {
  const char* name = spec.argv[0];
  const char* cwd = spec.cwd;
  if (strchr(name, '/') != nullptr) {
    if (name[0] != '/' && cwd[0] != '\0') return Join(cwd, name);
    return strdup(name);
  }
  const char* path = FindPath(spec.envp);
  const char* entry = path;
  while (true) {
    const char* end = strchrnul(entry, ':');
    size_t length = static_cast<size_t>(end - entry);
    char* dir = length == 0 ? strdup(".") : strndup(entry, length);
    if (dir == nullptr) Fail(wire::kStageResolve, ENOMEM);
    char* candidate = dir[0] != '/' && cwd[0] != '\0' ? Join(cwd, dir, name) : Join(dir, name);
    free(dir);
    if (IsExecutableFile(candidate)) return candidate;
    free(candidate);
    if (*end == '\0') break;
    entry = end + 1;
  }
  Fail(wire::kStageResolve, ENOENT, path);
}

// mkdir -p of the folder holding `path`; 0 or the errno of the first failure.
int CreateParentFolders(const char* path) {
  const char* slash = strrchr(path, '/');
  if (slash == nullptr || slash == path) return 0;
  char* dir = strndup(path, static_cast<size_t>(slash - path));
  if (dir == nullptr) return ENOMEM;
  int result = 0;
  for (char* at = dir + 1;; ++at) {
    if (*at != '/' && *at != '\0') continue;
    const char saved = *at;
    *at = '\0';
    if (mkdir(dir, 0700) == 0) {
      // Private whatever the umask (which may also have narrowed it below 0700).
      if (chmod(dir, 0700) != 0) {
        result = errno;
        break;
      }
    } else if (errno != EEXIST) {
      result = errno;
      break;
    }
    *at = saved;
    if (saved == '\0') break;
  }
  free(dir);
  return result;
}

// A log file opened for appending (created 0600 with its folders 0700), or /dev/null for "".
int OpenOutput(const char* path, uint32_t folder_stage, uint32_t open_stage) {
  if (path[0] == '\0') {
    int fd = open("/dev/null", O_WRONLY);
    if (fd < 0) Fail(wire::kStageStdin, errno);
    return fd;
  }
  if (int spare = LinkSpare(path); spare >= 0) return spare;
  if (int err = CreateParentFolders(path); err != 0) Fail(folder_stage, err);
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, 0600);
  // A worker's output is its owner's alone, whatever the umask.
  if (fd >= 0 && fchmod(fd, 0600) != 0) Fail(open_stage, errno);
  if (fd < 0) Fail(open_stage, errno);
  return fd;
}

// Every signal to its default disposition. posix_spawn already did that for the signals libc
// lets a program touch, but leaves libc's own two (32 and 33, which glibc's sigaction refuses)
// ignored, and an ignored signal stays ignored through exec; so the kernel call, for all.
void DefaultSignals() {
  // Zeroed: SIG_DFL, no flags, an empty mask, whatever the architecture's layout.
  static const unsigned long kDefaultAction[8] = {};
  for (long sig = 1; sig < 65; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    syscall(SYS_rt_sigaction, sig, kDefaultAction, nullptr, 8);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The parent-death signal fires for a parent that dies from now on; one already gone shows as
  // a changed parent.
  const pid_t parent = getppid();
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) return 0;
  DefaultSignals();
  // Nothing the agent leaked (a descriptor without close-on-exec) stays in an idle launcher.
  CloseFrom(kChannel + 1);
  if (fcntl(kChannel, F_SETFD, FD_CLOEXEC) != 0) return 0;  // no channel: nobody to serve
  if (argc == 3 && strcmp(argv[1], "--log-dir") == 0) PrepareSpareLogs(argv[2]);

  unsigned char header[wire::kSpecHeaderBytes];
  if (!ReadFully(header, sizeof(header))) return 0;
  char error[256];
  uint32_t body_size = 0;
  if (!wire::ParseSpecHeader(header, &body_size, error, sizeof(error))) {
    Fail(wire::kStageSpec, EINVAL, error);
  }
  char* body = static_cast<char*>(malloc(body_size + 1));
  if (body == nullptr) Fail(wire::kStageSpec, ENOMEM, "no memory for the launch spec");
  if (!ReadFully(body, body_size)) return 0;
  wire::SpecView spec;
  if (!wire::ParseSpecBody(body, body_size, &spec, error, sizeof(error))) {
    Fail(wire::kStageSpec, EINVAL, error);
  }

  // The same order as ChildProcess: program, log files, directory, descriptors, exec.
  char* program = Resolve(spec);
  int stdin_fd = open(spec.stdin_path[0] != '\0' ? spec.stdin_path : "/dev/null", O_RDONLY);
  if (stdin_fd < 0) Fail(wire::kStageStdin, errno);
  int stdout_fd = OpenOutput(spec.stdout_path, wire::kStageStdoutFolder, wire::kStageStdoutOpen);
  int stderr_fd = OpenOutput(spec.stderr_path, wire::kStageStderrFolder, wire::kStageStderrOpen);
  if (spec.cwd[0] != '\0' && chdir(spec.cwd) != 0) Fail(wire::kStageChdir, errno);
  // 0-2 are /dev/null and 3 the channel, so every source here is above 3.
  if (dup2(stdin_fd, 0) < 0 || dup2(stdout_fd, 1) < 0 || dup2(stderr_fd, 2) < 0) {
    Fail(wire::kStageStdio, errno);
  }
  // Everything but 0-2 and the channel (close-on-exec) goes.
  CloseFrom(kChannel + 1);
  execve(program, spec.argv, spec.envp);
  Fail(wire::kStageExec, errno, program);
}
