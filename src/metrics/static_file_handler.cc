#include "metrics/static_file_handler.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"

namespace tessera::metrics {
namespace {

// The canonical absolute path of `path` (every symlink resolved), or the errno why not.
struct Resolved {
  std::string path;
  int error = 0;
};
Resolved RealPath(const std::string& path) {
  std::unique_ptr<char, decltype(&std::free)> resolved(realpath(path.c_str(), nullptr), &std::free);
  if (resolved == nullptr) return {"", errno};
  return {resolved.get(), 0};
}

bool IsInside(std::string_view path, std::string_view root) {
  if (path == root) return true;
  if (root == "/") return absl::StartsWith(ToAbsl(path), "/");
  return path.size() > root.size() && path.substr(0, root.size()) == root &&
         path[root.size()] == '/';
}

class FileServer {
 public:
  FileServer(std::string root, StaticFileOptions options)
      : root_(std::move(root)), options_(std::move(options)) {}

  HttpResponse operator()(const HttpRequest& request) const {
    if (!absl::StartsWith(request.path, options_.mount_prefix)) {
      return TextResponse(404, absl::StrCat("not found: ", Quote(request.path)));
    }
    std::string relative = request.path.substr(options_.mount_prefix.size());
    if (relative.empty() || relative.back() == '/') relative += "index.html";
    std::string path = root_;
    for (absl::string_view segment : absl::StrSplit(relative, '/')) {
      if (segment == "..") {
        return TextResponse(403, "forbidden: the path has a \"..\" segment");
      }
      if (segment.empty() || segment == ".") continue;
      absl::StrAppend(&path, "/", segment);
    }
    const Resolved resolved = RealPath(path);
    if (resolved.error == ENOENT || resolved.error == ENOTDIR) {
      return TextResponse(404, absl::StrCat("not found: ", Quote(request.path)));
    }
    if (resolved.error != 0) {
      return TextResponse(403, absl::StrCat("cannot resolve ", Quote(request.path), ": ",
                                            std::strerror(resolved.error)));
    }
    if (!IsInside(resolved.path, root_)) {
      return TextResponse(403, "forbidden: the path leads outside the served directory");
    }
    // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below).
    const int fd = open(resolved.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
      const int error = errno;
      return TextResponse(
          403, absl::StrCat("cannot open ", Quote(request.path), ": ", std::strerror(error)));
    }
    HttpResponse response = Read(fd, request.path);
    close(fd);
    return response;
  }

 private:
  HttpResponse Read(int fd, const std::string& request_path) const {
    struct stat info {};
    if (fstat(fd, &info) != 0) {
      return TextResponse(403, absl::StrCat("cannot stat ", Quote(request_path)));
    }
    if (!S_ISREG(info.st_mode)) {
      return TextResponse(
          403, absl::StrCat("forbidden: ", Quote(request_path), " is not a regular file"));
    }
    if (static_cast<uint64_t>(info.st_size) > options_.max_file_bytes) {
      return TextResponse(500, absl::StrCat(Quote(request_path), " is larger than ",
                                            options_.max_file_bytes, " bytes"));
    }
    HttpResponse response;
    response.body.resize(static_cast<size_t>(info.st_size));
    size_t got = 0;
    while (got < response.body.size()) {
      const ssize_t n = pread(fd, response.body.data() + got, response.body.size() - got,
                              static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // shrank while read: send what there is
      got += static_cast<size_t>(n);
    }
    response.body.resize(got);
    response.content_type = std::string(ContentTypeForFile(request_path));
    response.headers = {{"Cache-Control", "no-cache"}, {"X-Content-Type-Options", "nosniff"}};
    return response;
  }

  const std::string root_;  // canonical, no trailing "/" (but for "/" itself)
  const StaticFileOptions options_;
};

}  // namespace

std::string_view ContentTypeForFile(std::string_view file_name) {
  std::string_view base = file_name.substr(file_name.rfind('/') + 1);  // npos + 1 == 0
  if (base.empty()) base = "index.html";
  const size_t dot = base.rfind('.');
  if (dot == std::string_view::npos) return "application/octet-stream";
  const std::string extension = absl::AsciiStrToLower(ToAbsl(base.substr(dot + 1)));
  if (extension == "html" || extension == "htm") return "text/html; charset=utf-8";
  if (extension == "js" || extension == "mjs") return "text/javascript; charset=utf-8";
  if (extension == "css") return "text/css; charset=utf-8";
  if (extension == "svg") return "image/svg+xml";
  if (extension == "png") return "image/png";
  if (extension == "json" || extension == "map") return "application/json";
  if (extension == "txt") return "text/plain; charset=utf-8";
  if (extension == "ico") return "image/x-icon";
  if (extension == "wasm") return "application/wasm";
  return "application/octet-stream";
}

absl::StatusOr<HttpHandler> StaticFileHandler(StaticFileOptions options) {
  if (options.mount_prefix.empty() || options.mount_prefix.front() != '/' ||
      options.mount_prefix.back() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("mount prefix ", Quote(options.mount_prefix), " must start and end with '/'"));
  }
  const Resolved root = RealPath(options.root);
  if (root.error != 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot serve ", Quote(options.root), ": ", std::strerror(root.error)));
  }
  struct stat info {};
  if (stat(root.path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot serve ", Quote(options.root), ": not a directory"));
  }
  return HttpHandler(FileServer(root.path, std::move(options)));
}

}  // namespace tessera::metrics
