#include "cli/kept_logs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "process/unique_fd.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;

constexpr char kLatest[] = "latest";
constexpr size_t kStampLength = 20;  // 2026-12-03T14-05-09Z
constexpr int kMaxSuffix = 1000;

// What lstat says `path` is, without following a link at it.
enum class Kind { kMissing, kFile, kFolder, kOther };

Kind KindOf(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return Kind::kMissing;
  if (S_ISREG(st.st_mode)) return Kind::kFile;
  if (S_ISDIR(st.st_mode)) return Kind::kFolder;
  return Kind::kOther;
}

// The names in a real folder, sorted; none when it is missing, a link or unreadable.
std::vector<std::string> NamesIn(const std::string& folder) {
  std::vector<std::string> names;
  if (KindOf(folder) != Kind::kFolder) return names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::Status Errno(std::string_view what, const std::string& path) {
  return absl::ErrnoToStatus(errno, absl::StrCat(ToAbsl(what), " ", path));
}

// A folder with mode 0700 whatever the umask; an existing real folder is kept (and narrowed).
absl::Status MakePrivateFolder(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return Errno("cannot create", path);
  if (KindOf(path) != Kind::kFolder) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a folder"));
  }
  if (::chmod(path.c_str(), 0700) != 0) return Errno("cannot set the mode of", path);
  return absl::OkStatus();
}

// A new folder under `logs` named for `now`, "-2", "-3"... appended when the name is taken.
absl::StatusOr<std::string> MakeKeptFolder(const std::string& logs, absl::Time now) {
  const std::string stamp = KeptLogsFolderName(now);
  for (int n = 1; n <= kMaxSuffix; ++n) {
    const std::string name = n == 1 ? stamp : absl::StrCat(stamp, "-", n);
    const std::string path = absl::StrCat(logs, "/", name);
    if (::mkdir(path.c_str(), 0700) == 0) {
      if (::chmod(path.c_str(), 0700) != 0) return Errno("cannot set the mode of", path);
      return name;
    }
    if (errno != EEXIST) return Errno("cannot create", path);
  }
  return absl::ResourceExhaustedError(
      absl::StrCat(logs, " already holds ", kMaxSuffix, " kept folders named ", stamp));
}

// One log to move: its path and its place under the kept folder.
struct Move {
  std::string from;
  std::string to;  // relative, e.g. "nodes/n1/workers/w-1.out"
};

std::vector<Move> LogsToKeep(const client::StateFolder& state) {
  std::vector<Move> moves;
  for (const std::string& name : NamesIn(state.LogsDir())) {
    const std::string path = absl::StrCat(state.LogsDir(), "/", name);
    if (KindOf(path) == Kind::kFile) moves.push_back({path, name});
  }
  for (const std::string& id : NamesIn(state.NodesDir())) {
    const std::string node = state.NodeDir(id);
    if (KindOf(node) != Kind::kFolder) continue;
    const std::string place = absl::StrCat("nodes/", id);
    if (KindOf(state.AgentLogFile(id)) == Kind::kFile) {
      moves.push_back({state.AgentLogFile(id), absl::StrCat(place, "/agent.log")});
    }
    const std::string workers = node + "/workers";
    for (const std::string& name : NamesIn(workers)) {
      const std::string path = absl::StrCat(workers, "/", name);
      if (KindOf(path) == Kind::kFile) {
        moves.push_back({path, absl::StrCat(place, "/workers/", name)});
      }
    }
  }
  return moves;
}

