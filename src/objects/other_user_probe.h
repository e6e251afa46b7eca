// Test helper (header only): what a unix-socket server does with a client of another user. A
// forked child drops to `uid` (needs root), connects to `socket_path` and reads one byte.
// Thread-compatible; call it from a test's main thread (it forks).
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace tessera::testing {

enum class OtherUserOutcome {
  kClosedWithoutAWord,  // the server closed the connection before sending anything
  kServed,              // the server sent something
  kCannotConnect,       // connect failed (e.g. no permission on the path)
  kCannotBecomeUser,    // setuid failed: not root
  kUnknown,
};

inline OtherUserOutcome ConnectAsOtherUser(const std::string& socket_path, uid_t uid) {
  const pid_t child = fork();
  if (child == 0) {
    if (setgid(uid) != 0 || setuid(uid) != 0) _exit(10);
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_path.c_str(), sizeof(addr.sun_path) - 1);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) _exit(11);
    char byte;
    _exit(read(fd, &byte, 1) == 0 ? 0 : 12);
  }
  if (child < 0) return OtherUserOutcome::kUnknown;
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status)) return OtherUserOutcome::kUnknown;
  switch (WEXITSTATUS(status)) {
    case 0: return OtherUserOutcome::kClosedWithoutAWord;
    case 10: return OtherUserOutcome::kCannotBecomeUser;
    case 11: return OtherUserOutcome::kCannotConnect;
    case 12: return OtherUserOutcome::kServed;
    default: return OtherUserOutcome::kUnknown;
  }
}

}  // namespace tessera::testing
