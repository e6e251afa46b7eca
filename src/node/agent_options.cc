#include "node/agent_options.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "hardware/sysroot.h"
#include "node/object_store_sizing.h"
#include "process/private_paths.h"
#include "rpc/token.h"

namespace tessera {
namespace {

// The whole file, trimmed; nullopt when it does not exist.
absl::StatusOr<std::optional<std::string>> ReadTrimmed(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<std::string>();
  std::ifstream in(path);
  if (!in) return absl::PermissionDeniedError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return std::optional<std::string>(std::string(Trim(text.str())));
}

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string DefaultLauncherPath() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec || self.empty()) return "";
  return (self.parent_path() / "tessera-launcher").string();
}

std::string DefaultStateDir(const Environment& env) {
  if (auto dir = env.Get("TESSERA_STATE_DIR"); dir.has_value() && !dir->empty()) return *dir;
  const std::optional<std::string> xdg = env.Get("XDG_STATE_HOME");
  const std::optional<std::string> home = env.Get("HOME");
  return DefaultStateDirectory(xdg ? xdg->c_str() : nullptr, home ? home->c_str() : nullptr);
}

std::string PublishedHeadAddress(const std::string& head_address_file,
                                 const std::string& state_dir) {
  if (head_address_file.empty() || !CheckPrivateDirectory(state_dir).ok()) return "";
  auto published = ReadTrimmed(head_address_file);
  return published.ok() && published->has_value() ? **published : "";
}

absl::StatusOr<AgentOptions> ResolveAgentOptions(AgentOptions options) {
  const Environment env = options.environment.value_or(Environment::FromProcess());
  if (options.bind.empty()) return absl::InvalidArgumentError("bind address is empty");
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port ", options.port, " is out of range"));
  }
  if (options.http_port < -1 || options.http_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HTTP port ", options.http_port, " is out of range (-1 for none, 0 for any free port)"));
  }
  if (options.telemetry_interval_ms <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("telemetry interval ", options.telemetry_interval_ms, " ms is not positive"));
  }
  if (options.max_spillback_hops < 0) {
    return absl::InvalidArgumentError("max_spillback_hops is negative");
  }
  if (options.prestarted_workers < 0 || options.prestarted_workers > kMaxPrestartedWorkers) {
    return absl::InvalidArgumentError(absl::StrCat("prestarted workers ",
                                                   options.prestarted_workers, " is outside [0, ",
                                                   kMaxPrestartedWorkers, "]"));
  }
  if (options.prestarted_workers > 0 && !options.launcher.empty() &&
      !IsExecutableFile(options.launcher)) {
    return absl::InvalidArgumentError(
        absl::StrCat("launcher ", options.launcher, " is not an executable file"));
  }
  if (options.hardware_file.has_value() && options.cluster_file.has_value()) {
    return absl::InvalidArgumentError("give a hardware file or a cluster file, not both");
  }
  if (options.state_dir.empty()) options.state_dir = DefaultStateDir(env);
  // The head's address and the token are read from it: a folder someone else controls could
  // hand this agent their token and their head.
  if (absl::Status trusted = CheckPrivateDirectory(options.state_dir);
      !trusted.ok() && !absl::IsNotFound(trusted)) {
    return trusted;
  }
  {
    const std::string published_file = options.state_dir + "/head.address";
    auto published = ReadTrimmed(published_file);
    if (!published.ok()) return published.status();
    std::vector<std::string> given;
    for (absl::string_view part :
         absl::StrSplit(options.head_address, ',', absl::SkipWhitespace())) {
      given.emplace_back(Trim(std::string_view(part.data(), part.size())));
    }
    if (given.empty() && published->has_value()) given.push_back(**published);
    options.head_address = given.empty() ? "" : given.front();
    options.head_fallbacks.assign(given.begin() + (given.empty() ? 0 : 1), given.end());
    // The head of this folder (the agent dials what it publishes): follow it when it moves.
    if (published->has_value() &&
        std::find(given.begin(), given.end(), **published) != given.end()) {
      options.head_address_file = published_file;
    }
  }
  if (options.token.empty()) {
    const std::string state_token = options.state_dir + "/token";
    std::error_code ec;
    if (!options.token_file.empty()) {
      TESSERA_ASSIGN_OR_RETURN(options.token, rpc::ReadTokenFile(options.token_file));
    } else if (auto token = env.Get("TESSERA_TOKEN"); token.has_value() && !token->empty()) {
      options.token = std::string(Trim(*token));
    } else if (std::filesystem::exists(state_token, ec)) {
      TESSERA_ASSIGN_OR_RETURN(options.token, rpc::ReadTokenFile(state_token));
    } else if (!options.head_address.empty()) {
      return absl::NotFoundError(absl::StrCat("no cluster token: ", state_token,
                                              " does not exist and TESSERA_TOKEN is not set"));
    }
  }
  if (options.node_id.empty()) {
    if (options.cluster_file.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("a node id is required with the cluster file ", *options.cluster_file));
    }
    options.node_id = HostName();
  }
  // Last, after every cheaper check: sized here, before the store allocates anything. A store of
  // 0 needs no meminfo (nor a Linux host).
  if (options.object_store_bytes != 0) {
    TESSERA_ASSIGN_OR_RETURN(const HostMemory memory,
                             ReadHostMemory(Sysroot(options.memory_sysroot)));
    TESSERA_ASSIGN_OR_RETURN(
        options.object_store_bytes,
        DecideObjectStoreSize({.requested_bytes = options.object_store_bytes}, memory));
  }
  return options;
}

}  // namespace tessera
