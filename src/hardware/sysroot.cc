#include "hardware/sysroot.h"

#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/string_util.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

std::string NormalizeRoot(std::string root) {
  if (root.empty()) return "/";
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root;
}

absl::Status ErrorFor(const std::error_code& ec, std::string_view what, std::string_view path) {
  const std::string message = absl::StrCat(ToAbsl(what), " ", ToAbsl(path), ": ", ec.message());
  if (ec == std::errc::no_such_file_or_directory) return absl::NotFoundError(message);
  return absl::InternalError(message);
}

}  // namespace

Sysroot::Sysroot(std::string root) : root_(NormalizeRoot(std::move(root))) {}

std::string Sysroot::HostPath(std::string_view linux_path) const {
  if (is_live()) return std::string(linux_path);
  return absl::StrCat(root_, ToAbsl(linux_path));
}

bool Sysroot::Exists(std::string_view linux_path) const {
  std::error_code ec;
  return fs::exists(HostPath(linux_path), ec);
}

bool Sysroot::IsDirectory(std::string_view linux_path) const {
  std::error_code ec;
  return fs::is_directory(HostPath(linux_path), ec);
}

bool Sysroot::IsFileLike(std::string_view linux_path) const {
  std::error_code ec;
  const auto status = fs::status(HostPath(linux_path), ec);
  return !ec && fs::exists(status) && !fs::is_directory(status);
}

absl::StatusOr<std::string> Sysroot::ReadFile(std::string_view linux_path) const {
  const std::string path = HostPath(linux_path);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return ErrorFor(std::error_code(errno, std::generic_category()), "cannot read", linux_path);
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return absl::InternalError(absl::StrCat("error reading ", ToAbsl(linux_path)));
  return contents.str();
}

absl::StatusOr<std::string> Sysroot::ReadAttribute(std::string_view linux_path) const {
  auto contents = ReadFile(linux_path);
  if (!contents.ok()) return contents.status();
  std::string_view text = *contents;
  text = text.substr(0, text.find('\n'));
  return std::string(Trim(text));
}

absl::StatusOr<int64_t> Sysroot::ReadInteger(std::string_view linux_path) const {
  auto text = ReadAttribute(linux_path);
  if (!text.ok()) return text.status();
  std::string_view digits = *text;
  int base = 10;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    digits.remove_prefix(2);
    base = 16;
  }
  int64_t value = 0;
  const char* end = digits.data() + digits.size();
  auto [ptr, ec] = std::from_chars(digits.data(), end, value, base);
  if (digits.empty() || ec != std::errc() || ptr != end) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(linux_path), ": expected a number, got ", Quote(*text)));
  }
  return value;
}

absl::StatusOr<std::vector<std::string>> Sysroot::ListDirectory(std::string_view linux_path) const {
  std::error_code ec;
  fs::directory_iterator it(HostPath(linux_path), ec);
  if (ec) return ErrorFor(ec, "cannot list", linux_path);
  std::vector<std::string> names;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return ErrorFor(ec, "cannot list", linux_path);
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<std::string> Sysroot::ReadLink(std::string_view linux_path) const {
  std::error_code ec;
  fs::path target = fs::read_symlink(HostPath(linux_path), ec);
  if (ec) return ErrorFor(ec, "cannot read link", linux_path);
  return target.string();
}

absl::StatusOr<std::string> Sysroot::Resolve(std::string_view linux_path) const {
  std::error_code ec;
  const fs::path resolved = fs::canonical(HostPath(linux_path), ec);
  if (ec) return ErrorFor(ec, "cannot resolve", linux_path);
  if (is_live()) return resolved.string();
  const fs::path root = fs::canonical(root_, ec);
  if (ec) return ErrorFor(ec, "cannot resolve", root_);
  const std::string r = root.string();
  const std::string s = resolved.string();
  if (s == r) return std::string("/");
  if (s.size() <= r.size() || s.compare(0, r.size(), r) != 0 || s[r.size()] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(linux_path), " resolves outside the sysroot ", root_));
  }
  return s.substr(r.size());
}

}  // namespace tessera
