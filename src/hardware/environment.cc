#include "hardware/environment.h"

#include <unistd.h>

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