absl::Status MoveInto(const std::string& kept, const Move& move) {
  // Each folder on the way, made 0700 (the relative path has at most three parts).
  std::string folder = kept;
  const fs::path parent = fs::path(move.to).parent_path();
  for (const fs::path& part : parent) {
    folder = absl::StrCat(folder, "/", part.string());
    if (absl::Status made = MakePrivateFolder(folder); !made.ok()) return made;
  }
  const std::string to = absl::StrCat(kept, "/", move.to);
  if (::rename(move.from.c_str(), to.c_str()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot keep ", move.from, " in ", to));
  }
  // Narrowed through the file itself, never through a link that could stand at its name.
  UniqueFd fd(::open(to.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid() || ::fchmod(fd.get(), 0600) != 0) return Errno("cannot set the mode of", to);
  return absl::OkStatus();
}

// Points logs/latest at `name`: a new link renamed over the old one, so it always names a folder.
void PointLatestAt(const std::string& logs, const std::string& name, KeptLogs& kept) {
  const std::string latest = absl::StrCat(logs, "/", kLatest);
  if (KindOf(latest) == Kind::kFolder) {
    kept.warnings.push_back(absl::StrCat(latest, " is a folder; not replaced by a link to ", name));
    return;
  }
  const std::string temporary = absl::StrCat(logs, "/.", kLatest, ".", ::getpid());
  ::unlink(temporary.c_str());
  if (::symlink(name.c_str(), temporary.c_str()) != 0 ||
      ::rename(temporary.c_str(), latest.c_str()) != 0) {
    kept.warnings.push_back(
        absl::StrCat("cannot point ", latest, " at ", name, ": ", std::strerror(errno)));
    ::unlink(temporary.c_str());
  }
}

// Oldest first: by time, then by the suffix ("-2" after none, "-10" after "-9").
std::pair<std::string, int> AgeKey(const std::string& name) {
  int suffix = 1;
  if (name.size() > kStampLength) {
    (void)absl::SimpleAtoi(name.substr(kStampLength + 1), &suffix);
  }
  return {name.substr(0, kStampLength), suffix};
}

void Prune(const std::string& logs, const std::string& newest, size_t keep, KeptLogs& kept) {
  std::vector<std::string> folders;
  for (const std::string& name : NamesIn(logs)) {
    if (name != newest && IsKeptLogsFolderName(name) &&
        KindOf(absl::StrCat(logs, "/", name)) == Kind::kFolder) {
      folders.push_back(name);
    }
  }
  // The folder just made is always kept, even when a clock set back makes it look older.
  const size_t others = std::max<size_t>(keep, 1) - 1;
  if (folders.size() <= others) return;
  std::sort(folders.begin(), folders.end(),
            [](const std::string& a, const std::string& b) { return AgeKey(a) < AgeKey(b); });
  folders.resize(folders.size() - others);
  for (const std::string& name : folders) {
    std::error_code ec;
    fs::remove_all(absl::StrCat(logs, "/", name), ec);  // removes links, never their targets
    if (ec) {
      kept.warnings.push_back(absl::StrCat("cannot remove ", logs, "/", name, ": ", ec.message()));
    } else {
      kept.pruned.push_back(name);
    }
  }
}

}  // namespace

std::string KeptLogsFolderName(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H-%M-%SZ", t, absl::UTCTimeZone());
}

bool IsKeptLogsFolderName(std::string_view name) {
  if (name.size() < kStampLength) return false;
  static constexpr std::string_view kShape = "dddd-dd-ddTdd-dd-ddZ";
  for (size_t i = 0; i < kStampLength; ++i) {
    const bool digit = absl::ascii_isdigit(static_cast<unsigned char>(name[i]));
    if (kShape[i] == 'd' ? !digit : name[i] != kShape[i]) return false;
  }
  if (name.size() == kStampLength) return true;
  const std::string_view suffix = name.substr(kStampLength);
  if (suffix.size() < 2 || suffix[0] != '-') return false;
  return std::all_of(suffix.begin() + 1, suffix.end(),
                     [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); });
}

absl::StatusOr<KeptLogs> KeepClusterLogs(const client::StateFolder& state,
                                         const KeepLogsOptions& options) {
  KeptLogs kept;
  const std::vector<Move> moves = LogsToKeep(state);
  if (moves.empty()) return kept;
  const std::string logs = state.LogsDir();
  if (const Kind kind = KindOf(logs); kind != Kind::kMissing && kind != Kind::kFolder) {
    // Not what a cluster makes (e.g. a link): removed, never followed.
    if (::unlink(logs.c_str()) != 0) return Errno("cannot replace", logs);
  }
  if (absl::Status made = MakePrivateFolder(logs); !made.ok()) return made;
  absl::StatusOr<std::string> name = MakeKeptFolder(logs, options.now);
  if (!name.ok()) return name.status();
  kept.folder = absl::StrCat(logs, "/", *name);
  for (const Move& move : moves) {
    if (absl::Status moved = MoveInto(kept.folder, move); !moved.ok()) return moved;
    ++kept.files;
  }
  PointLatestAt(logs, *name, kept);
  Prune(logs, *name, options.keep, kept);
  return kept;
}

}  // namespace tessera::cli
