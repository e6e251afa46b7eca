// A child for the process tests. Runs its arguments as a list of commands, in order:
//   env                 print every environment variable, one KEY=VALUE a line (stdout)
//   cwd                 print the working directory
//   fds                 print the open file descriptors, one number a line
//   stdin               print what fd 0 is (readlink /proc/self/fd/0)
//   out TEXT / err TEXT print TEXT and a newline on stdout / stderr
//   touch PATH          create PATH (tells the test a point was reached)
//   wait-file PATH      wait until PATH exists
//   grandchild PIDFILE  fork a child that sleeps forever; write its pid to PIDFILE
//   escapee PIDFILE     like grandchild, but the grandchild leaves the group (setsid)
//   ignore-term         ignore SIGTERM
//   alloc-forever       allocate and touch memory until killed (gives up, exit 105, at 2 GiB so
//                       a limit that failed to apply never takes the machine down)
//   pause               sleep until killed
//   kill-self SIG       send SIG to itself
//   exit CODE           exit with CODE
// Anything unknown exits 100.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

void Touch(const char* path) {
  int fd = ::open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) ::close(fd);
}

void WaitFile(const char* path) {
  while (::access(path, F_OK) != 0) ::usleep(1000);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string command = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) std::exit(101);
      return argv[++i];
    };
    if (command == "env") {
      for (char** e = environ; *e != nullptr; ++e) std::printf("%s\n", *e);
    } else if (command == "cwd") {
      char buffer[4096];
      std::printf("%s\n", ::getcwd(buffer, sizeof(buffer)));
    } else if (command == "fds") {
      DIR* dir = ::opendir("/proc/self/fd");
      if (dir == nullptr) return 102;
      std::vector<int> fds;
      while (struct dirent* entry = ::readdir(dir)) {
        if (entry->d_name[0] == '.') continue;
        int fd = std::atoi(entry->d_name);
        if (fd != ::dirfd(dir)) fds.push_back(fd);
      }
      ::closedir(dir);
      for (int fd : fds) std::printf("%d\n", fd);
    } else if (command == "stdin") {
      char target[4096] = {};
      ssize_t n = ::readlink("/proc/self/fd/0", target, sizeof(target) - 1);
      std::printf("%s\n", n > 0 ? target : "?");
    } else if (command == "out") {
      std::printf("%s\n", next());
    } else if (command == "err") {
      std::fprintf(stderr, "%s\n", next());
    } else if (command == "touch") {
      std::fflush(stdout);
      Touch(next());
    } else if (command == "wait-file") {
      WaitFile(next());
    } else if (command == "grandchild" || command == "escapee") {
      const char* pid_file = next();
      bool escape = command == "escapee";
      int ready[2];
      if (::pipe(ready) != 0) return 104;
      pid_t pid = ::fork();
      if (pid == 0) {
        if (escape) ::setsid();
        ::close(ready[1]);  // tells the parent the escape (if any) is done
        for (;;) ::pause();
      }
      ::close(ready[1]);
      char byte;
      while (::read(ready[0], &byte, 1) > 0) {
      }
      ::close(ready[0]);
      std::string tmp = std::string(pid_file) + ".tmp";
      FILE* f = std::fopen(tmp.c_str(), "w");
      if (f == nullptr) return 103;
      std::fprintf(f, "%d\n", pid);
      std::fclose(f);
      std::rename(tmp.c_str(), pid_file);
    } else if (command == "ignore-term") {
      ::signal(SIGTERM, SIG_IGN);
    } else if (command == "alloc-forever") {
      std::vector<char*> blocks;
      while (blocks.size() < 2048) {
        char* block = static_cast<char*>(std::malloc(1 << 20));
        if (block == nullptr) continue;
        std::memset(block, 1, 1 << 20);
        blocks.push_back(block);
      }
      return 105;
    } else if (command == "pause") {
      std::fflush(stdout);
      for (;;) ::pause();
    } else if (command == "kill-self") {
      std::fflush(stdout);
      ::kill(::getpid(), std::atoi(next()));
      for (;;) ::pause();
    } else if (command == "exit") {
      std::fflush(stdout);
      std::exit(std::atoi(next()));
    } else {
      return 100;
    }
    std::fflush(stdout);
  }
  return 0;
}
