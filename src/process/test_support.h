// Helpers shared by the process tests: a temporary folder, bounded waiting for a condition,
// small file reads, where the helper child program and the launcher are, and the two ways of
// spawning the suites run with.
// Thread-compatible.
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

namespace tessera::testing {

inline std::string HelperPath() { return TESSERA_PROCESS_TEST_HELPER; }
#ifdef TESSERA_LAUNCHER
inline std::string LauncherPath() { return TESSERA_LAUNCHER; }
#endif

// How a test's children are started: forked by the test process, or from prestarted launchers
// (LauncherPool). The ChildProcess and ProcessSupervisor suites run once with each.
enum class Spawning { kDirect, kPooled };
inline std::string SpawningName(Spawning spawning) {
  return spawning == Spawning::kDirect ? "Direct" : "Pooled";
}

class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "tessera-process-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// Polls `condition` until it holds or a generous deadline passes (robust on a loaded machine;
// returns at once on the happy path).
inline bool WaitUntil(const std::function<bool()>& condition,
                      std::chrono::milliseconds deadline = std::chrono::seconds(20)) {
  auto end = std::chrono::steady_clock::now() + deadline;
  auto pause = std::chrono::microseconds(100);
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(10));
  }
  return true;
}

inline bool FileExists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// True when `pid` is gone or a zombie (a killed orphan may wait for init to reap it).
inline bool ProcessGone(pid_t pid) {
  std::string stat = ReadText("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

inline pid_t ReadPidFile(const std::string& path) {
  return static_cast<pid_t>(std::stol(ReadText(path)));
}

}  // namespace tessera::testing
