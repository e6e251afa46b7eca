#include "node/working_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tessera/v1/jobs.pb.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

constexpr char kCompleteMarker[] = ".tessera-complete";

absl::Status CheckRelativePath(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("working dir archive: an entry has no path");
  if (path.size() > 4096 || path[0] == '/' || path.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("working dir archive: entry \"", path.substr(0, 200), "\" is not a relative path"));
  }
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty() || part == "." || part == ".." || part == kCompleteMarker) {
      return absl::InvalidArgumentError(
          absl::StrCat("working dir archive: entry \"", path, "\" has a part that is empty, '.', "
                       "'..' or reserved"));
    }
  }
  return absl::OkStatus();
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

}  // namespace

bool IsWorkingDirJobId(const std::string& id) {
  if (id.empty() || id.size() > 128 || id[0] == '.') return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_' || c == '.';
  });
}

absl::StatusOr<PackedDirectory> PackDirectory(const std::string& dir, uint64_t limit_bytes) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("--working-dir: ", dir, " is not a folder"));
  }
  v1::DirectoryArchive archive;
  PackedDirectory packed;
  std::vector<fs::path> paths;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    paths.push_back(it->path());
  }
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("--working-dir: cannot read ", dir, ": ", ec.message()));
  }
  std::sort(paths.begin(), paths.end());
  for (const fs::path& path : paths) {
    // Lexically: fs::relative would follow a link to where it points.
    const std::string relative = path.lexically_relative(dir).generic_string();
    const fs::file_status st = fs::symlink_status(path, ec);
    if (ec) continue;
    if (fs::is_directory(st)) {
      auto* entry = archive.add_entries();
      entry->set_path(relative);
      entry->set_directory(true);
      entry->set_mode(static_cast<uint32_t>(st.permissions()) & 0777);
      continue;
    }
    if (!fs::is_regular_file(st)) {
      packed.skipped.push_back(relative);
      continue;
    }
    std::ifstream in(path, std::ios::binary);
    std::ostringstream data;
    data << in.rdbuf();
    if (!in.good() && !in.eof()) {
      return absl::InvalidArgumentError(absl::StrCat("--working-dir: cannot read ", path.string()));
    }
    packed.bytes += data.str().size();
    if (packed.bytes > limit_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--working-dir: ", dir, " holds more than ", limit_bytes / (1024 * 1024),
          " MiB of files; ship large data another way"));
    }
    auto* entry = archive.add_entries();
    entry->set_path(relative);
    entry->set_mode(static_cast<uint32_t>(st.permissions()) & 0777);
    entry->set_data(data.str());
  }
  packed.archive = archive.SerializeAsString();
  return packed;
}

absl::StatusOr<std::string> UnpackWorkingDir(const std::string& root, const std::string& job_id,
                                             const std::string& archive_bytes) {
  if (!IsWorkingDirJobId(job_id)) {
    return absl::InvalidArgumentError("job_id: not a job id (letters, digits, '-', '_', '.')");
  }
  v1::DirectoryArchive archive;
  if (!archive.ParseFromString(archive_bytes)) {
    return absl::InvalidArgumentError("working dir archive: not a DirectoryArchive");
  }
  for (const auto& entry : archive.entries()) {
    if (absl::Status s = CheckRelativePath(entry.path()); !s.ok()) return s;
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
  // An earlier, unfinished attempt is removed; then everything is created fresh.
  fs::remove_all(dest, ec);
  if (::mkdir(dest.c_str(), 0700) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("working dir: cannot create ", dest, ": ", std::strerror(errno)));
  }
  auto fail = [&](absl::Status status) {
    std::error_code ignored;
    fs::remove_all(dest, ignored);
    return status;
  };
  // Folders first (sorted, so parents before children), created 0700 and given their mode after
  // the files are in.
  std::vector<std::pair<std::string, mode_t>> folders;
  for (const auto& entry : archive.entries()) {
    if (!entry.directory()) continue;
    const std::string path = absl::StrCat(dest, "/", entry.path());
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("working dir: cannot create ", entry.path(), ": ", std::strerror(errno))));
    }
    folders.emplace_back(path, static_cast<mode_t>(entry.mode() & 0777) | S_IRWXU);
  }
  for (const auto& entry : archive.entries()) {
    if (entry.directory()) continue;
    const std::string path = absl::StrCat(dest, "/", entry.path());
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
  for (auto it = folders.rbegin(); it != folders.rend(); ++it) ::chmod(it->first.c_str(), it->second);
  if (absl::Status s = WriteNewFile(absl::StrCat(dest, "/", kCompleteMarker), "", 0400); !s.ok()) {
    return fail(s);
  }
  return dest;
}

}  // namespace tessera
