#include "process/cgroup.h"

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/ignore_status.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "process/file_util.h"

namespace tessera {
namespace {

// /proc/self/mounts escapes space, tab, newline and backslash as \ooo.
std::string UnescapeMountField(absl::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      int value = 0;
      bool octal = true;
      for (size_t j = 1; j <= 3; ++j) {
        char c = field[i + j];
        if (c < '0' || c > '7') octal = false;
        value = value * 8 + (c - '0');
      }
      if (octal) {
        out.push_back(static_cast<char>(value));
        i += 3;
        continue;
      }
    }
    out.push_back(field[i]);
  }
  return out;
}

bool HasWord(absl::string_view text, absl::string_view word) {
  for (absl::string_view w : absl::StrSplit(text, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    if (w == word) return true;
  }
  return false;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

absl::StatusOr<std::string> ParseCgroupV2Path(std::string_view proc_cgroup) {
  for (absl::string_view line : absl::StrSplit(ToAbsl(proc_cgroup), '\n')) {
    if (absl::ConsumePrefix(&line, "0::")) return std::string(line);
  }
  return absl::NotFoundError("the process is in no cgroup v2 hierarchy (no \"0::\" line)");
}

absl::StatusOr<std::string> ParseCgroup2MountPoint(std::string_view mounts) {
  for (absl::string_view line : absl::StrSplit(ToAbsl(mounts), '\n')) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() >= 3 && fields[2] == "cgroup2") return UnescapeMountField(fields[1]);
  }
  return absl::NotFoundError("cgroup2 is not mounted");
}

absl::StatusOr<CgroupParent> FindWorkerCgroupParent(const CgroupDetectOptions& options) {
  std::string dir = options.parent_dir;
  if (dir.empty()) {
    TESSERA_ASSIGN_OR_RETURN(std::string mounts, ReadWholeFile(options.proc_root + "/self/mounts"));
    absl::StatusOr<std::string> mount = ParseCgroup2MountPoint(mounts);
    if (!mount.ok()) return absl::FailedPreconditionError("cgroup v2 is not mounted");
    TESSERA_ASSIGN_OR_RETURN(std::string own, ReadWholeFile(options.proc_root + "/self/cgroup"));
    absl::StatusOr<std::string> path = ParseCgroupV2Path(own);
    if (!path.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cgroup v2 is mounted at ", *mount, " but this process is in no cgroup v2 hierarchy"));
    }
    dir = *mount + (*path == "/" ? "" : *path);
  }
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (!IsDirectory(dir)) {
    return absl::FailedPreconditionError(absl::StrCat("cgroup directory ", dir, " does not exist"));
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cgroup directory ", dir, " is not writable by this process"));
  }
  absl::StatusOr<std::string> controllers = ReadWholeFile(dir + "/cgroup.controllers");
  if (!controllers.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " is not a cgroup v2 directory: ", controllers.status().message()));
  }
  CgroupParent parent{dir, false, ""};
  if (!HasWord(*controllers, "memory")) {
    parent.no_memory_reason =
        absl::StrCat("the memory controller is not available in cgroup ", dir,
                     " (cgroup.controllers: \"", absl::StripAsciiWhitespace(*controllers),
                     "\"; on a hybrid host memory is on the cgroup v1 hierarchy)");
    return parent;
  }
  // Unreadable counts as "not enabled yet": the write below then says what is wrong.
  std::string subtree = ReadWholeFile(dir + "/cgroup.subtree_control").value_or("");
  if (!HasWord(subtree, "memory")) {
    absl::Status enabled = WriteControlFile(dir + "/cgroup.subtree_control", "+memory");
    if (!enabled.ok()) {
      parent.no_memory_reason = absl::StrCat(
          "cannot enable the memory controller for the children of cgroup ", dir, " (",
          enabled.message(),
          "); a cgroup that holds processes cannot give controllers to children: run the agent "
          "in a delegated cgroup and name an empty one as the parent");
      return parent;
    }
  }
  parent.memory = true;
  return parent;
}

absl::StatusOr<std::string> WorkerCgroupName(std::string_view id) {
  if (id.empty() || id == "." || id == ".." || id.find('/') != std::string_view::npos ||
      id.find('\0') != std::string_view::npos || id.size() > 200) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker id ", Quote(id), " cannot name a cgroup (empty, '/', '.' or too long)"));
  }
  return absl::StrCat("tessera-worker-", ToAbsl(id));
}

