// Sysroot: every Linux path Tessera reads (sysfs, /dev, /proc) goes through one root, so the same
// discovery code runs on the live machine ("/") and on fake trees under tests/fixtures/hardware.
// Thread-safe: immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {

class Sysroot {
 public:
  // `root` is a directory; "/" (or "") means the live machine.
  explicit Sysroot(std::string root = "/");

  const std::string& root() const { return root_; }
  bool is_live() const { return root_ == "/"; }

  // The host path of an absolute Linux path, e.g. "/sys/bus/pci" -> "<root>/sys/bus/pci".
  std::string HostPath(std::string_view linux_path) const;

  bool Exists(std::string_view linux_path) const;
  bool IsDirectory(std::string_view linux_path) const;
  // True for anything that is not a directory (device nodes in fake trees are regular files).
  bool IsFileLike(std::string_view linux_path) const;

  // Whole file contents. NotFound when missing, Internal on other read errors.
  absl::StatusOr<std::string> ReadFile(std::string_view linux_path) const;
  // First line, trimmed: the usual shape of a sysfs attribute.
  absl::StatusOr<std::string> ReadAttribute(std::string_view linux_path) const;
  // A sysfs number: decimal, or hex with a 0x prefix ("0x10de"). InvalidArgument when malformed.
  absl::StatusOr<int64_t> ReadInteger(std::string_view linux_path) const;

  // Entry names in a directory, sorted, without "." and "..".
  absl::StatusOr<std::vector<std::string>> ListDirectory(std::string_view linux_path) const;
  // The target of a symbolic link, as stored.
  absl::StatusOr<std::string> ReadLink(std::string_view linux_path) const;
  // The Linux path with every symbolic link resolved, relative to the root (so it starts with
  // "/"). Fails when the resolved path leaves the root.
  absl::StatusOr<std::string> Resolve(std::string_view linux_path) const;

 private:
  std::string root_;
};

}  // namespace tessera
