#include "client/state_folder.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "process/private_paths.h"

namespace tessera::client {

std::string ResolveStateDir(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("TESSERA_STATE_DIR"); env != nullptr && env[0] != '\0') {
    return env;
  }
  return DefaultStateDirectory();
}

absl::StatusOr<StateFolder> TrustedStateFolder(const std::string& flag) {
  std::error_code ec;
  StateFolder state{std::filesystem::absolute(ResolveStateDir(flag), ec).string()};
  if (ec) return absl::InvalidArgumentError(absl::StrCat("state folder: ", ec.message()));
  absl::Status trusted = CheckPrivateDirectory(state.root);
  if (!trusted.ok() && !absl::IsNotFound(trusted)) return trusted;
  return state;
}

absl::StatusOr<std::string> ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  std::string line;
  std::getline(in, line);
  return std::string(Trim(line));
}

std::vector<std::string> NodeIdsInStateFolder(const StateFolder& state) {
  std::vector<std::string> ids;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(state.NodesDir(), ec)) {
    if (entry.is_directory(ec)) ids.push_back(entry.path().filename().string());
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::optional<int> ReadPidFile(const std::string& path) {
  auto line = ReadFirstLine(path);
  if (!line.ok()) return std::nullopt;
  int pid = 0;
  if (!absl::SimpleAtoi(*line, &pid) || pid <= 1) return std::nullopt;
  return pid;
}

bool ProcessAlive(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  // A zombie has exited; only its parent has not collected it yet.
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat) return false;
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return true;
  const char state = text[paren + 2];
  return state != 'Z' && state != 'X';
}

std::string LocalAgentAddress(const StateFolder& state) {
  for (const std::string& node : NodeIdsInStateFolder(state)) {
    const auto pid = ReadPidFile(state.AgentPidFile(node));
    if (!pid.has_value() || !ProcessAlive(*pid)) continue;
    auto address = ReadFirstLine(state.AgentAddressFile(node));
    if (address.ok() && !address->empty()) return *address;
  }
  return "";
}

namespace {

// The same folder, however each side spelled it.
bool SameFolder(const std::string& a, const std::string& b) {
  std::error_code ec;
  const std::filesystem::path x = std::filesystem::weakly_canonical(a, ec);
  if (ec) return false;
  const std::filesystem::path y = std::filesystem::weakly_canonical(b, ec);
  return !ec && x == y;
}

}  // namespace

bool IsTesseraStartProcess(int pid, const StateFolder& state) {
  struct stat owner {};
  if (::stat(absl::StrCat("/proc/", pid).c_str(), &owner) != 0 || owner.st_uid != ::geteuid()) {
    return false;
  }
  std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"), std::ios::binary);
  if (!in) return false;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> argv;
  std::stringstream split(text);
  for (std::string arg; std::getline(split, arg, '\0');) argv.push_back(arg);
  if (argv.size() < 2) return false;
  const std::string program = std::filesystem::path(argv[0]).filename().string();
  if (program.find("tessera") == std::string::npos || argv[1] != "start") return false;
  for (size_t i = 2; i + 1 < argv.size(); ++i) {
    if (argv[i] != "--state-dir") continue;
    std::filesystem::path named = argv[i + 1];
    if (named.is_relative()) {
      // Relative to the daemon's own working folder, not to ours.
      std::error_code ec;
      const std::filesystem::path cwd =
          std::filesystem::read_symlink(absl::StrCat("/proc/", pid, "/cwd"), ec);
      if (ec) return false;
      named = cwd / named;
    }
    return SameFolder(named.string(), state.root);
  }
  return false;
}

}  // namespace tessera::client