absl::StatusOr<std::unique_ptr<WorkerCgroup>> WorkerCgroup::Create(
    const CgroupParent& parent, std::string_view name, std::optional<int64_t> memory_max_bytes) {
  if (memory_max_bytes.has_value() && !parent.memory) {
    return absl::FailedPreconditionError(
        absl::StrCat("a memory limit cannot be enforced: ", parent.no_memory_reason));
  }
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("cgroup name ", Quote(name), " is not one path component"));
  }
  if (memory_max_bytes.has_value() && *memory_max_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory limit must be positive, got ", *memory_max_bytes));
  }
  std::string dir = absl::StrCat(parent.dir, "/", ToAbsl(name));
  if (::mkdir(dir.c_str(), 0755) != 0) {
    if (errno != EEXIST) return ErrnoStatus(errno, absl::StrCat("cannot create cgroup ", dir));
    // Left by an agent that died: empty it and start afresh so no old limit or counter remains.
    WorkerCgroup stale(dir, false);
    TESSERA_RETURN_IF_ERROR(stale.Remove(absl::Seconds(2)));
    if (::mkdir(dir.c_str(), 0755) != 0)
      return ErrnoStatus(errno, absl::StrCat("cannot create cgroup ", dir));
  }
  std::unique_ptr<WorkerCgroup> cgroup(new WorkerCgroup(dir, parent.memory));
  if (memory_max_bytes.has_value()) {
    TESSERA_RETURN_IF_ERROR(WriteControlFile(dir + "/memory.max", absl::StrCat(*memory_max_bytes)));
    // Without swap accounting limits, a limited worker would swap instead of being OOM-killed.
    IgnoreStatus(WriteControlFile(dir + "/memory.swap.max", "0"),
                 "no such file without swap accounting: then there is no swap to limit");
  }
  return cgroup;
}

WorkerCgroup::~WorkerCgroup() {
  if (!removed_) {
    IgnoreStatus(Remove(absl::Seconds(1)),
                 "a last try: a cgroup of this name left behind is emptied when made again");
  }
}

absl::StatusOr<int64_t> WorkerCgroup::OomKills() const {
  if (!memory_)
    return absl::FailedPreconditionError(
        absl::StrCat("cgroup ", dir_, " has no memory controller"));
  TESSERA_ASSIGN_OR_RETURN(std::string events, ReadWholeFile(dir_ + "/memory.events"));
  return FindKeyedCounter(events, "oom_kill");
}

absl::StatusOr<bool> WorkerCgroup::Populated() const {
  TESSERA_ASSIGN_OR_RETURN(std::string events, ReadWholeFile(dir_ + "/cgroup.events"));
  TESSERA_ASSIGN_OR_RETURN(int64_t populated, FindKeyedCounter(events, "populated"));
  return populated != 0;
}

absl::Status WorkerCgroup::KillAll() const {
  std::string kill_file = dir_ + "/cgroup.kill";
  if (::access(kill_file.c_str(), F_OK) != 0) {
    return absl::UnimplementedError("cgroup.kill is not supported by this kernel (Linux 5.14+)");
  }
  return WriteControlFile(kill_file, "1");
}

absl::Status WorkerCgroup::Remove(absl::Duration wait) {
  if (removed_) return absl::OkStatus();
  absl::Status killed = KillAll();
  if (!killed.ok() && !absl::IsUnimplemented(killed) && !absl::IsNotFound(killed)) return killed;
  if (absl::IsUnimplemented(killed)) {
    // Older kernels: signal each process listed.
    if (absl::StatusOr<std::string> procs = ReadWholeFile(procs_path()); procs.ok()) {
      for (absl::string_view line : absl::StrSplit(*procs, '\n', absl::SkipEmpty())) {
        int pid = 0;
        if (absl::SimpleAtoi(line, &pid) && pid > 0) ::kill(pid, SIGKILL);
      }
    }
  }
  absl::Time deadline = absl::Now() + wait;
  absl::Duration pause = absl::Microseconds(200);
  while (true) {
    if (::rmdir(dir_.c_str()) == 0 || errno == ENOENT) {
      removed_ = true;
      return absl::OkStatus();
    }
    if (errno != EBUSY || absl::Now() >= deadline) {
      return ErrnoStatus(errno, absl::StrCat("cannot remove cgroup ", dir_));
    }
    // Killed processes take a moment to leave; the wait is short and bounded.
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(pause));
    pause = std::min(pause * 2, absl::Milliseconds(20));
  }
}

}  // namespace tessera
