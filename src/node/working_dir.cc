#include "node/working_dir.h"

#include <fcntl.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/file_read.h"
#include "base/status_macros.h"
#include "resources/byte_size.h"
#include "tessera/v1/jobs.pb.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

constexpr char kCompleteMarker[] = ".tessera-complete";
constexpr char kContentIdPrefix[] = "env-";

absl::Status Refuse(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("working dir archive: ", why));
}

absl::Status CheckRelativePath(const std::string& path) {
  if (path.empty()) return Refuse("an entry has no path");
  if (path.size() > kWorkingDirMaxPathBytes) {
    return Refuse(absl::StrCat("entry \"", path.substr(0, 200), "...\" has a path of ", path.size(),
                               " bytes, more than the limit of ", kWorkingDirMaxPathBytes));
  }
  if (path[0] == '/' || path.find('\0') != std::string::npos) {
    return Refuse(absl::StrCat("entry \"", path.substr(0, 200), "\" is not a relative path"));
  }
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty() || part == "." || part == ".." || part == kCompleteMarker) {
      return Refuse(absl::StrCat("entry \"", path.substr(0, 200),
                                 "\" has a part that is empty, '.', '..' or reserved"));
    }
  }
  return absl::OkStatus();
}

// The one check of an archive (ValidateWorkingDirArchive, and UnpackWorkingDir before it makes
// anything): the parsed archive, or the refusal.
absl::StatusOr<v1::DirectoryArchive> ParseAndCheck(const std::string& archive_bytes) {
  if (archive_bytes.size() > kWorkingDirMaxArchiveBytes) {
    return Refuse(absl::StrCat(SizeForRefusal(archive_bytes.size()), ", more than the limit of ",
                               FormatBytes(kWorkingDirMaxArchiveBytes)));
  }
  v1::DirectoryArchive archive;
  if (!archive.ParseFromString(archive_bytes)) return Refuse("not a DirectoryArchive");
  if (archive.entries_size() > kWorkingDirMaxEntries) {
    return Refuse(absl::StrCat(archive.entries_size(), " entries, more than the limit of ",
                               kWorkingDirMaxEntries));
  }
  uint64_t file_bytes = 0;
  // Every path once; a file is never a folder on another entry's path.
  absl::flat_hash_set<absl::string_view> files;
  absl::flat_hash_set<absl::string_view> paths;
  for (const auto& entry : archive.entries()) {
    if (absl::Status s = CheckRelativePath(entry.path()); !s.ok()) return s;
    if (!paths.insert(entry.path()).second) {
      return Refuse(absl::StrCat("entry \"", entry.path(), "\" appears twice"));
    }
    if (entry.directory()) {
      if (!entry.data().empty()) {
        return Refuse(absl::StrCat("entry \"", entry.path(), "\" is a folder holding data"));
      }
      continue;
    }
    files.insert(entry.path());
    file_bytes += entry.data().size();
    if (file_bytes > kWorkingDirMaxFileBytes) {
      return Refuse(absl::StrCat("its files hold more than the limit of ",
                                 FormatBytes(kWorkingDirMaxFileBytes), " (at entry \"",
                                 entry.path(), "\")"));
    }
  }
  for (const auto& entry : archive.entries()) {
    absl::string_view path = entry.path();
    for (size_t slash = path.find('/'); slash != absl::string_view::npos;
         slash = path.find('/', slash + 1)) {
      if (files.contains(path.substr(0, slash))) {
        return Refuse(absl::StrCat("entry \"", path, "\" lies under the file \"",
                                   path.substr(0, slash), "\""));
      }
    }
  }
  return archive;
}

absl::Status WriteNewFile(const std::string& path, const std::string& data, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("working dir: cannot create ", path, ": ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return absl::ResourceExhaustedError(absl::StrCat("working dir: cannot write ", path));
    }
    done += static_cast<size_t>(n);
  }
  ::fchmod(fd, mode & 0777);
  ::close(fd);
  return absl::OkStatus();
}

// Every file and folder under `dir`, sorted (the agent's completion marker left out).
absl::StatusOr<std::vector<fs::path>> ListFolder(const std::string& dir, absl::string_view label) {
  std::error_code ec;
  std::vector<fs::path> paths;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (paths.size() >= static_cast<size_t>(kWorkingDirMaxEntries)) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": ", dir, " holds more than the limit of ", kWorkingDirMaxEntries,
                       " files and folders; ship large data another way"));
    }
    // A folder an agent unpacked (a worker's working_dir, packed again for the tasks it
    // submits) carries the agent's completion marker, which is not the user's.
    if (it.depth() == 0 && it->path().filename() == kCompleteMarker) continue;
    paths.push_back(it->path());
  }
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("--working-dir: cannot read ", dir, ": ", ec.message()));
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

// A regular file of the listing, and its size then.
struct ListedFile {
  size_t path_index;
  uint64_t size;
};

