#include "hardware/environment.h"

#include <unistd.h>

#include "hardware/sysroot.h"

extern char** environ;

namespace tessera {

Environment Environment::FromProcess() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view kv(*entry);
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    env.vars_.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

Environment Environment::ForSysroot(const Sysroot& sysroot) {
  if (sysroot.is_live()) return FromProcess();
  Environment env;
  auto contents = sysroot.ReadFile("/proc/1/environ");
  if (!contents.ok()) return env;
  std::string_view rest = *contents;
  while (!rest.empty()) {
    const size_t end = rest.find('\0');
    const std::string_view kv = rest.substr(0, end);
    const size_t eq = kv.find('=');
    if (eq != std::string_view::npos && eq > 0) {
      env.vars_[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
    }
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  return env;
}

std::optional<std::string> Environment::Get(std::string_view name) const {
  auto it = vars_.find(name);
  if (it == vars_.end()) return std::nullopt;
  return it->second;
}

void Environment::Unset(std::string_view name) {
  auto it = vars_.find(name);
  if (it != vars_.end()) vars_.erase(it);
}

}  // namespace tessera
