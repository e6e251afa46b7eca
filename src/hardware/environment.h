// Environment: a snapshot of environment variables, so discovery and isolation read the
// variables of a test (or of a simulated host) instead of the process's own.
// Not thread-safe; copyable value.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace tessera {

class Environment {
 public:
  Environment() = default;
  explicit Environment(std::map<std::string, std::string, std::less<>> vars)
      : vars_(std::move(vars)) {}

  // The variables of the running process.
  static Environment FromProcess();
  // The environment a host's node agent would see: the process's own on the live machine; on a
  // fake tree, the NUL-separated <root>/proc/1/environ when present (in a container that is the
  // entrypoint's environment, where Kubernetes injects TPU_* and node variables), else empty.
  static Environment ForSysroot(const class Sysroot& sysroot);

  std::optional<std::string> Get(std::string_view name) const;
  bool Has(std::string_view name) const { return vars_.find(name) != vars_.end(); }
  void Set(std::string name, std::string value) { vars_[std::move(name)] = std::move(value); }
  void Unset(std::string_view name);

  const std::map<std::string, std::string, std::less<>>& vars() const { return vars_; }

 private:
  std::map<std::string, std::string, std::less<>> vars_;
};

}  // namespace tessera