// The regular files of `paths` with their sizes, from the listing: refused when they hold more
// than `limit_bytes` together, before anything is read.
absl::StatusOr<std::vector<ListedFile>> RegularFiles(const std::vector<fs::path>& paths,
                                                     uint64_t limit_bytes,
                                                     absl::string_view label) {
  uint64_t total = 0;
  std::vector<ListedFile> files;
  for (size_t i = 0; i < paths.size(); ++i) {
    struct stat st {};
    if (::lstat(paths[i].c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    if (size > limit_bytes - std::min(limit_bytes, total)) {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": ", paths[i].string(), " is ", SizeForRefusal(size),
          total > 0 ? absl::StrCat(", after ", SizeForRefusal(total), " of other files")
                    : std::string(),
          "; a working directory holds at most ", FormatBytes(limit_bytes),
          " of files; ship large data another way"));
    }
    total += size;
    files.push_back({i, size});
  }
  return files;
}

// The file at `path`, listed at `listed` bytes; refused when it grew since.
absl::StatusOr<std::string> ReadListedFile(const fs::path& path, uint64_t listed,
                                           absl::string_view label) {
  // Read at most what was listed, plus one byte to see a file that grew since.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--working-dir: cannot read ", path.string(), ": ", std::strerror(errno)));
  }
  std::string data(listed + 1, '\0');
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::read(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (done > listed) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": ", path.string(), " grew while it was packed (from ",
                     SizeForRefusal(listed), "); pack a folder that is not being written"));
  }
  data.resize(done);
  return data;
}

}  // namespace

absl::Status ValidateWorkingDirArchive(const std::string& archive) {
  return ParseAndCheck(archive).status();
}

bool IsWorkingDirJobId(const std::string& id) {
  if (id.empty() || id.size() > 128 || id[0] == '.') return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

absl::StatusOr<PackedDirectory> PackDirectory(const std::string& dir, uint64_t limit_bytes,
                                              absl::string_view label, const std::string& under) {
  limit_bytes = std::min(limit_bytes, kWorkingDirMaxFileBytes);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": ", dir, " is not a folder"));
  }
  if (!under.empty() && (under.find('/') != std::string::npos || under == "." || under == "..")) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": ", under, " is not a plain name"));
  }
  v1::DirectoryArchive archive;
  PackedDirectory packed;
  if (!under.empty()) {
    auto* top = archive.add_entries();
    top->set_path(under);
    top->set_directory(true);
    top->set_mode(0700);
  }
  const std::string prefix = under.empty() ? std::string() : absl::StrCat(under, "/");
  TESSERA_ASSIGN_OR_RETURN(const std::vector<fs::path> paths, ListFolder(dir, label));
  // Sizes first, from the listing: nothing is read when the files do not fit.
  TESSERA_ASSIGN_OR_RETURN(const std::vector<ListedFile> files,
                           RegularFiles(paths, limit_bytes, label));
  auto file = files.begin();
  for (size_t i = 0; i < paths.size(); ++i) {
    const fs::path& path = paths[i];
    // Lexically: fs::relative would follow a link to where it points.
    const std::string relative =
        absl::StrCat(prefix, path.lexically_relative(dir).generic_string());
    const fs::file_status st = fs::symlink_status(path, ec);
    if (ec) continue;
    if (fs::is_directory(st)) {
      auto* entry = archive.add_entries();
      entry->set_path(relative);
      entry->set_directory(true);
      entry->set_mode(static_cast<uint32_t>(st.permissions()) & 0777);
      continue;
    }
    if (file == files.end() || file->path_index != i) {
      packed.skipped.push_back(relative);
      continue;
    }
    const uint64_t listed = (file++)->size;
    TESSERA_ASSIGN_OR_RETURN(std::string data, ReadListedFile(path, listed, label));
    packed.bytes += data.size();
    auto* entry = archive.add_entries();
    entry->set_path(relative);
    entry->set_mode(static_cast<uint32_t>(st.permissions()) & 0777);
    entry->set_data(std::move(data));
  }
  packed.archive = archive.SerializeAsString();
  // What the agents will check, checked here too (the archive's own size, paths).
  if (absl::Status s = ValidateWorkingDirArchive(packed.archive); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": ", dir, ": ", s.message()));
  }
  return packed;
}

absl::StatusOr<PackedDirectory> PackFile(const std::string& path, uint64_t limit_bytes,
                                         absl::string_view label) {
  limit_bytes = std::min(limit_bytes, kWorkingDirMaxFileBytes);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": ", path, " is not a regular file"));
  }
  // Its size is checked before anything is read (a huge file is refused at once).
  TESSERA_ASSIGN_OR_RETURN(std::string data, ReadFileUpTo(path, limit_bytes, label));
  v1::DirectoryArchive archive;
  auto* entry = archive.add_entries();
  entry->set_path(fs::path(path).filename().string());
  entry->set_mode(static_cast<uint32_t>(st.st_mode) & 0777);
  PackedDirectory packed;
  packed.bytes = data.size();
  entry->set_data(std::move(data));
  packed.archive = archive.SerializeAsString();
  if (absl::Status s = ValidateWorkingDirArchive(packed.archive); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": ", path, ": ", s.message()));
  }
  return packed;
}

