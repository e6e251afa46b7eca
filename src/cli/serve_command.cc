// tessera serve ARGS...
// Ray Serve's CLI (`serve run|deploy|status|shutdown|build|config`, docs in
// python/tessera/serve/scripts.py), which is Python: this execs
// `$TESSERA_PYTHON -m tessera.serve.scripts ARGS...` (default /usr/bin/python3, the interpreter
// the package's extension is built for) with the same arguments and environment, plus:
// - PYTHONPATH led by the folder holding the package when it lies beside this binary: a build
//   tree (build/bin/tessera, build/python/tessera) or an install prefix
//   (P/bin/tessera, P/lib/python3.X/dist-packages/tessera); found nowhere, the interpreter's own
//   path (and any PYTHONPATH given) must hold it;
// - TESSERA_BIN (unless set) naming this binary, so the package uses the same CLI.
// Every argument after `serve` is passed on as it is (--help too). The exit code is the
// script's: 0 done, 1 an error, 2 bad arguments; 1 here when the interpreter cannot start.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"

namespace tessera::cli {
namespace {

constexpr char kDefaultPython[] = "/usr/bin/python3";

bool HoldsPackage(const std::filesystem::path& folder) {
  std::error_code ec;
  return std::filesystem::is_regular_file(folder / "tessera" / "__init__.py", ec);
}

// The folder holding the tessera package beside `binary`, if any.
std::optional<std::filesystem::path> PackageFolderBeside(const std::filesystem::path& binary) {
  const std::filesystem::path prefix = binary.parent_path().parent_path();
  if (HoldsPackage(prefix / "python")) return prefix / "python";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(prefix / "lib", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("python3", 0) == 0 && HoldsPackage(entry.path() / "dist-packages")) {
      return entry.path() / "dist-packages";
    }
  }
  return std::nullopt;
}

// PYTHONPATH and TESSERA_BIN for the script (see the file's comment).
void PrepareEnvironment() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec || self.empty()) return;  // no binary to name: the environment decides, as given
  setenv("TESSERA_BIN", self.c_str(), /*overwrite=*/0);
  const std::optional<std::filesystem::path> folder = PackageFolderBeside(self);
  if (!folder.has_value()) return;
  const char* existing = std::getenv("PYTHONPATH");
  const std::string path = existing == nullptr || existing[0] == '\0'
                               ? folder->string()
                               : absl::StrCat(folder->string(), ":", existing);
  setenv("PYTHONPATH", path.c_str(), /*overwrite=*/1);
}

int RunServe(const std::vector<std::string>& args) {
  const char* configured = std::getenv("TESSERA_PYTHON");
  const std::string python =
      configured != nullptr && configured[0] != '\0' ? configured : kDefaultPython;
  std::vector<std::string> argv = {python, "-m", "tessera.serve.scripts"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> pointers;
  pointers.reserve(argv.size() + 1);
  for (std::string& arg : argv) pointers.push_back(arg.data());
  pointers.push_back(nullptr);
  PrepareEnvironment();
  execv(python.c_str(), pointers.data());
  return ReportError(absl::StrCat("cannot run ", python,
                                  " (set TESSERA_PYTHON to the "
                                  "interpreter tessera's Python package is built for): ",
                                  std::strerror(errno)));
}

}  // namespace

void AddServeCommand(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Deploy and manage Serve applications (run, deploy, status, shutdown, build, config; "
      "`tessera serve --help`)");
  // Everything after `serve` is the script's, --help included.
  cmd->set_help_flag();
  cmd->prefix_command();
  cmd->callback([cmd, &exit_code] { exit_code = RunServe(cmd->remaining()); });
}

}  // namespace tessera::cli