std::string WorkingDirContentId(const std::string& archive) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  ::SHA256(reinterpret_cast<const unsigned char*>(archive.data()), archive.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = kContentIdPrefix;
  for (unsigned char byte : digest) {
    id.push_back(kHex[byte >> 4]);
    id.push_back(kHex[byte & 0xf]);
  }
  return id;
}

absl::StatusOr<std::string> UnpackWorkingDir(const std::string& root, const std::string& job_id,
                                             const std::string& archive_bytes) {
  if (!IsWorkingDirJobId(job_id)) {
    return absl::InvalidArgumentError("job_id: not a job id (letters, digits, '-', '_', '.')");
  }
  TESSERA_ASSIGN_OR_RETURN(const v1::DirectoryArchive archive, ParseAndCheck(archive_bytes));
  if (absl::StartsWith(job_id, kContentIdPrefix) && job_id != WorkingDirContentId(archive_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("job_id: ", job_id, " is a content id that is not this archive's"));
  }
  std::error_code ec;
  fs::create_directories(root, ec);
  ::chmod(root.c_str(), 0700);
  struct stat root_st {};
  if (::lstat(root.c_str(), &root_st) != 0 || !S_ISDIR(root_st.st_mode) ||
      root_st.st_uid != ::geteuid()) {
    return absl::PermissionDeniedError(
        absl::StrCat("working dir: ", root, " is not a folder this agent owns"));
  }
  const std::string dest = absl::StrCat(root, "/", job_id);
  if (fs::exists(absl::StrCat(dest, "/", kCompleteMarker), ec)) return dest;
  // Written into a folder of this call's own, then renamed into place whole: two calls for the
  // same folder at once (two workers of one environment starting together) never write into
  // each other's, and a folder at `dest` is always complete. ('+' is never in a job id.)
  static std::atomic<uint64_t> attempts{0};
  const std::string staging =
      absl::StrCat(root, "/+unpacking+", job_id, "+", ::getpid(), "+", attempts.fetch_add(1));
  fs::remove_all(staging, ec);
  if (::mkdir(staging.c_str(), 0700) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("working dir: cannot create ", staging, ": ", std::strerror(errno)));
  }
  auto fail = [&](absl::Status status) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    return status;
  };
  // Folders first (sorted, so parents before children), created 0700 and given their mode after
  // the files are in.
  std::vector<std::pair<std::string, mode_t>> folders;
  for (const auto& entry : archive.entries()) {
    if (!entry.directory()) continue;
    const std::string path = absl::StrCat(staging, "/", entry.path());
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("working dir: cannot create ", entry.path(), ": ", std::strerror(errno))));
    }
    folders.emplace_back(path, static_cast<mode_t>(entry.mode() & 0777) | S_IRWXU);
  }
  for (const auto& entry : archive.entries()) {
    if (entry.directory()) continue;
    const std::string path = absl::StrCat(staging, "/", entry.path());
    const fs::path parent = fs::path(path).parent_path();
    struct stat st {};
    if (::lstat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      // Parents of files without a folder entry are made here (never through a link).
      fs::create_directories(parent, ec);
      if (::lstat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        return fail(absl::InvalidArgumentError(
            absl::StrCat("working dir: the folder of ", entry.path(), " cannot be made")));
      }
    }
    if (absl::Status s = WriteNewFile(path, entry.data(), entry.mode() | S_IRUSR); !s.ok()) {
      return fail(s);
    }
  }
  for (auto it = folders.rbegin(); it != folders.rend(); ++it)
    ::chmod(it->first.c_str(), it->second);
  if (absl::Status s = WriteNewFile(absl::StrCat(staging, "/", kCompleteMarker), "", 0400);
      !s.ok()) {
    return fail(s);
  }
  // Another call may put it in place first: its folder is as complete as this one. A folder
  // there without the marker was left by an unfinished attempt of an earlier agent: it goes.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (::rename(staging.c_str(), dest.c_str()) == 0) return dest;
    const int error = errno;
    if (fs::exists(absl::StrCat(dest, "/", kCompleteMarker), ec)) {
      fs::remove_all(staging, ec);  // this call's own folder only
      return dest;
    }
    if (attempt == 1) {
      return fail(absl::PermissionDeniedError(
          absl::StrCat("working dir: cannot put ", dest, " in place: ", std::strerror(error))));
    }
    fs::remove_all(dest, ec);
  }
  return dest;
}

}  // namespace tessera
